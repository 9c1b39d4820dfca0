"""`-v` / `--verbose`: one line per object on stderr as it ends, in the words of the summary and
the report (copied, skipped or failed with its reason; a sync's deletes), for copies between
buckets, uploads, downloads and syncs; above the progress bar on a terminal, without it
nothing changes."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from conftest import S3Server
from ferry.cli.main import main
from ferry.cli.shared.progress import Progress
from ferry_process import ferry


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def report(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()[:-1]]


def test_each_object_gets_one_line_saying_what_happened_and_why(versitygw: S3Server, tmp_path: Path) -> None:
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    for key, body in {"a.txt": b"new", "same.txt": b"same", "folder/": b""}.items():
        versitygw.client.put_object(Bucket=src, Key=key, Body=body)
    versitygw.client.put_object(Bucket=dst, Key="same.txt", Body=b"same")
    lines = tmp_path / "r.jsonl"

    # versitygw cannot CopyObject an empty folder marker: with --mode server-side it fails.
    done = ferry(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--mode", "server-side",
        "-v", "--report", str(lines),
    )  # fmt: skip

    assert done.returncode == 2, done.stderr
    said = done.stderr.splitlines()
    by_key = {line["key"]: line for line in report(lines)}
    assert len(said) == len(by_key) == 3, said
    copied = f"copied: s3://{src}/a.txt -> s3://{dst}/a.txt (3 B, server-side, verified by "
    assert any(line.startswith(copied) for line in said), said
    assert f"skipped: s3://{src}/same.txt: {by_key['same.txt']['reason']}" in said
    assert by_key["same.txt"]["reason"].startswith("identical")
    assert f"failed: s3://{src}/folder/: {by_key['folder/']['reason']}" in said
    # stdout is as without -v: the summary, and its failures
    assert f"  failed: s3://{src}/folder/: " in done.stdout and "copied: s3://" not in done.stdout

    quiet = ferry(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--mode", "server-side"
    )
    assert quiet.stderr == "", quiet.stderr  # without -v: nothing per object


def test_uploads_and_downloads_name_the_local_file(versitygw: S3Server, tmp_path: Path) -> None:
    folder = tmp_path / "up"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"a")
    bucket = versitygw.bucket("b")
    code, out, err = call("copy", str(folder), f"s3://{bucket}/in/", "--endpoint-url", versitygw.url, "-v")
    assert code == 0, err
    assert err.splitlines() == [
        f"copied: {folder / 'a.txt'} -> s3://{bucket}/in/a.txt (1 B, upload, verified by crc32c (full object))"
    ]
    down = tmp_path / "down"
    code, out, err = call(
        "copy", f"s3://{bucket}/in/", str(down), "--endpoint-url", versitygw.url, "--verbose"
    )
    assert code == 0, err
    assert len(err.splitlines()) == 1
    assert err.startswith(f"copied: s3://{bucket}/in/a.txt -> {down / 'a.txt'} (1 B, download, verified by ")
    code, out, err = call("copy", f"s3://{bucket}/in/", str(down), "--endpoint-url", versitygw.url, "-v")
    assert code == 0, err
    assert re.fullmatch(rf"skipped: s3://{bucket}/in/a\.txt: identical \(.+\)\n", err), err


def test_a_syncs_deletes_each_get_a_line(versitygw: S3Server) -> None:
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    versitygw.client.put_object(Bucket=src, Key="keep", Body=b"k")
    versitygw.client.put_object(Bucket=dst, Key="keep", Body=b"k")
    versitygw.client.put_object(Bucket=dst, Key="extra", Body=b"x")
    code, out, err = call(
        "sync", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--delete", "-v"
    )
    assert code == 0, err
    deleted, skipped = sorted(err.splitlines())
    assert deleted == f"deleted: s3://{dst}/extra"
    assert re.fullmatch(rf"skipped: s3://{src}/keep: identical \(.+\)", skipped), skipped
    versitygw.client.put_object(Bucket=dst, Key="extra2", Body=b"x")
    code, out, err = call(
        "sync", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--delete", "--dry-run", "-v"
    )
    assert code == 0, err
    assert f"would delete: s3://{dst}/extra2" in out.splitlines()
    assert "delete" not in err, err  # said once, by the dry run's own line


def test_a_dry_run_says_its_would_lines_once_and_the_skips_under_v(versitygw: S3Server) -> None:
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    versitygw.client.put_object(Bucket=src, Key="new", Body=b"n")
    versitygw.client.put_object(Bucket=src, Key="same", Body=b"s")
    versitygw.client.put_object(Bucket=dst, Key="same", Body=b"s")
    code, out, err = call(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--dry-run", "-v"
    )
    assert code == 0, err
    assert f"would copy: s3://{src}/new" in out.splitlines()
    assert len(err.splitlines()) == 1 and err.startswith(f"skipped: s3://{src}/same: identical")


@pytest.mark.parametrize("lines", [1, 5])
def test_on_a_terminal_the_lines_go_above_the_bar(lines: int) -> None:
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, width=100)
    with Progress(console=console) as progress:
        for n in range(lines):
            progress.say(f"copied: s3://b/k{n} -> s3://c/k{n}")
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", stream.getvalue())
    for n in range(lines):
        assert text.count(f"copied: s3://b/k{n} -> s3://c/k{n}\n") == 1, text
    plain = io.StringIO()
    Progress(plain, enabled=False).say("skipped: s3://b/k: identical")
    assert plain.getvalue() == "skipped: s3://b/k: identical\n"
