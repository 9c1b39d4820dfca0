"""MinIO's deviations from S3 that Ferry users meet, against a real MinIO on 127.0.0.1.

MinIO refuses UploadPartCopy into an upload created with a checksum algorithm ("checksum
missing, want CRC32C"): it expects a part checksum that a server-side part copy cannot send.
"""

from __future__ import annotations

import os
import time
from typing import Any

from test_deadline import clock_runs_out_after
from test_strategies import METADATA, put_multipart_source

from ferry import Copier, CopyPolicy, MemoryCheckpointStore, SourceObject, Status, Target
from ferry.engine.records.checkpoints import copy_id
from ferry.engine.strategies.server_side import NO_PART_CHECKSUMS_NOTE

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


def test_a_checkpoint_saved_without_checksums_is_resumed_by_another_process(
    minio: Any, monkeypatch: Any
) -> None:
    """A Lambda pass that learned MinIO's refusal checkpoints parts copied without checksums;
    the next pass (a new process that has not learned it) resumes them, not starts again."""
    src, dst = minio.bucket("src"), minio.bucket("dst")
    body = os.urandom(5 * 5 * MiB + 7)
    put_multipart_source(minio.client, src, "big", body)
    store = MemoryCheckpointStore()
    policy = CopyPolicy(mode="server-side")

    clock_runs_out_after(monkeypatch, 3)  # the refused try and 1-2 parts, then the deadline
    with Copier(minio.endpoint, minio.endpoint, policy, part_concurrency=1, checkpoints=store) as copier:
        first = copier.copy(SourceObject(src, "big"), Target(dst, "big"), deadline=time.monotonic() + 600)
    assert first.status == Status.PENDING, first.reason
    saved = store.load(copy_id(src, "big", None, dst, "big"))
    assert saved is not None and saved.algorithm is None and 1 <= len(saved.parts) < 6

    monkeypatch.undo()
    creates: list[dict[str, Any]] = []
    with Copier(minio.endpoint, minio.endpoint, policy, part_concurrency=1, checkpoints=store) as copier:
        copier.ctx.dest_client.meta.events.register(
            "provide-client-params.s3.CreateMultipartUpload", lambda params, **_: creates.append(dict(params))
        )
        second = copier.copy(SourceObject(src, "big"), Target(dst, "big"))

    assert second.status == Status.COPIED, second.reason
    assert second.parts_resumed == len(saved.parts)
    assert creates == []  # the saved upload was adopted
    assert minio.client.get_object(Bucket=dst, Key="big")["Body"].read() == body
    assert minio.open_uploads(dst) == []
