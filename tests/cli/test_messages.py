"""What the command line says about a mistake names it as it is: a manifest that never
existed "does not exist"; a JSON Lines row that names no object is refused with the manifest,
its line and what is wrong; a missing bucket's hint names an option the command has; a copy
whose source matches nothing says so (with a near prefix where one exists) and exits 1;
the demo prints only paths that are still there when it ends.

Each bad input: a non-zero exit, at most three lines on stderr naming it, no traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from test_bad_input_cli import run_manifest

from conftest import S3Server

FERRY = str(Path(sys.executable).with_name("ferry"))


def ferry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FERRY, *args], capture_output=True, text=True, timeout=300)


def assert_short_error(run: subprocess.CompletedProcess[str], code: int = 1) -> list[str]:
    lines = run.stderr.splitlines()
    assert run.returncode == code, run.stdout + run.stderr
    assert 1 <= len(lines) <= 3 and "Traceback" not in run.stderr, run.stderr
    assert lines[0].startswith("ferry: error: "), run.stderr
    return lines


def manifest_spec(tmp_path: Path, src: str, dst: str, key: str) -> str:
    spec = {
        "source": {"bucket": src, "manifest": {"bucket": src, "key": key, "format": "jsonl"}},
        "destination": {"bucket": dst, "prefix": "out/"},
    }
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec))
    return str(path)


def test_a_manifest_that_never_existed_does_not_exist(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = vgw_buckets
    spec = manifest_spec(tmp_path, src, dst, "lists/never.jsonl")
    run = ferry("run", spec, "--endpoint-url", versitygw.url, "--ledger", str(tmp_path / "l.sqlite"))
    (line,) = assert_short_error(run)
    assert f"s3://{src}/lists/never.jsonl does not exist" in line, line
    assert "no longer" not in line
    assert versitygw.keys(dst) == []


def test_a_json_lines_row_that_names_no_object_is_refused_with_the_manifest_and_its_line(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="a.txt", Body=b"a")
    run = run_manifest(versitygw, src, dst, tmp_path, b'{"key": "a.txt"}\n{"nokey": 1}\n', "jsonl")
    (line,) = assert_short_error(run)
    assert f"line 2 of s3://{src}/lists/m.jsonl" in line and '"key"' in line, line
    assert "s3:///" not in line
    assert versitygw.keys(dst) == []


def test_a_row_failed_alone_is_named_by_its_manifest_not_by_an_empty_location(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    """A CSV row with an empty key fails alone (the header names the key column)."""
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="a.txt", Body=b"a")
    run = run_manifest(versitygw, src, dst, tmp_path, b"key,size\na.txt,1\n,3\n", "csv")
    assert run.returncode == 2, run.stderr
    assert "s3:///" not in run.stderr, run.stderr
    assert f"manifest row has no key: {{'key': '', 'size': '3'}} (in s3://{src}/lists/m.csv)" in run.stderr


def test_missing_bucket_hints_name_options_each_command_has(versitygw: S3Server) -> None:
    clean = ferry("clean-uploads", "s3://no-such-bucket-here", "--endpoint-url", versitygw.url)
    (line,) = assert_short_error(clean)
    assert "does not exist" in line and "--region" in line and "--dest-region" not in line, line
    estimate = ferry("estimate", "s3://no-such-bucket-here", "--endpoint-url", versitygw.url)
    (line,) = assert_short_error(estimate)
    assert "does not exist" in line and "--region" in line and "--source-region" not in line, line


def test_a_copy_of_a_mistyped_prefix_says_nothing_matched_and_hints_at_the_near_one(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="photos/a.jpg", Body=b"a")
    report = tmp_path / "r.jsonl"
    run = ferry(
        "copy", f"s3://{src}/photo", f"s3://{dst}/", "--endpoint-url", versitygw.url, "--report", str(report)
    )
    (line,) = assert_short_error(run)
    assert f"nothing matched s3://{src}/photo" in line, line
    assert f"did you mean s3://{src}/photos/?" in line, line
    assert run.stdout == "" and not report.exists()
    assert versitygw.keys(dst) == []


def test_a_copy_of_an_empty_prefix_or_of_globs_that_match_nothing_exits_1(
    versitygw: S3Server, vgw_buckets: tuple[str, str]
) -> None:
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="logs/a.log", Body=b"a")
    empty = ferry("copy", f"s3://{src}/nothing/", f"s3://{dst}/", "--endpoint-url", versitygw.url)
    (line,) = assert_short_error(empty)
    assert f"nothing matched s3://{src}/nothing/: no object under it" in line, line
    filtered = ferry(
        "copy", f"s3://{src}/logs/", f"s3://{dst}/", "--endpoint-url", versitygw.url, "--include", "*.txt"
    )
    (line,) = assert_short_error(filtered)
    assert f"nothing matched s3://{src}/logs/" in line and "--include" in line, line
    assert versitygw.keys(dst) == []


def printed_paths(text: str) -> list[str]:
    return re.findall(r"(?:report|page): (\S+?)(?:;|\n|$)", text)


def test_the_demo_prints_only_files_that_are_still_there(tmp_path: Path) -> None:
    run = subprocess.run(
        [FERRY, "demo", "--objects", "5", "--large-size", "6MiB"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # the folder it keeps goes with the test's
    )
    assert run.returncode == 0, run.stdout + run.stderr
    paths: list[Any] = printed_paths(run.stdout)
    assert paths, run.stdout
    missing = [p for p in paths if not Path(p).exists()]
    assert missing == [], run.stdout


def test_an_archived_object_s_hint_names_options_the_commands_have() -> None:
    """`ferry --restore bulk` is no command: the hint names ferry copy's option and a spec's field."""
    from botocore.exceptions import ClientError

    from ferry.errors import describe

    error = ClientError({"Error": {"Code": "InvalidObjectState", "Message": "archived"}}, "CopyObject")
    said = describe(error, side="source", action="s3:GetObject", bucket="b", key="k")
    assert "ferry --restore" not in said, said
    assert "--restore bulk|standard|expedited" in said and "options.restore_tier" in said, said
