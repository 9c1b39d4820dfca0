"""A source that ignores `Range` (a server or proxy without ranged reads) answers every ranged
GET with the whole object, 200 OK: no part's bytes but the first's. Whatever reads ranges (a
download in parts, a streamed copy in parts) fails such an object at once, naming it, instead
of taking the object's first bytes for a later part's or asking again for what comes the same."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from test_local_download import ferry, put_in_parts

from conftest import S3Server

MiB = 1024 * 1024
REASON = "the source ignores Range"


def test_a_download_in_parts_fails_at_once_and_leaves_nothing(
    versitygw: S3Server, quirks: Any, tmp_path: Path
) -> None:
    """An object of 80 MiB is fetched in two runs (64 MiB, then 16 MiB); the second run's
    answer starts at byte 0, not at 64 MiB. The download fails on the first such answer without
    writing its bytes at the range's place or asking again (before: an empty range, five times
    over, and 'got more than the 0 bytes expected'), and keeps no temporary file: no resume
    can mend it."""
    bucket = versitygw.bucket("down")
    put_in_parts(versitygw, bucket, "big", os.urandom(80 * MiB), 16 * MiB, ChecksumAlgorithm="CRC32")
    proxy = quirks(versitygw, "ignores-range")
    dst = tmp_path / "out"

    run = ferry(proxy.url, versitygw.region, f"s3://{bucket}/big", f"{dst}/")

    assert run.returncode == 2, run.stdout + run.stderr
    assert REASON in run.stdout, run.stdout
    ranged = [seen for seen in proxy.requests("GET") if "range" in seen.headers]
    assert len(ranged) <= 2, [seen.headers["range"] for seen in ranged]
    assert not dst.exists() or list(dst.iterdir()) == []


def test_a_streamed_copy_in_parts_fails_at_once_and_leaves_no_upload(
    versitygw: S3Server, quirks: Any
) -> None:
    """A 24 MiB object streamed in 8 MiB parts: each part's GET brings the whole object. The
    copy fails on it, each part's range asked once (before: five times each, with pauses, and
    'got more than the 8388608 bytes expected'), and its multipart upload is aborted."""
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    put_in_parts(versitygw, src, "big", os.urandom(24 * MiB), 8 * MiB, ChecksumAlgorithm="CRC32")
    proxy = quirks(versitygw, "ignores-range")

    run = ferry(
        proxy.url,
        versitygw.region,
        f"s3://{src}/big",
        f"s3://{dst}/copy",
        "--mode",
        "stream",
        "--part-size",
        "8MiB",
        "--multipart-threshold",
        "8MiB",
    )

    assert run.returncode == 2, run.stdout + run.stderr
    assert REASON in run.stdout, run.stdout
    ranges = [seen.headers["range"] for seen in proxy.requests("GET") if "range" in seen.headers]
    assert len(ranges) == len(set(ranges)) <= 3, ranges
    assert versitygw.client.list_multipart_uploads(Bucket=dst).get("Uploads", []) == []
    assert versitygw.client.list_objects_v2(Bucket=dst).get("KeyCount") == 0
