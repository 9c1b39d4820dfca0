"""Ctrl-C (SIGINT) and SIGTERM during `ferry copy` and `ferry sync`: what is in flight
finishes its current request or part, the summary says what finished and what was left, the
command that finishes the copy is printed, and the exit code is 128 + the signal (130 for
Ctrl-C). A multipart copy stopped between parts keeps its upload (and its mark), and the next
run resumes it from the parts already there.

From the outside: the `ferry` process (slowed by tests/cli/slow_ferry.py so that it is still
copying when the signal comes), its exit code, stdout and stderr, and the bucket.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, S3Server

SLOW_FERRY = [sys.executable, str(Path(__file__).with_name("slow_ferry.py"))]
SMALL = 40
MiB = 1024 * 1024
BIG = 48 * MiB  # 10 parts of 5 MiB: a streamed multipart copy, part by part
COUNTS = re.compile(r"^(\d+) objects: (\d+) copied, (\d+) skipped, (\d+) failed, (\d+) pending", re.M)


def environment() -> dict[str, str]:
    """This checkout's code, slowed: each GetObject and UploadPart waits first."""
    return {**os.environ, "PYTHONPATH": str(REPO / "functions"), "SLOW_GETS": "1", "SLOW_PART_SECONDS": "0.3"}


def copied_keys(server: S3Server, bucket: str) -> list[str]:
    return sorted(k for k in server.keys(bucket) if not k.startswith(".ferry/"))


@pytest.mark.parametrize(("command", "signum"), [("copy", signal.SIGINT), ("sync", signal.SIGTERM)])
def test_an_interrupted_copy_says_what_finished_and_what_was_left_and_its_rerun_finishes_it(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path, command: str, signum: int
) -> None:
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="data/0-big", Body=os.urandom(BIG))
    for i in range(SMALL):
        versitygw.client.put_object(Bucket=src, Key=f"data/{i:03d}", Body=f"object {i}".encode())
    argv = [
        command,
        f"s3://{src}/data/",
        f"s3://{dst}/copy/",
        "--endpoint-url",
        versitygw.url,
        "--mode",
        "stream",
        "--concurrency",
        "2",
        "--part-concurrency",
        "1",
        "--multipart-threshold",
        "8MiB",
        "--part-size",
        "5MiB",
    ]
    run = subprocess.Popen(
        [*SLOW_FERRY, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment()
    )
    deadline = time.monotonic() + 60
    while len(copied_keys(versitygw, dst)) < 2 and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.05)
    assert run.poll() is None, "the copy ended before it could be interrupted"
    run.send_signal(signum)
    out, err = run.communicate(timeout=120)

    assert run.returncode == 128 + signum, out + err
    assert "Traceback" not in err and "ferry: interrupted\n" not in err, err
    (counts,) = COUNTS.findall(out)
    total, copied, skipped, failed, pending = (int(n) for n in counts)
    done = copied_keys(versitygw, dst)
    assert copied == len(done) and 0 < copied < SMALL, (out, done)
    assert "copy/0-big" not in done, out  # stopped between its parts
    assert (skipped, failed) == (0, 0), out
    assert total == copied + pending and pending >= 1, out
    assert "interrupted" in err and f"{copied} copied" in err, err
    assert len(versitygw.open_uploads(dst)) == 1  # the big object's: kept for the next run
    again = err.strip().splitlines()[-1].strip()
    assert shlex.split(again) == ["ferry", *argv], err

    report = tmp_path / "report.jsonl"
    finished = subprocess.run(
        [sys.executable, "-m", "ferry.cli", *shlex.split(again)[1:], "--report", str(report), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO / "functions")},
    )
    assert finished.returncode == 0, finished.stderr
    summary = json.loads(finished.stdout)
    assert (summary["objects"], summary["copied"], summary["skipped"]) == (
        SMALL + 1,
        SMALL + 1 - copied,
        copied,
    )
    rows = {r["key"]: r for r in map(json.loads, report.read_text().splitlines()) if "summary" not in r}
    assert rows["data/0-big"]["status"] == "copied" and rows["data/0-big"].get("parts_resumed", 0) >= 1, rows[
        "data/0-big"
    ]
    assert copied_keys(versitygw, dst) == sorted(["copy/0-big", *(f"copy/{i:03d}" for i in range(SMALL))])
    assert versitygw.open_uploads(dst) == []
