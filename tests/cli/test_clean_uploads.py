"""`ferry clean-uploads` as a user runs it: only Ferry's marked uploads go, and stale marks."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ferry.cli.main import main
from ferry.engine.records.upload_marks import UploadMark, mark_key, read_mark, write_mark
from version_histories import ferrys_history, versioned

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


def _left_by_a_plain_delete(server: Any, bucket: str, key: str, upload_id: str) -> str:
    """A mark written and then deleted without its version id, as Ferry once deleted marks: in
    a versioned bucket its version stays, under a delete marker. Returns the mark's key."""
    write_mark(server.client, bucket, _mark(key, upload_id, datetime.now(UTC) - timedelta(days=3)))
    server.client.delete_object(Bucket=bucket, Key=mark_key(key, upload_id))
    return mark_key(key, upload_id)


def test_clean_uploads_removes_what_plain_deletes_of_marks_left_in_a_versioned_bucket(server: Any) -> None:
    bucket = versioned(server, "clean")
    inside = _left_by_a_plain_delete(server, bucket, "in/a.bin", "ended-1")
    outside = _left_by_a_plain_delete(server, bucket, "out/c.bin", "ended-2")
    live = _upload(server, bucket, "in/live.bin", marked=True)  # its mark is current: it stays
    history = sorted(ferrys_history(server, bucket))
    assert [kind for _, kind in history].count("delete marker") == 2 and len(history) == 5

    dry = ferry("clean-uploads", f"s3://{bucket}/in/", "--endpoint-url", server.url, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    listed = json.loads(dry.stdout)["leftovers_deleted"]
    assert sorted((e["mark"], e["delete_marker"], e["key"]) for e in listed) == [
        (inside, False, "in/a.bin"),
        (inside, True, "in/a.bin"),
    ]
    assert sorted(ferrys_history(server, bucket)) == history  # a dry run deletes nothing

    run = ferry("clean-uploads", f"s3://{bucket}/in/", "--endpoint-url", server.url)
    assert run.returncode == 0, run.stderr
    assert "2 leftovers of deleted marks deleted (versions and delete markers)" in run.stdout
    assert {key for key, _ in ferrys_history(server, bucket)} == {outside, mark_key("in/live.bin", live)}

    whole = ferry("clean-uploads", f"s3://{bucket}", "--endpoint-url", server.url, "--json")
    assert whole.returncode == 0, whole.stderr
    assert [e["mark"] for e in json.loads(whole.stdout)["leftovers_deleted"]] == [outside, outside]
    assert ferrys_history(server, bucket) == [(mark_key("in/live.bin", live), "version")]
    assert _open(server, bucket, "in/live.bin") == {("in/live.bin", live)}  # too young to abort


def test_a_leftover_under_object_lock_retention_is_named_and_its_delete_marker_kept(server: Any) -> None:
    """A version the bucket keeps until its retention ends cannot be deleted: the command says
    which, fails, and keeps the delete marker above it, so the old mark does not come back as
    a current object; the next clean after the retention ends removes both."""
    bucket = f"locked-{uuid.uuid4().hex[:12]}"
    server.client.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    server.client.put_object_lock_configuration(
        Bucket=bucket,
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}},
        },
    )
    key = mark_key("in/a.bin", "ended-1")
    server.client.put_object(
        Bucket=bucket,
        Key=key,
        Body=_mark("in/a.bin", "ended-1", datetime.now(UTC)).to_json().encode(),
        ChecksumAlgorithm="CRC32",  # a PUT into a bucket with a default retention needs one
    )
    server.client.delete_object(Bucket=bucket, Key=key)

    run = ferry("clean-uploads", f"s3://{bucket}", "--endpoint-url", server.url)

    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith(f"ferry: error: s3://{bucket}/{key} (version ")
    assert line.endswith(
        f"(s3://{bucket} keeps every new version under Object Lock, GOVERNANCE, 1 day: such a version "
        "can be deleted once its retention ends; run this again then)"
    ), line
    assert sorted(kind for _, kind in ferrys_history(server, bucket)) == ["delete marker", "version"]
