"""`ferry copy` as a user runs it: the installed executable, its exit codes, output and report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import S3Server, free_port

FERRY = str(Path(sys.executable).with_name("ferry"))


def ferry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FERRY, *args], capture_output=True, text=True, timeout=300)


def put(server: S3Server, bucket: str, keys: list[str], body: bytes = b"payload") -> None:
    for key in keys:
        server.client.put_object(Bucket=bucket, Key=key, Body=body)


def test_copy_prefix_maps_keys_under_destination_prefix_and_exits_0(versitygw, vgw_buckets, tmp_path):
    src, dst = vgw_buckets
    put(versitygw, src, ["photos/a.jpg", "photos/2024/b.jpg", "photosX/not-me.jpg", "other/c.txt"])
    report = tmp_path / "report.jsonl"
    run = ferry(
        "copy",
        f"s3://{src}/photos",
        f"s3://{dst}/backup",
        "--endpoint-url",
        versitygw.url,
        "--report",
        str(report),
    )
    assert run.returncode == 0, run.stderr
    assert sorted(versitygw.keys(dst)) == ["backup/2024/b.jpg", "backup/a.jpg"]
    assert "2 objects: 2 copied, 0 skipped, 0 failed" in run.stdout
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert {line["key"] for line in lines[:-1]} == {"photos/a.jpg", "photos/2024/b.jpg"}
    assert all(line["status"] == "copied" for line in lines[:-1])
    assert lines[-1]["summary"]["copied"] == 2 and lines[-1]["summary"]["objects"] == 2


def test_single_object_source_copies_to_key_or_into_folder(versitygw, vgw_buckets):
    src, dst = vgw_buckets
    put(versitygw, src, ["dir/file.txt"])
    assert (
        ferry(
            "copy", f"s3://{src}/dir/file.txt", f"s3://{dst}/renamed.txt", "--endpoint-url", versitygw.url
        ).returncode
        == 0
    )
    assert (
        ferry(
            "copy", f"s3://{src}/dir/file.txt", f"s3://{dst}/into/", "--endpoint-url", versitygw.url
        ).returncode
        == 0
    )
    assert sorted(versitygw.keys(dst)) == ["into/file.txt", "renamed.txt"]


def test_whole_bucket_copy_then_rerun_skips_everything_with_json_summary(versitygw, vgw_buckets):
    src, dst = vgw_buckets
    put(versitygw, src, [f"k{i}" for i in range(12)])
    first = ferry("copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["copied"] == 12
    second = ferry("copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--json")
    summary = json.loads(second.stdout)
    assert (summary["copied"], summary["skipped"], summary["objects"]) == (0, 12, 12)
    forced = ferry(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--json", "--no-skip-existing"
    )
    assert json.loads(forced.stdout)["copied"] == 12


def test_include_and_exclude_globs_filter_relative_keys(versitygw, vgw_buckets):
    src, dst = vgw_buckets
    put(versitygw, src, ["logs/a.log", "logs/b.log", "logs/debug.log", "logs/c.txt"])
    run = ferry(
        "copy", f"s3://{src}/logs/", f"s3://{dst}/", "--endpoint-url", versitygw.url,
        "--include", "*.log", "--exclude", "debug*",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert sorted(versitygw.keys(dst)) == ["a.log", "b.log"]


def test_dry_run_writes_nothing(versitygw, vgw_buckets):
    src, dst = vgw_buckets
    put(versitygw, src, ["a", "b"])
    run = ferry("copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--dry-run")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1].startswith("dry run: 2 objects: would copy 2 (14 B), would skip 0"), (
        run.stdout
    )
    assert versitygw.keys(dst) == []


def test_failed_objects_exit_2_and_are_named_in_summary_and_report(versitygw, tmp_path):
    # versitygw refuses to copy an empty folder marker ("dir/") server-side
    # (DirectoryObjectContainsData): with --mode server-side, which may not stream it instead,
    # each such object must fail, by name, with a reason.
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    put(versitygw, src, ["one/", "two/"], body=b"")
    report = tmp_path / "r.jsonl"
    run = ferry(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url,
        "--mode", "server-side", "--report", str(report),
    )  # fmt: skip
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "2 failed" in run.stdout
    assert f"failed: s3://{src}/one/" in run.stdout
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    failed = [line for line in lines if line.get("status") == "failed"]
    assert len(failed) == 2 and all(line["reason"] for line in failed)
    assert "Traceback" not in run.stderr


def test_streaming_between_two_endpoints_copies(versitygw, motoserver):
    src = versitygw.bucket("src")
    dst = motoserver.bucket("dst")
    put(versitygw, src, ["x/1", "x/2"], body=b"z" * 1000)
    run = ferry("copy", f"s3://{src}/x/", f"s3://{dst}/y/", "--source-endpoint-url", versitygw.url,
                "--dest-endpoint-url", motoserver.url, "--json")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["strategies"] == {"stream": 2}
    assert sorted(motoserver.keys(dst)) == ["y/1", "y/2"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["copy", "bucket/key", "s3://dst"], "is not an S3 URL"),
        (
            ["copy", "s3://{src}", "s3://no-such-bucket-ferry"],
            "destination bucket 'no-such-bucket-ferry' does not exist",
        ),
        (
            ["copy", "s3://no-such-bucket-ferry", "s3://{dst}"],
            "source bucket 'no-such-bucket-ferry' does not exist",
        ),
        (["copy", "s3://{src}", "s3://{dst}", "--part-size", "1MiB"], "part size 1.0 MiB is out of range"),
        (["copy", "s3://{src}", "s3://{dst}", "--part-size", "lots"], "cannot read size 'lots'"),
        (["copy", "s3://{src}", "s3://{dst}", "--checksum-algorithm", "md5"], "invalid choice"),
        (["copy", "s3://{src}", "s3://{dst}", "--metadata", "novalue"], "must be written KEY=VALUE"),
        (["copy", "s3://{src}", "s3://{dst}", "--concurrency", "0"], "--concurrency must be at least 1"),
        (
            ["copy", "s3://{src}", "s3://{dst}", "--part-concurrency", "-2"],
            "--part-concurrency must be at least 1",
        ),
        (["copy", "s3://{src}"], "the following arguments are required: DST"),
    ],
)
def test_bad_input_exits_1_with_one_clear_line_and_writes_nothing(versitygw, vgw_buckets, args, message):
    src, dst = vgw_buckets
    put(versitygw, src, ["a"])
    argv = [a.format(src=src, dst=dst) for a in args] + ["--endpoint-url", versitygw.url]
    run = ferry(*argv)
    assert run.returncode == 1
    assert message in run.stderr
    assert "Traceback" not in run.stderr
    assert len([line for line in run.stderr.splitlines() if line.startswith("ferry: error")]) == 1
    assert versitygw.keys(dst) == []


def test_endpoint_that_refuses_connections_is_named(tmp_path):
    port = free_port()  # nothing listens here
    run = ferry("copy", "s3://a-bucket", "s3://b-bucket", "--endpoint-url", f"http://127.0.0.1:{port}")
    assert run.returncode == 1
    assert "could not connect to the source endpoint" in run.stderr
    assert str(port) in run.stderr
    assert "Traceback" not in run.stderr


def test_unwritable_report_path_is_a_usage_error(versitygw, vgw_buckets, tmp_path):
    src, dst = vgw_buckets
    put(versitygw, src, ["a"])
    run = ferry(
        "copy",
        f"s3://{src}",
        f"s3://{dst}",
        "--endpoint-url",
        versitygw.url,
        "--report",
        str(tmp_path / "no" / "dir.jsonl"),
    )
    assert run.returncode == 1
    assert "cannot write the report" in run.stderr
    assert versitygw.keys(dst) == []


def test_listing_that_breaks_midway_still_summarises_what_was_copied(
    versitygw, vgw_buckets, tmp_path, monkeypatch
):
    import io

    from ferry import SourceObject, Target
    from ferry.cli import main
    from ferry.cli.commands import copy_command
    from ferry.errors import ConfigError

    src, dst = vgw_buckets
    put(versitygw, src, ["first"])

    def listing_that_breaks(*args, **kwargs):
        yield SourceObject(src, "first"), Target(dst, "first")
        raise ConfigError("AccessDenied on s3:ListBucket s3://src: grant the source identity s3:ListBucket")

    monkeypatch.setattr(copy_command, "plan_pairs", listing_that_breaks)
    report = tmp_path / "r.jsonl"
    out, err = io.StringIO(), io.StringIO()
    code = main.main(
        ["copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--report", str(report)],
        out,
        err,
    )
    assert code == 2
    assert "1 object: 1 copied" in out.getvalue()
    assert "stopped after 1 object: AccessDenied on s3:ListBucket" in err.getvalue()
    assert json.loads(report.read_text().splitlines()[-1])["summary"]["copied"] == 1
    assert versitygw.keys(dst) == ["first"]


def objects(server: S3Server, bucket: str) -> dict[str, str]:
    """Every key with its ETag: a copy onto the source shows up as a changed or new entry."""
    pages = server.client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {o["Key"]: o["ETag"] for page in pages for o in page.get("Contents", [])}


@pytest.mark.parametrize(
    ("src_path", "dst_path", "message"),
    [
        ("data/", "data/copy/", "destination: s3://{b}/data/copy/ is inside the source s3://{b}/data/"),
        ("data", "data/copy", "destination: s3://{b}/data/copy/ is inside the source s3://{b}/data/"),
        ("", "backup/", "destination: s3://{b}/backup/ is inside the source s3://{b}/"),
        ("data/", "data/", "is the source itself: nothing would change"),
        ("data/a", "data/a", "is the source object itself: nothing would change"),
        ("data/a", "data/", "is the source object itself: nothing would change"),
        ("data/x/", "data/", "destination: s3://{b}/data/ contains the source s3://{b}/data/x/"),
    ],
)
def test_a_destination_overlapping_the_source_is_refused_before_anything_is_written(
    versitygw, vgw_buckets, src_path, dst_path, message
):
    """Copies written inside the source prefix would be listed and copied again, without end."""
    bucket, _ = vgw_buckets
    put(versitygw, bucket, ["data/a", "data/b", "data/x/x/c", "data/x/y"])
    before = objects(versitygw, bucket)
    run = ferry(
        "copy", f"s3://{bucket}/{src_path}", f"s3://{bucket}/{dst_path}", "--endpoint-url", versitygw.url
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert message.format(b=bucket) in run.stderr
    assert "Traceback" not in run.stderr
    assert len([line for line in run.stderr.splitlines() if line.startswith("ferry: error")]) == 1
    assert objects(versitygw, bucket) == before


def test_a_destination_inside_the_source_is_copied_once_when_excluded(versitygw, vgw_buckets):
    bucket, _ = vgw_buckets
    put(versitygw, bucket, ["data/a", "data/b", "data/copy/old"])
    run = ferry("copy", f"s3://{bucket}/data/", f"s3://{bucket}/data/copy/", "--endpoint-url", versitygw.url,
                "--exclude", "copy/*", "--json")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["copied"] == 2
    assert sorted(versitygw.keys(bucket)) == [
        "data/a",
        "data/b",
        "data/copy/a",
        "data/copy/b",
        "data/copy/old",
    ]


def test_a_single_object_copied_beside_itself_in_the_same_bucket_is_allowed(versitygw, vgw_buckets):
    bucket, _ = vgw_buckets
    put(versitygw, bucket, ["data/a"])
    run = ferry("copy", f"s3://{bucket}/data/a", f"s3://{bucket}/data/a.bak", "--endpoint-url", versitygw.url)
    assert run.returncode == 0, run.stderr
    assert sorted(versitygw.keys(bucket)) == ["data/a", "data/a.bak"]


def test_an_in_place_metadata_rewrite_rewrites_what_differs_and_then_skips(versitygw, vgw_buckets):
    """Skip-existing must not call the source 'identical' to itself when a change is asked."""
    bucket, _ = vgw_buckets
    for key in ("data/a", "data/b"):
        versitygw.client.put_object(Bucket=bucket, Key=key, Body=key.encode(), ContentType="text/plain")
    argv = ["copy", f"s3://{bucket}/data/", f"s3://{bucket}/data/", "--endpoint-url", versitygw.url, "--json"]
    first = ferry(*argv, "--metadata", "owner=team-a")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert (summary["objects"], summary["copied"], summary["skipped"]) == (2, 2, 0)
    for key in ("data/a", "data/b"):
        got = versitygw.client.get_object(Bucket=bucket, Key=key)
        assert got["Metadata"] == {"owner": "team-a"} and got["Body"].read() == key.encode()
    again = json.loads(ferry(*argv, "--metadata", "owner=team-a").stdout)
    assert (again["copied"], again["skipped"]) == (0, 2)
    changed = json.loads(ferry(*argv, "--metadata", "owner=team-b").stdout)
    assert (changed["copied"], changed["skipped"]) == (2, 0)
    assert sorted(versitygw.keys(bucket)) == ["data/a", "data/b"]


def test_an_in_place_storage_class_change_rewrites_only_objects_in_another_class(motoserver, moto_buckets):
    bucket, _ = moto_buckets
    put(motoserver, bucket, ["data/a", "data/b"])
    motoserver.client.put_object(Bucket=bucket, Key="data/c", Body=b"c", StorageClass="STANDARD_IA")
    run = ferry("copy", f"s3://{bucket}/data/", f"s3://{bucket}/data/", "--endpoint-url", motoserver.url,
                "--storage-class", "STANDARD_IA", "--json")  # fmt: skip
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert (summary["copied"], summary["skipped"]) == (2, 1)
    for key in ("data/a", "data/b", "data/c"):
        assert motoserver.client.head_object(Bucket=bucket, Key=key)["StorageClass"] == "STANDARD_IA"


def test_an_in_place_tag_change_keeps_metadata_and_is_accepted_by_s3(motoserver, moto_buckets):
    """S3 refuses a copy onto itself that changes only tags (not 'metadata, storage class,
    website redirect location or encryption'): the rewrite restates the metadata instead."""
    bucket, _ = moto_buckets
    motoserver.client.put_object(
        Bucket=bucket, Key="data/a", Body=b"a", ContentType="text/csv", Metadata={"owner": "x"}
    )
    argv = [
        "copy",
        f"s3://{bucket}/data/",
        f"s3://{bucket}/data/",
        "--endpoint-url",
        motoserver.url,
        "--json",
    ]
    run = ferry(*argv, "--tag", "project=blue")
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["copied"] == 1
    head = motoserver.client.head_object(Bucket=bucket, Key="data/a")
    assert (head["ContentType"], head["Metadata"]) == ("text/csv", {"owner": "x"})
    tags = motoserver.client.get_object_tagging(Bucket=bucket, Key="data/a")["TagSet"]
    assert tags == [{"Key": "project", "Value": "blue"}]
    assert json.loads(ferry(*argv, "--tag", "project=blue").stdout)["skipped"] == 1


def test_server_side_across_two_endpoints_is_refused_before_anything_is_copied(versitygw, minio) -> None:
    """A server can copy server-side only from itself: CopyObject sent to the destination's
    server copies from that server's bucket of the same name (4,000 failures, and a key that
    happened to match there reported copied). --mode server-side with two endpoints is refused
    up front, in one line that says what to use instead."""
    src, dst = versitygw.bucket("src"), minio.bucket("dst")
    put(versitygw, src, ["p/a", "p/b"])
    done = ferry(
        "copy",
        f"s3://{src}/p/",
        f"s3://{dst}/p/",
        "--mode",
        "server-side",
        "--source-endpoint-url",
        versitygw.url,
        "--dest-endpoint-url",
        minio.url,
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "server-side" in done.stderr and "--mode stream" in done.stderr, done.stderr
    assert minio.keys(dst) == []
