"""How `ferry copy` proves a server-side copy on MinIO, and what its summary says when only the
size could prove it: the `ferry` command as a user runs it, against a real MinIO.

MinIO's CopyObject answer carries no checksum of the copy, though the copy stores one: a
HEAD of the copy with ChecksumMode gives it, and `ferry check` compares it."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import S3Server
from ferry_process import ferry

MiB = 1024 * 1024


def test_a_server_side_copy_of_a_source_with_a_full_object_crc32c_is_proved_by_it(
    minio: S3Server, tmp_path: Path
) -> None:
    src, dst = minio.bucket("src"), minio.bucket("dst")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(17 * MiB))
    where = ("--endpoint-url", minio.url)
    upload = ferry("copy", str(big), f"s3://{src}/big.bin", *where)
    assert upload.returncode == 0, upload.stdout + upload.stderr
    head = minio.client.head_object(Bucket=src, Key="big.bin", ChecksumMode="ENABLED")
    assert head["ChecksumType"] == "FULL_OBJECT" and "ChecksumCRC32C" in head
    assert head["ETag"].strip('"').endswith("-3")  # multipart: its ETag is no MD5 of the bytes

    copy = ferry("copy", f"s3://{src}/", f"s3://{dst}/", *where, "--mode", "server-side")

    assert copy.returncode == 0, copy.stdout + copy.stderr
    assert "verified by: crc32c (full object) 1" in copy.stdout, copy.stdout
    assert "not proved identical byte for byte" not in copy.stdout
    check = ferry("check", f"s3://{src}/", f"s3://{dst}/", *where)
    assert "identical by: checksum 1" in check.stdout, check.stdout


def test_a_copy_proved_by_size_alone_is_said_to_be_in_the_summary(minio: S3Server) -> None:
    """A multipart source with no checksum, copied in parts of another size: its copy's ETag
    is another, and nothing but the size can be compared. The summary says so, as `ferry
    check` does, not only `verified by: size`."""
    src, dst = minio.bucket("src"), minio.bucket("dst")
    body = os.urandom(12 * MiB)
    upload = minio.client.create_multipart_upload(Bucket=src, Key="mp.bin")["UploadId"]
    parts = []
    for number, start in enumerate(range(0, len(body), 5 * MiB), start=1):
        answer = minio.client.upload_part(
            Bucket=src, Key="mp.bin", UploadId=upload, PartNumber=number, Body=body[start : start + 5 * MiB]
        )
        parts.append({"PartNumber": number, "ETag": answer["ETag"]})
    minio.client.complete_multipart_upload(
        Bucket=src, Key="mp.bin", UploadId=upload, MultipartUpload={"Parts": parts}
    )
    where = ("--endpoint-url", minio.url)

    copy = ferry(
        "copy", f"s3://{src}/", f"s3://{dst}/", *where, "--mode", "server-side", "--part-size", "8MiB"
    )

    assert copy.returncode == 0, copy.stdout + copy.stderr
    assert "verified by: size 1" in copy.stdout, copy.stdout
    assert (
        "  note: 1 object verified by size alone (no checksum or ETag comparable with the source's): "
        "not proved identical byte for byte"
    ) in copy.stdout.splitlines(), copy.stdout
    check = ferry("check", f"s3://{src}/", f"s3://{dst}/", *where)
    assert "identical by: size 1" in check.stdout and "not proved identical byte for byte" in check.stdout
