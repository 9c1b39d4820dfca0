"""`ferry sync` with a local folder on one side, as a user runs it (the installed `ferry`, real
files, real S3 servers): a folder kept in step with a prefix and back, copying only what is
missing or changed, and with --delete removing what SRC lacks from DST's folder or prefix
only, after every copy succeeded, within --max-delete; a dry run writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import S3Server

FERRY = str(Path(sys.executable).with_name("ferry"))


def sync(server: S3Server, *args: str) -> subprocess.CompletedProcess[str]:
    where = ["--endpoint-url", server.url, "--region", server.region]
    return subprocess.run([FERRY, "sync", *args, *where], capture_output=True, text=True, timeout=300)


def put(server: S3Server, bucket: str, objects: dict[str, bytes]) -> None:
    for key, body in objects.items():
        server.client.put_object(Bucket=bucket, Key=key, Body=body)


def contents(server: S3Server, bucket: str) -> dict[str, bytes]:
    return {
        key: server.client.get_object(Bucket=bucket, Key=key)["Body"].read() for key in server.keys(bucket)
    }


def tree(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def files_under(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def report(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# Keys whose order is S3's only when compared as whole keys: 'a.b' < 'a/b' < 'a0'.
LOCAL = {
    "same.txt": b"same",
    "stale.txt": b"new bytes",
    "new.txt": b"fresh",
    "a.b": b"1",
    "a/b": b"2",
    "a0": b"3",
}
UNTOUCHED = {"mirror2/extra": b"sibling", "outside": b"o", ".ferry/uploads/mark": b"m"}


@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_upload_with_delete_makes_the_prefix_match_the_folder_and_touches_nothing_else(
    request: pytest.FixtureRequest, tmp_path: Path, server_name: str
) -> None:
    server: S3Server = request.getfixturevalue(server_name)
    bucket = server.bucket("up")
    src = tree(tmp_path / "src", LOCAL)
    (src / "link.txt").symlink_to(src / "same.txt")  # not followed: skipped, and its name kept at DST
    put(server, bucket, {"mirror/same.txt": b"same", "mirror/stale.txt": b"old bytes"})
    put(server, bucket, {"mirror/extra": b"gone", "mirror/link.txt": b"uploaded with -L once", **UNTOUCHED})
    jsonl, page = tmp_path / "sync.jsonl", tmp_path / "sync.html"

    run = sync(
        server,
        str(src),
        f"s3://{bucket}/mirror",
        "--delete",
        "--report",
        str(jsonl),
        "--report-html",
        str(page),
    )

    assert run.returncode == 0, run.stderr
    # Seven files (one a link, skipped), one identical (skipped), and one delete: eight in all.
    assert "8 objects: 5 copied, 2 skipped, 0 failed, 0 pending, 1 deleted" in run.stdout
    assert "skipped: 1 symbolic link, not followed" in run.stdout
    expected = {f"mirror/{k}": v for k, v in LOCAL.items()}
    assert contents(server, bucket) == {**expected, "mirror/link.txt": b"uploaded with -L once", **UNTOUCHED}
    deletes = [line for line in report(jsonl) if line.get("action") == "delete"]
    assert deletes == [
        {"action": "delete", "key": "mirror/extra", "dest_bucket": bucket, "status": "deleted"}
    ]
    assert '<div class="l">deleted</div><div class="n">1</div>' in page.read_text()

    again = sync(server, f"{src}/", f"s3://{bucket}/mirror/", "--delete")
    assert again.returncode == 0, again.stderr
    assert "7 objects: 0 copied, 7 skipped, 0 failed, 0 pending, 0 deleted" in again.stdout


@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_download_with_delete_removes_only_regular_files_and_keeps_folders(
    request: pytest.FixtureRequest, tmp_path: Path, server_name: str
) -> None:
    server: S3Server = request.getfixturevalue(server_name)
    bucket = server.bucket("down")
    put(server, bucket, {f"p/{k}": v for k, v in LOCAL.items()})
    put(server, bucket, {"other/x": b"not ours"})
    dst = tree(tmp_path / "dst", {"same.txt": b"same", "stale.txt": b"old bytes", "gone.txt": b"g"})
    tree(dst, {"old/deep/gone.bin": b"g", ".kept.ferry-partial": b"resume me"})
    (dst / "outside-link").symlink_to(tmp_path)  # a link is never deleted, nor followed

    run = sync(server, f"s3://{bucket}/p", str(dst), "--delete", "--json")

    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert (summary["copied"], summary["skipped"], summary["deleted"]) == (5, 1, 2), run.stderr
    assert files_under(dst) == {**LOCAL, ".kept.ferry-partial": b"resume me"}
    assert (dst / "old" / "deep").is_dir()  # folders stay, even emptied (as rclone without --rmdirs)
    assert (dst / "outside-link").is_symlink() and (tmp_path / "dst").is_dir()

    again = sync(server, f"s3://{bucket}/p/", f"{dst}/", "--delete")
    assert "6 objects: 0 copied, 6 skipped, 0 failed, 0 pending, 0 deleted" in again.stdout, again.stderr


def test_without_delete_nothing_is_removed_either_way(versitygw: S3Server, tmp_path: Path) -> None:
    bucket = versitygw.bucket("keep")
    src = tree(tmp_path / "src", {"a": b"a"})
    put(versitygw, bucket, {"extra": b"x"})
    run = sync(versitygw, str(src), f"s3://{bucket}")
    assert run.returncode == 0, run.stderr
    assert "1 object: 1 copied" in run.stdout and "deleted" not in run.stdout
    assert sorted(versitygw.keys(bucket)) == ["a", "extra"]
    dst = tree(tmp_path / "dst", {"mine": b"m"})
    run = sync(versitygw, f"s3://{bucket}", str(dst))
    assert run.returncode == 0, run.stderr
    assert files_under(dst) == {"a": b"a", "extra": b"x", "mine": b"m"}


def test_dry_run_lists_what_it_would_copy_and_delete_and_writes_nothing(
    versitygw: S3Server, tmp_path: Path
) -> None:
    bucket = versitygw.bucket("dry")
    put(versitygw, bucket, {"p/new": b"n", "p/same": b"s"})
    dst = tree(tmp_path / "dst", {"same": b"s", "sub/extra": b"e"})
    run = sync(versitygw, f"s3://{bucket}/p", str(dst), "--delete", "--dry-run")
    assert run.returncode == 0, run.stderr
    assert (
        f"would copy: s3://{bucket}/p/new" in run.stdout
        and "would copy: " + f"s3://{bucket}/p/same" not in run.stdout
    )
    assert f"would delete: {dst / 'sub' / 'extra'}" in run.stdout and run.stdout.count("would delete: ") == 1
    assert "would copy 1 (1 B), would skip 1, would delete 1, 0 failed; nothing was written" in run.stdout
    assert files_under(dst) == {"same": b"s", "sub/extra": b"e"}

    src = tree(tmp_path / "src", {"up": b"u"})
    run = sync(versitygw, str(src), f"s3://{bucket}/p", "--delete", "--dry-run")
    assert run.returncode == 0, run.stderr
    assert f"would copy: {src / 'up'}" in run.stdout
    assert (
        f"would delete: s3://{bucket}/p/new" in run.stdout
        and f"would delete: s3://{bucket}/p/same" in run.stdout
    )
    assert sorted(versitygw.keys(bucket)) == ["p/new", "p/same"]


def test_max_delete_tripped_refuses_the_whole_sync_in_one_line(versitygw: S3Server, tmp_path: Path) -> None:
    bucket = versitygw.bucket("guard")
    put(versitygw, bucket, {"p/keep": b"k"})
    dst = tree(tmp_path / "dst", {"x1": b"1", "x2": b"2"})
    run = sync(versitygw, f"s3://{bucket}/p", str(dst), "--delete", "--max-delete", "1")
    assert run.returncode == 1
    assert run.stderr == (
        "ferry: error: --delete would delete 2 objects, more than --max-delete 1: nothing copied or deleted\n"
    )
    assert files_under(dst) == {"x1": b"1", "x2": b"2"}  # nothing deleted, nothing downloaded

    src = tree(tmp_path / "src", {"new": b"n"})
    put(versitygw, bucket, {"p/x": b"x"})
    run = sync(versitygw, str(src), f"s3://{bucket}/p", "--delete", "--max-delete", "0")
    assert run.returncode == 1 and "more than --max-delete 0" in run.stderr and run.stderr.count("\n") == 1
    assert sorted(versitygw.keys(bucket)) == ["p/keep", "p/x"]


def test_a_failed_copy_deletes_nothing_and_says_so(versitygw: S3Server, tmp_path: Path) -> None:
    """A folder stands where an object must become a file: that download fails, so no file
    the source lacks is deleted."""
    bucket = versitygw.bucket("fail")
    put(versitygw, bucket, {"p/f": b"an object named f", "p/ok": b"ok"})
    dst = tree(tmp_path / "dst", {"f/inside": b"mine", "extra": b"e"})
    run = sync(versitygw, f"s3://{bucket}/p", str(dst), "--delete")
    assert run.returncode == 2
    # Two objects and two deletes held back (skipped, each with the reason).
    assert "4 objects: 1 copied, 2 skipped, 1 failed, 0 pending, 0 deleted" in run.stdout
    assert "ferry: error: deleted nothing (2 objects kept): copies failed: 1, pending: 0" in run.stderr
    assert files_under(dst) == {"f/inside": b"mine", "extra": b"e", "ok": b"ok"}


def test_filters_choose_files_on_both_sides_alike(versitygw: S3Server, tmp_path: Path) -> None:
    """A file or object the filters leave out is neither copied nor deleted."""
    bucket = versitygw.bucket("filters")
    src = tree(tmp_path / "src", {"big": b"B" * 2048, "tiny": b"t", "old": b"O" * 2048})
    os.utime(src / "old", (1_000_000_000, 1_000_000_000))
    put(versitygw, bucket, {"small-extra": b"s", "big-extra": b"E" * 4096})
    run = sync(versitygw, str(src), f"s3://{bucket}", "--delete", "--min-size", "1KiB", "--max-age", "1y")
    assert run.returncode == 0, run.stderr
    assert sorted(versitygw.keys(bucket)) == ["big", "small-extra"]

    dst = tree(tmp_path / "dst", {"keep.log": b"l", "drop.txt": b"d"})
    run = sync(versitygw, f"s3://{bucket}", str(dst), "--delete", "--exclude", "*.log")
    assert run.returncode == 0, run.stderr
    assert files_under(dst) == {"big": b"B" * 2048, "small-extra": b"s", "keep.log": b"l"}


def test_a_source_folder_holding_nothing_never_empties_the_prefix(
    versitygw: S3Server, tmp_path: Path
) -> None:
    bucket = versitygw.bucket("empty")
    put(versitygw, bucket, {"p/a": b"a"})
    (tmp_path / "empty").mkdir()
    run = sync(versitygw, str(tmp_path / "empty"), f"s3://{bucket}/p", "--delete")
    assert run.returncode == 1 and "lists no files: --delete would empty" in run.stderr
    assert versitygw.keys(bucket) == ["p/a"]
