"""What the command line says about a mistake names it as it is: a manifest that never
existed "does not exist"; a JSON Lines row that names no object is refused with the manifest,
its line and what is wrong; a missing bucket's hint names an option the command has; a copy
whose source matches nothing says so (with a near prefix where one exists) and exits 1;
the demo prints only paths that are still there when it ends.

Each bad input: a non-zero exit, at most three lines on stderr naming it, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
