"""`ferry clean-uploads` as a user runs it: only Ferry's marked uploads go, and stale marks."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ferry.cli.main import main
from ferry.engine.upload_marks import UploadMark, mark_key, read_mark, write_mark

FERRY = str(Path(sys.executable).with_name("ferry"))


def ferry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FERRY, *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(params=["versitygw", "minio"])
def server(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


def _mark(key: str, upload_id: str, created: datetime) -> UploadMark:
    return UploadMark(
        dest_key=key,
        upload_id=upload_id,
        job_id="job-1",
        source_bucket="src",
        source_key=key,
        source_version=None,
        source_etag="abc-2",
        source_size=10 * 1024 * 1024,
        strategy="stream-multipart",
        algorithm="CRC32C",
        part_bounds=((0, 5242880), (5242880, 10485760)),
        created=created,
    )


def _upload(server: Any, bucket: str, key: str, *, marked: bool, prefix: str = ".ferry/uploads/") -> str:
    upload_id = server.client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    if marked:
        write_mark(server.client, bucket, _mark(key, upload_id, datetime.now(UTC)), marks_prefix=prefix)
    return upload_id


def _open(server: Any, bucket: str, *keys: str) -> set[tuple[str, str]]:
    found = set()
    for key in keys:  # MinIO lists uploads only for an exact key
        uploads = server.client.list_multipart_uploads(Bucket=bucket, Prefix=key).get("Uploads", [])
        found |= {(u["Key"], u["UploadId"]) for u in uploads if u["Key"] == key}
    return found


def test_clean_uploads_aborts_only_ferrys_uploads_under_the_prefix(server: Any) -> None:
    bucket = server.bucket("clean")
    ours = _upload(server, bucket, "in/a.bin", marked=True)
    theirs = _upload(server, bucket, "in/a.bin", marked=False)
    other_theirs = _upload(server, bucket, "in/b.bin", marked=False)
    outside = _upload(server, bucket, "out/c.bin", marked=True)
    # A mark whose upload already ended (written a day ago, its upload gone):
    ended = _mark("in/gone.bin", "ended-upload", datetime.now(UTC) - timedelta(days=1))
    write_mark(server.client, bucket, ended)
    keys = ("in/a.bin", "in/b.bin", "out/c.bin")

    young = ferry("clean-uploads", f"s3://{bucket}/in/", "--endpoint-url", server.url, "--json")
    assert young.returncode == 0, young.stderr
    report = json.loads(young.stdout)
    assert [e["upload_id"] for e in report["kept"]] == [ours]  # started less than 24 h ago
    assert report["aborted"] == [] and report["errors"] == []
    assert [e["upload_id"] for e in report["marks_deleted"]] == ["ended-upload"]
    assert read_mark(server.client, bucket, "in/gone.bin", "ended-upload") is None

    dry = ferry(
        "clean-uploads", f"s3://{bucket}/in/", "--endpoint-url", server.url, "--older-than", "0", "--dry-run"
    )
    assert dry.returncode == 0, dry.stderr
    assert f"would abort s3://{bucket}/in/a.bin (upload {ours}" in dry.stdout
    assert len(_open(server, bucket, *keys)) == 4  # a dry run aborts nothing

    run = ferry("clean-uploads", f"s3://{bucket}/in", "--endpoint-url", server.url, "--older-than", "0s")
    assert run.returncode == 0, run.stderr
    assert f"aborted s3://{bucket}/in/a.bin (upload {ours}" in run.stdout
    assert "1 of Ferry's uploads aborted, 0 kept" in run.stdout
    assert _open(server, bucket, *keys) == {
        ("in/a.bin", theirs),
        ("in/b.bin", other_theirs),
        ("out/c.bin", outside),
    }  # someone else's uploads, and Ferry's outside the prefix, survive
    assert read_mark(server.client, bucket, "in/a.bin", ours) is None
    assert server.keys(bucket) == [mark_key("out/c.bin", outside)]


def test_clean_uploads_with_another_marks_prefix(server: Any) -> None:
    bucket = server.bucket("clean")
    ours = _upload(server, bucket, "k.bin", marked=True, prefix="ops/marks/")
    default = ferry(
        "clean-uploads", f"s3://{bucket}", "--endpoint-url", server.url, "--older-than", "0", "--json"
    )
    assert json.loads(default.stdout)["aborted"] == []
    run = ferry(
        "clean-uploads",
        f"s3://{bucket}",
        "--endpoint-url",
        server.url,
        "--older-than",
        "0",
        "--marks-prefix",
        "ops/marks",
    )
    assert run.returncode == 0, run.stderr
    assert ours in run.stdout
    assert _open(server, bucket, "k.bin") == set()
    assert server.keys(bucket) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["bucket-only"],
            "ferry: error: the location 'bucket-only' is not an S3 URL: write s3://bucket or s3://bucket/prefix",
        ),
        (
            ["s3://bkt", "--older-than", "yesterday"],
            "ferry: error: --older-than 'yesterday' is not an age: write a number and a unit, such as 30m, 24h or 7d",
        ),
        (
            ["s3://bkt", "--marks-prefix", "/abs"],
            "ferry: error: --marks-prefix '/abs' must be a folder in the bucket, such as .ferry/uploads/",
        ),
    ],
)
def test_clean_uploads_bad_arguments_fail_in_one_line(args: list[str], message: str) -> None:
    stdout, stderr = io.StringIO(), io.StringIO()
    assert main(["clean-uploads", *args], stdout, stderr) == 1
    assert stderr.getvalue().strip() == message
    assert stdout.getvalue() == ""


def test_clean_uploads_on_a_missing_bucket_says_so(versitygw: Any) -> None:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(
        ["clean-uploads", "s3://no-such-bucket-here", "--endpoint-url", versitygw.url], stdout, stderr
    )
    assert code == 1
    assert stderr.getvalue().startswith(
        "ferry: error: destination bucket 'no-such-bucket-here' does not exist"
    )
    assert len(stderr.getvalue().strip().splitlines()) == 1
