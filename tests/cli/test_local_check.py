"""`ferry check` with a local folder on one side, as a user runs it (the installed `ferry`, real
files, real S3 servers): each file against the object under its key, by the object's own
checksum or MD5 ETag computed over the file; every verdict on stdout, in the JSON Lines report
and on the HTML page; exit 0 when they match, 2 when they differ; nothing written."""

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
MiB = 1024 * 1024


def ferry(server: S3Server, command: str, *args: str) -> subprocess.CompletedProcess[str]:
    where = ["--endpoint-url", server.url, "--region", server.region]
    return subprocess.run([FERRY, command, *args, *where], capture_output=True, text=True, timeout=300)


def tree(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def etags(server: S3Server, bucket: str) -> dict[str, str]:
    pages = server.client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {o["Key"]: o["ETag"] for page in pages for o in page.get("Contents", [])}


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")}


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_a_folder_and_a_prefix_differ_both_ways_named_with_their_evidence(
    request: pytest.FixtureRequest, tmp_path: Path, server_name: str
) -> None:
    server: S3Server = request.getfixturevalue(server_name)
    bucket = server.bucket("check")
    for key, body in {"same": b"same", "changed": b"one", "resized": b"short", "only-s3": b"s"}.items():
        server.client.put_object(Bucket=bucket, Key=f"p/{key}", Body=body)
    folder = tree(
        tmp_path / "f", {"same": b"same", "changed": b"two", "resized": b"longer", "only-local": b"l"}
    )
    before = (etags(server, bucket), snapshot(folder))
    jsonl, page = tmp_path / "check.jsonl", tmp_path / "check.html"

    up = ferry(
        server, "check", str(folder), f"s3://{bucket}/p", "--report", str(jsonl), "--report-html", str(page)
    )

    assert up.returncode == 2, up.stderr
    assert "missing on destination: only-local" in up.stdout and "missing on source: only-s3" in up.stdout
    assert "differs: resized (size: sizes 6 and 5)" in up.stdout  # source's first: the file's
    changed = next(line for line in up.stdout.splitlines() if line.startswith("differs: changed"))
    assert changed.startswith(("differs: changed (checksum: ", "differs: changed (etag: "))
    assert (
        "5 keys: 1 identical, 2 different, 1 missing on destination, 1 missing on source, 0 unreadable"
        in up.stdout
    )
    report = lines(jsonl)
    assert [line["key"] for line in report[:-1]] == ["changed", "only-local", "only-s3", "resized", "same"]
    same = report[-2]
    assert same["status"] == "identical" and same["evidence"] in ("checksum", "etag")
    assert same["source"] == str(folder / "same") and same["destination"] == f"s3://{bucket}/p/same"
    assert report[-1]["summary"]["match"] is False and report[-1]["summary"]["different"] == 2
    html = page.read_text()
    assert "DIFFER" in html and "only-local" in html and "sizes 6 and 5" in html

    down = ferry(server, "check", f"s3://{bucket}/p/", f"{folder}/", "--json")
    assert down.returncode == 2, down.stderr
    assert "missing on destination: only-s3" in down.stderr and "missing on source: only-local" in down.stderr
    assert "differs: resized (size: sizes 5 and 6)" in down.stderr
    summary = json.loads(down.stdout)
    assert (summary["keys"], summary["identical"], summary["different"]) == (5, 1, 2)
    assert (etags(server, bucket), snapshot(folder)) == before  # nothing written, either way


@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_a_synced_folder_matches_by_checksum_and_exits_0(
    request: pytest.FixtureRequest, tmp_path: Path, server_name: str
) -> None:
    server: S3Server = request.getfixturevalue(server_name)
    bucket = server.bucket("match")
    folder = tree(tmp_path / "f", {"a.b": b"1", "a/b": b"2", "a0": b"3", "big.bin": os.urandom(6 * MiB)})
    parts = ["--multipart-threshold", "5MiB", "--part-size", "5MiB"]
    assert ferry(server, "sync", str(folder), f"s3://{bucket}/p", *parts).returncode == 0
    run = ferry(server, "check", str(folder), f"s3://{bucket}/p", "--json")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert (summary["keys"], summary["identical"], summary["match"]) == (4, 4, True)
    assert summary["identical_by"] == {"checksum": 4}
    back = ferry(server, "check", f"s3://{bucket}/p", str(folder))
    assert back.returncode == 0 and "4 keys: 4 identical" in back.stdout, back.stdout + back.stderr


def test_objects_without_a_checksum_are_compared_by_their_md5_etag(minio: S3Server, tmp_path: Path) -> None:
    """MinIO keeps no checksum of an object sent without one: its MD5 ETag is the evidence."""
    bucket = minio.bucket("etag")
    minio.client.put_object(Bucket=bucket, Key="same", Body=b"same bytes")
    minio.client.put_object(Bucket=bucket, Key="other", Body=b"aaaa")
    head = minio.client.head_object(Bucket=bucket, Key="same", ChecksumMode="ENABLED")
    assert not [k for k in head if k.startswith("Checksum") and k != "ChecksumType"]  # the ETag alone
    folder = tree(tmp_path / "f", {"same": b"same bytes", "other": b"bbbb"})
    run = ferry(minio, "check", str(folder), f"s3://{bucket}")
    assert run.returncode == 2, run.stderr
    assert "differs: other (etag: ETags " in run.stdout
    assert "identical by: etag 1" in run.stdout


def test_links_are_named_unless_followed_and_filters_apply_to_both_sides(
    versitygw: S3Server, tmp_path: Path
) -> None:
    bucket = versitygw.bucket("links")
    versitygw.client.put_object(Bucket=bucket, Key="target", Body=b"t")
    versitygw.client.put_object(Bucket=bucket, Key="link", Body=b"t")
    versitygw.client.put_object(Bucket=bucket, Key="big", Body=b"B" * 4096)
    folder = tree(tmp_path / "f", {"target": b"t"})
    (folder / "link").symlink_to(folder / "target")
    run = ferry(versitygw, "check", str(folder), f"s3://{bucket}", "--max-size", "1KiB")
    assert run.returncode == 2
    assert "unreadable: link (the source's " in run.stdout and "a symbolic link: not followed" in run.stdout
    assert (
        "2 keys: 1 identical, 0 different, 0 missing on destination, 0 missing on source, 1 unreadable"
        in run.stdout
    )
    followed = ferry(versitygw, "check", str(folder), f"s3://{bucket}", "--max-size", "1KiB", "-L")
    assert followed.returncode == 0, followed.stdout + followed.stderr
    assert "2 keys: 2 identical" in followed.stdout
