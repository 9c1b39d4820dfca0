"""Upload marks leave nothing behind in a versioned or Object Lock destination.

A multipart copy marks its upload in the destination (engine/records/upload_marks.py) and removes the
mark when the upload ends. On a versioned bucket a plain DeleteObject only stacks a delete
marker on the mark: its version and the marker would stay in the bucket's history for good.
Here each door of the command line (`ferry copy`, `ferry sync`, `--all-versions`) copies
multipart sources into versioned buckets on real servers, and the destination's whole version
listing is read back: only the source's keys, nothing under the marks prefix.
"""

from __future__ import annotations

import io
import os
import uuid

import pytest

from conftest import S3Server
from ferry.cli.main import main
from ferry.models import DEFAULT_MARKS_PREFIX
from version_histories import ferrys_history, put_in_parts, versioned

MiB = 1024 * 1024
PART = 5 * MiB
STREAM = ("--mode", "stream", "--part-size", "5MiB", "--multipart-threshold", "5MiB")


@pytest.fixture(params=["versitygw", "minio"])
def server(request: pytest.FixtureRequest) -> S3Server:
    return request.getfixturevalue(request.param)


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def listed_versions(server: S3Server, bucket: str) -> tuple[list[str], list[str]]:
    """Every version's key and every delete marker's key in the bucket, sorted."""
    answer = server.client.list_object_versions(Bucket=bucket)
    return (
        sorted(v["Key"] for v in answer.get("Versions", [])),
        sorted(m["Key"] for m in answer.get("DeleteMarkers", [])),
    )


@pytest.mark.parametrize("command", ["copy", "sync"])
@pytest.mark.parametrize("mode", ["stream", "server-side"])
def test_a_multipart_copy_into_a_versioned_bucket_leaves_only_the_copy(
    server: S3Server, command: str, mode: str
) -> None:
    src, dst = server.bucket("src"), versioned(server, "dst")
    data = os.urandom(3 * PART - 1000)
    put_in_parts(server.client, src, "p/big.bin", data, PART)
    args = ["--mode", mode, "--part-size", "5MiB", "--multipart-threshold", "5MiB"]
    if mode == "server-side" and server.name == "versitygw":
        args += ["--checksum-algorithm", "CRC32C"]  # else one CopyObject proves it: no parts

    code, out, err = call(command, f"s3://{src}/p/", f"s3://{dst}/q/", "--endpoint-url", server.url, *args)

    assert code == 0, err
    assert server.client.get_object(Bucket=dst, Key="q/big.bin")["Body"].read() == data
    assert listed_versions(server, dst) == (["q/big.bin"], [])
    assert ferrys_history(server, dst) == []


def test_all_versions_leaves_only_the_sources_keys(server: S3Server) -> None:
    src, dst = versioned(server, "src"), versioned(server, "dst")
    put_in_parts(server.client, src, "p/big.bin", os.urandom(2 * PART + 1), PART)
    put_in_parts(server.client, src, "p/big.bin", os.urandom(2 * PART + 2), PART)
    server.client.put_object(Bucket=src, Key="p/small.txt", Body=b"small")

    code, out, err = call(
        "copy", f"s3://{src}/p", f"s3://{dst}/q", "--endpoint-url", server.url, "--all-versions", *STREAM
    )

    assert code == 0, err
    assert "3 objects: 3 copied" in out
    assert listed_versions(server, dst) == (["q/big.bin", "q/big.bin", "q/small.txt"], [])
    assert ferrys_history(server, dst) == []


def _locked_bucket(server: S3Server, *, default_retention: bool) -> str:
    name = f"locked-{uuid.uuid4().hex[:12]}"
    server.client.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    if default_retention:
        server.client.put_object_lock_configuration(
            Bucket=name,
            ObjectLockConfiguration={
                "ObjectLockEnabled": "Enabled",
                "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}},
            },
        )
    return name


@pytest.mark.parametrize("mode", ["stream", "server-side"])
def test_a_bucket_that_locks_new_versions_gets_no_mark_and_the_run_says_so_once(
    server: S3Server, mode: str
) -> None:
    """Every version written into such a bucket is kept until its retention ends: a mark
    there could not be removed, so none is written (nor the encryption probe a server-side
    copy may write there), and the run says so in one note."""
    src, dst = server.bucket("src"), _locked_bucket(server, default_retention=True)
    for n in range(2):
        put_in_parts(server.client, src, f"p/big-{n}.bin", os.urandom(2 * PART + n), PART)
    args = ["--mode", mode, "--part-size", "5MiB", "--multipart-threshold", "5MiB"]
    if mode == "server-side" and server.name == "versitygw":
        args += ["--checksum-algorithm", "CRC32C"]

    code, out, err = call("copy", f"s3://{src}/p/", f"s3://{dst}/q/", "--endpoint-url", server.url, *args)

    assert code == 0, err
    assert listed_versions(server, dst) == (["q/big-0.bin", "q/big-1.bin"], [])
    assert ferrys_history(server, dst) == []
    notes = [line for line in out.splitlines() if "Object Lock" in line]
    assert len(notes) == 1, out
    assert f"s3://{dst}" in notes[0] and "GOVERNANCE" in notes[0] and "no upload marks" in notes[0]


def test_a_lock_enabled_bucket_without_default_retention_keeps_marks_and_leaves_none(
    server: S3Server,
) -> None:
    src, dst = server.bucket("src"), _locked_bucket(server, default_retention=False)
    put_in_parts(server.client, src, "p/big.bin", os.urandom(2 * PART + 7), PART)

    code, out, err = call("copy", f"s3://{src}/p/", f"s3://{dst}/q/", "--endpoint-url", server.url, *STREAM)

    assert code == 0, err
    assert "Object Lock" not in out
    assert listed_versions(server, dst) == (["q/big.bin"], [])
    assert ferrys_history(server, dst) == []


def test_marks_prefix_is_where_the_history_is_read(server: S3Server) -> None:
    """The helper reads the marks prefix: a version and a marker left there are found."""
    bucket = versioned(server, "b")
    key = f"{DEFAULT_MARKS_PREFIX}x/y.json"
    server.client.put_object(Bucket=bucket, Key=key, Body=b"{}")
    server.client.delete_object(Bucket=bucket, Key=key)
    assert sorted(ferrys_history(server, bucket)) == [(key, "delete marker"), (key, "version")]
