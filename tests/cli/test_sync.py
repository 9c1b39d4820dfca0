"""`ferry sync SRC DST [--delete]` as a user runs it: what is missing or changed is copied, the
rest skipped; with --delete, what SRC lacks goes from DST's prefix and from nowhere else, and
only when every listing and every copy succeeded and the --max-delete guard holds."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import S3Server
from ferry.cli.main import main

FERRY = str(Path(sys.executable).with_name("ferry"))


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def ferry(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FERRY, *argv], capture_output=True, text=True, timeout=300)


def put(server: S3Server, bucket: str, objects: dict[str, bytes]) -> None:
    for key, body in objects.items():
        server.client.put_object(Bucket=bucket, Key=key, Body=body)


def contents(server: S3Server, bucket: str) -> dict[str, bytes]:
    return {
        key: server.client.get_object(Bucket=bucket, Key=key)["Body"].read() for key in server.keys(bucket)
    }


def arrange(server: S3Server) -> tuple[str, str]:
    """A source prefix, and a destination holding one identical, one stale and one extra object
    under its prefix, plus keys it must never delete: a sibling prefix, a key outside, and
    Ferry's own upload marks."""
    src, dst = server.bucket("src"), server.bucket("dst")
    put(server, src, {"data/same": b"same", "data/stale": b"new bytes", "data/new": b"fresh"})
    put(
        server, dst, {"mirror/same": b"same", "mirror/stale": b"old bytes", "mirror/extra": b"gone at source"}
    )
    put(server, dst, {"mirror2/extra": b"sibling", "outside": b"o", ".ferry/uploads/mark": b"m"})
    return src, dst


UNTOUCHED = {"mirror2/extra": b"sibling", "outside": b"o", ".ferry/uploads/mark": b"m"}


@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_sync_with_delete_makes_the_prefix_match_and_touches_nothing_else(request, tmp_path, server_name):
    server: S3Server = request.getfixturevalue(server_name)
    src, dst = arrange(server)
    report, page = tmp_path / "sync.jsonl", tmp_path / "sync.html"
    run = ferry(
        "sync", f"s3://{src}/data", f"s3://{dst}/mirror", "--endpoint-url", server.url, "--delete",
        "--report", str(report), "--report-html", str(page),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "4 objects: 2 copied, 1 skipped, 0 failed, 0 pending, 1 deleted" in run.stdout
    assert contents(server, dst) == {
        "mirror/same": b"same", "mirror/stale": b"new bytes", "mirror/new": b"fresh", **UNTOUCHED,
    }  # fmt: skip
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    deletes = [line for line in lines if line.get("action") == "delete"]
    assert deletes == [{"action": "delete", "key": "mirror/extra", "dest_bucket": dst, "status": "deleted"}]
    assert lines[-1]["summary"]["deleted"] == 1 and lines[-1]["summary"]["objects"] == 4
    assert '<div class="l">deleted</div><div class="n">1</div>' in page.read_text()
    # Run again: nothing to copy or delete.
    again = ferry("sync", f"s3://{src}/data", f"s3://{dst}/mirror", "--endpoint-url", server.url, "--delete")
    assert "3 objects: 0 copied, 3 skipped, 0 failed, 0 pending, 0 deleted" in again.stdout


def test_the_default_marks_folder_is_kept_under_another_marks_prefix_too(versitygw):
    """An earlier run may have kept its marks in either folder: neither is ever deleted."""
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    put(versitygw, src, {"a": b"a"})
    put(versitygw, dst, {".ferry/uploads/old": b"m", "ops/marks/new": b"m", "extra": b"x"})
    code, out, err = call(
        "sync", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--delete",
        "--marks-prefix", "ops/marks/",
    )  # fmt: skip
    assert code == 0, err
    assert sorted(versitygw.keys(dst)) == [".ferry/uploads/old", "a", "ops/marks/new"]


def test_sync_without_delete_keeps_what_the_source_lacks(versitygw):
    src, dst = arrange(versitygw)
    code, out, err = call("sync", f"s3://{src}/data/", f"s3://{dst}/mirror/", "--endpoint-url", versitygw.url)
    assert code == 0, err
    assert "3 objects: 2 copied, 1 skipped" in out and "deleted" not in out
    assert contents(versitygw, dst)["mirror/extra"] == b"gone at source"


def test_dry_run_lists_what_it_would_copy_and_delete_and_writes_nothing(versitygw):
    src, dst = arrange(versitygw)
    before = contents(versitygw, dst)
    code, out, err = call(
        "sync",
        f"s3://{src}/data",
        f"s3://{dst}/mirror",
        "--endpoint-url",
        versitygw.url,
        "--delete",
        "--dry-run",
    )
    assert code == 0, err
    assert f"would copy: s3://{src}/data/stale" in out and f"would copy: s3://{src}/data/new" in out
    assert f"would delete: s3://{dst}/mirror/extra" in out
    assert out.count("would delete: ") == 1  # only the key SRC no longer has
    assert (
        "dry run: 4 objects: would copy 2 (14 B), would skip 1, would delete 1, 0 failed; nothing was written"
        in out
    )
    assert contents(versitygw, dst) == before


def test_max_delete_guard_refuses_the_whole_sync_in_one_line(versitygw):
    src, dst = arrange(versitygw)
    put(versitygw, dst, {"mirror/extra2": b"also gone"})
    before = contents(versitygw, dst)
    run = ferry(
        "sync", f"s3://{src}/data", f"s3://{dst}/mirror", "--endpoint-url", versitygw.url,
        "--delete", "--max-delete", "1",
    )  # fmt: skip
    assert run.returncode == 1
    assert run.stderr == (
        "ferry: error: --delete would delete 2 objects, more than --max-delete 1: nothing copied or deleted\n"
    )
    assert contents(versitygw, dst) == before
    allowed = ferry(
        "sync", f"s3://{src}/data", f"s3://{dst}/mirror", "--endpoint-url", versitygw.url,
        "--delete", "--max-delete", "2",
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr
    assert "2 deleted" in allowed.stdout


def test_a_failed_copy_deletes_nothing_and_says_so(versitygw):
    """versitygw refuses to copy a folder marker ("a/") server-side, and --mode server-side may
    not stream it instead: the copy fails, so nothing is deleted."""
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    put(versitygw, src, {"a/": b""})
    put(versitygw, dst, {"extra": b"x"})
    run = ferry(
        "sync", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--mode", "server-side", "--delete",
    )  # fmt: skip
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "2 objects: 0 copied, 1 skipped, 1 failed, 0 pending, 0 deleted" in run.stdout
    assert "ferry: error: deleted nothing (1 object kept): copies failed: 1, pending: 0" in run.stderr
    assert "Traceback" not in run.stderr
    assert versitygw.keys(dst) == ["extra"]


def test_a_listing_that_fails_deletes_and_copies_nothing(versitygw, monkeypatch):
    from ferry.engine.compare import side_listing
    from ferry.errors import ConfigError

    src, dst = arrange(versitygw)
    before = contents(versitygw, dst)
    listed = side_listing.list_objects

    def breaks_on_the_destination(client, bucket, prefix, *args, **kwargs):
        if bucket == dst:
            yield next(iter(listed(client, bucket, prefix, *args, **kwargs)))
            raise ConfigError(
                f"AccessDenied on s3:ListBucket s3://{dst}: grant the destination identity s3:ListBucket"
            )
        yield from listed(client, bucket, prefix, *args, **kwargs)

    monkeypatch.setattr(side_listing, "list_objects", breaks_on_the_destination)
    code, out, err = call(
        "sync", f"s3://{src}/data", f"s3://{dst}/mirror", "--endpoint-url", versitygw.url, "--delete"
    )
    assert code == 1
    assert err.startswith("ferry: error: listing for --delete failed: AccessDenied") and err.count("\n") == 1
    assert "nothing copied or deleted" in err
    assert contents(versitygw, dst) == before


def test_a_source_that_lists_nothing_never_empties_the_destination(versitygw):
    src, dst = arrange(versitygw)
    before = contents(versitygw, dst)
    code, out, err = call(
        "sync", f"s3://{src}/dat", f"s3://{dst}/mirror", "--endpoint-url", versitygw.url, "--delete"
    )
    assert code == 1
    assert "lists no objects: --delete would empty" in err and err.count("\n") == 1
    assert contents(versitygw, dst) == before


def test_filters_keep_what_they_leave_out_on_the_destination(versitygw):
    """As rclone: an object the filters leave out is no object of the sync on either side."""
    src, dst = arrange(versitygw)
    put(versitygw, dst, {"mirror/keep.log": b"excluded"})
    code, out, err = call(
        "sync", f"s3://{src}/data", f"s3://{dst}/mirror", "--endpoint-url", versitygw.url, "--delete",
        "--exclude", "*.log",
    )  # fmt: skip
    assert code == 0, err
    assert "mirror/keep.log" in versitygw.keys(dst) and "mirror/extra" not in versitygw.keys(dst)


@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_a_delete_on_a_versioned_destination_leaves_a_delete_marker(request, server_name):
    server: S3Server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), server.bucket("dst")
    server.client.put_bucket_versioning(Bucket=dst, VersioningConfiguration={"Status": "Enabled"})
    put(server, src, {"kept": b"k"})
    put(server, dst, {"kept": b"k", "extra": b"x"})
    code, out, err = call("sync", f"s3://{src}", f"s3://{dst}", "--endpoint-url", server.url, "--delete")
    assert code == 0, err
    assert server.keys(dst) == ["kept"]
    versions = server.client.list_object_versions(Bucket=dst, Prefix="extra")
    assert [m["Key"] for m in versions.get("DeleteMarkers", [])] == ["extra"]
    assert [v["Key"] for v in versions.get("Versions", [])] == ["extra"]  # the bytes stay, as a version


def test_compare_size_mtime_skips_a_same_size_destination_that_is_not_older(versitygw):
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    put(versitygw, src, {"k": b"aaaa"})
    put(versitygw, dst, {"k": b"bbbb"})  # same size, written later
    code, out, err = call(
        "sync", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--compare", "size-mtime"
    )
    assert code == 0, err
    assert "1 skipped" in out and contents(versitygw, dst) == {"k": b"bbbb"}
    code, out, err = call("sync", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url)
    assert "1 copied" in out and contents(versitygw, dst) == {"k": b"aaaa"}


def test_max_delete_without_delete_is_a_usage_error(versitygw):
    src, dst = arrange(versitygw)
    code, out, err = call(
        "sync", f"s3://{src}/data", f"s3://{dst}/mirror", "--endpoint-url", versitygw.url, "--max-delete", "3"
    )
    assert code == 1 and "--max-delete limits --delete" in err
    assert contents(versitygw, dst)["mirror/stale"] == b"old bytes"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["s3://no-such-bucket-ferry", "s3://{dst}/mirror"],
            "source bucket 'no-such-bucket-ferry' does not exist",
        ),
        (
            ["s3://{src}/data", "s3://no-such-bucket-ferry"],
            "destination bucket 'no-such-bucket-ferry' does not exist",
        ),
        (["s3://{src}/data", "s3://{dst}/mirror", "--max-delete", "-1"], "--max-delete -1: give 0 or more"),
        (
            ["s3://{src}/data", "s3://{dst}/mirror", "--report", "/no/such/dir/r.jsonl"],
            "cannot write the report",
        ),
    ],
)
def test_bad_input_is_one_line_exit_1_and_nothing_written(versitygw, args, message):
    src, dst = arrange(versitygw)
    before = contents(versitygw, dst)
    argv = [a.format(src=src, dst=dst) for a in args]
    code, out, err = call("sync", *argv, "--endpoint-url", versitygw.url, "--delete")
    assert code == 1
    assert err.startswith("ferry: error: ") and err.count("\n") == 1 and message in err, err
    assert contents(versitygw, dst) == before
