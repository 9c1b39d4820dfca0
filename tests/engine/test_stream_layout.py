"""Streamed copies of multipart sources reproduce the source's part layout, as server-side does.

A multipart source's ETag is the MD5 of its part MD5s followed by `-N`. When no full-object
checksum is stored (an upload made without a checksum algorithm: MinIO and moto store none;
versitygw stores a COMPOSITE one when asked), that ETag, or the composite checksum, is the
only content evidence, and only a copy in the same parts can match it. A copy in other parts,
or in one PutObject, is proved by size alone, and the next run cannot tell it is identical,
so it copies it again every time.
"""

from __future__ import annotations

import os
import tracemalloc
from typing import Any

import pytest

from ferry import Copier, CopyPolicy, SourceObject, Status, Strategy, Target

MiB = 1024 * 1024


def put_parts(client: Any, bucket: str, key: str, sizes: list[int], **create: Any) -> bytes:
    """A multipart object in exactly these part sizes; `create` may ask for a checksum."""
    upload = client.create_multipart_upload(Bucket=bucket, Key=key, **create)
    algorithm = create.get("ChecksumAlgorithm")
    data, parts = b"", []
    for number, size in enumerate(sizes, start=1):
        chunk = os.urandom(size)
        data += chunk
        extra = {"ChecksumAlgorithm": algorithm} if algorithm else {}
        response = client.upload_part(
            Bucket=bucket, Key=key, UploadId=upload["UploadId"], PartNumber=number, Body=chunk, **extra
        )
        part = {"PartNumber": number, "ETag": response["ETag"]}
        if algorithm:
            part[f"Checksum{algorithm}"] = response[f"Checksum{algorithm}"]
        parts.append(part)
    client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload["UploadId"], MultipartUpload={"Parts": parts}
    )
    return data


def part_sizes(client: Any, bucket: str, key: str, count: int) -> list[int]:
    return [
        client.head_object(Bucket=bucket, Key=key, PartNumber=n)["ContentLength"] for n in range(1, count + 1)
    ]


# Below the default multipart threshold (16 MiB): one PutObject would hold each of them.
LAYOUTS = {"5MiB+5MiB+1B": [5 * MiB, 5 * MiB, 1], "5MiB+1B": [5 * MiB, 1]}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize(
    ("source_server", "dest_server"),
    [("minio", "minio"), ("minio", "versitygw"), ("motoserver", "motoserver")],
)
def test_stream_of_checksumless_multipart_source_keeps_its_etag_and_is_skipped_next_run(
    request: pytest.FixtureRequest, source_server: str, dest_server: str, layout: str
) -> None:
    source, dest = request.getfixturevalue(source_server), request.getfixturevalue(dest_server)
    src, dst = source.bucket("src"), dest.bucket("dst")
    sizes = LAYOUTS[layout]
    data = put_parts(source.client, src, "obj.bin", sizes)
    source_head = source.client.head_object(Bucket=src, Key="obj.bin", ChecksumMode="ENABLED")
    assert not [k for k in source_head if k.startswith("Checksum") and k != "ChecksumType"]
    assert source_head["ETag"].strip('"').endswith(f"-{len(sizes)}")

    def run() -> Any:
        with Copier(source.endpoint, dest.endpoint, CopyPolicy(mode="stream")) as copier:
            return copier.copy(SourceObject(src, "obj.bin"), Target(dst, "obj.bin"))

    first = run()
    assert first.status == Status.COPIED, first.reason
    assert first.strategy == Strategy.STREAM_MULTIPART  # never one PUT: its ETag cannot end in -N
    assert first.verified_by == "etag"  # MD5 of the part MD5s, before the upload was completed
    got = dest.client.get_object(Bucket=dst, Key="obj.bin")
    assert got["Body"].read() == data
    assert got["ETag"] == source_head["ETag"]
    assert part_sizes(dest.client, dst, "obj.bin", len(sizes)) == sizes

    second = run()
    assert second.status == Status.SKIPPED, second.reason
    assert second.reason == f"identical (ETag {source_head['ETag'].strip(chr(34))})"


def test_stream_of_composite_checksum_source_below_threshold_keeps_its_layout(
    versitygw: Any, vgw_buckets: tuple[str, str]
) -> None:
    """versitygw stores a COMPOSITE CRC32 for parts uploaded with one: only the same parts match it."""
    src, dst = vgw_buckets
    data = put_parts(versitygw.client, src, "obj.bin", [5 * MiB, 1], ChecksumAlgorithm="CRC32")
    source_head = versitygw.client.head_object(Bucket=src, Key="obj.bin", ChecksumMode="ENABLED")
    assert source_head["ChecksumType"] == "COMPOSITE"

    def run() -> Any:
        with Copier(versitygw.endpoint, versitygw.endpoint, CopyPolicy(mode="stream")) as copier:
            return copier.copy(SourceObject(src, "obj.bin"), Target(dst, "obj.bin"))

    first = run()
    assert first.status == Status.COPIED, first.reason
    assert first.strategy == Strategy.STREAM_MULTIPART
    assert first.verified_by == "crc32 (composite)"
    assert versitygw.client.get_object(Bucket=dst, Key="obj.bin")["Body"].read() == data
    assert versitygw.client.head_object(Bucket=dst, Key="obj.bin")["ETag"] == source_head["ETag"]

    second = run()
    assert second.status == Status.SKIPPED, second.reason


def test_source_parts_larger_than_the_memory_limit_are_not_reproduced(minio: Any) -> None:
    """A part's whole buffer is granted at once: a reproduced 12 MiB part under an 8 MiB limit
    would run alone past the bound. The copy goes in parts that fit, is proved by the source's
    ETag recomputed over the source's parts, and says why the next run copies it again."""
    src, dst = minio.bucket("src"), minio.bucket("dst")
    data = put_parts(minio.client, src, "big.bin", [12 * MiB, 12 * MiB, 1])
    size = len(data)
    del data
    bound = 8 * MiB
    slack = 3 * MiB  # botocore and bookkeeping (test_memory.py measured about 1 MiB)
    with Copier(minio.endpoint, minio.endpoint, CopyPolicy(mode="stream"), memory_limit=bound) as copier:
        tracemalloc.start()
        try:
            result = copier.copy(SourceObject(src, "big.bin"), Target(dst, "big.bin"))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()

    assert result.status == Status.COPIED, result.reason
    assert result.strategy == Strategy.STREAM_MULTIPART
    assert copier.memory_peak <= bound
    assert peak < bound + slack < 12 * MiB  # one reproduced part in memory cannot pass
    assert result.verified_by == "etag"  # the source's ETag recomputed over its own parts (layout_etag)
    assert "exceed the memory limit (8.0 MiB)" in (result.note or ""), result.note
    assert "next run copies it again" in (result.note or ""), result.note
    print(result.note)
    assert minio.client.head_object(Bucket=dst, Key="big.bin")["ContentLength"] == size
