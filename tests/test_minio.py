"""MinIO's deviations from S3 that Ferry users meet, against a real MinIO on 127.0.0.1.

MinIO refuses UploadPartCopy into an upload created with a checksum algorithm ("checksum
missing, want CRC32C"): it expects a part checksum that a server-side part copy cannot send.
"""

from __future__ import annotations

import os
from typing import Any

from ferry import Copier, CopyPolicy, SourceObject, Status, Target
from ferry.server_side import NO_PART_CHECKSUMS_NOTE
from test_strategies import METADATA, put_multipart_source

MiB = 1024 * 1024


def _sources(server: Any, bucket: str, count: int) -> dict[str, bytes]:
    """Multipart sources in 5 MiB parts with an MD5 ETag: a faithful copy must reproduce the
    layout with UploadPartCopy for the ETags to match."""
    data = {f"big/{n}.bin": os.urandom(11 * MiB + n) for n in range(count)}
    for key, body in data.items():
        put_multipart_source(server.client, bucket, key, body)
    return data


def test_server_side_multipart_copies_without_part_checksums_where_minio_refuses_them(minio: Any) -> None:
    src, dst = minio.bucket("src"), minio.bucket("dst")
    data = _sources(minio, src, 3)
    creates: list[dict[str, Any]] = []
    with Copier(minio.endpoint, minio.endpoint, CopyPolicy(mode="server-side"), concurrency=1) as copier:
        copier.ctx.dest_client.meta.events.register(
            "provide-client-params.s3.CreateMultipartUpload", lambda params, **_: creates.append(dict(params))
        )
        results = [copier.copy(SourceObject(src, key), Target(dst, key)) for key in sorted(data)]

    for result in results:
        assert result.status == Status.COPIED, result.reason
        assert result.strategy == "server-side-multipart"
        assert result.verified_by == "etag"  # the reproduced layout gives the source's ETag
        assert result.note == NO_PART_CHECKSUMS_NOTE
    for key, body in data.items():
        got = minio.client.get_object(Bucket=dst, Key=key)
        assert got["Body"].read() == body
        assert got["Metadata"] == METADATA
        assert got["ETag"] == minio.client.head_object(Bucket=src, Key=key)["ETag"]
    assert minio.open_uploads(dst) == []
    # The refusal is learned once: the first object tries with a checksum, then none does.
    with_checksum = [c for c in creates if "ChecksumAlgorithm" in c]
    assert len(with_checksum) == 1 and len(creates) == 4


def test_a_checksum_the_caller_asked_for_is_not_dropped(minio: Any) -> None:
    src, dst = minio.bucket("src"), minio.bucket("dst")
    data = _sources(minio, src, 1)
    key = next(iter(data))
    policy = CopyPolicy(mode="server-side", checksum_algorithm="CRC32C")
    with Copier(minio.endpoint, minio.endpoint, policy) as copier:
        result = copier.copy(SourceObject(src, key), Target(dst, key))

    assert result.status == Status.FAILED
    assert "checksum missing" in (result.reason or "")
    assert "copy without --checksum-algorithm, or with --mode stream" in (result.reason or "")
    assert minio.keys(dst) == []
    assert minio.open_uploads(dst) == []
