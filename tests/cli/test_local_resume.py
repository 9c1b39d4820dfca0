"""A large upload or download killed with SIGKILL mid-way, then run again: it finishes only what
is missing.

The first run is a real `ferry copy` process slowed by a hook on each part request
(tests/cli/slow_ferry.py), killed once some parts are done: for an upload, once the server
lists them; for a download, once the record beside the temporary file names them. The second
run goes in-process so a botocore hook can count what it asks for.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ferry.cli.commands.local_copy
from cli.test_crash_resume import KEY, _kill_once_parts_listed, _parts_once_settled
from conftest import S3Server
from ferry.cli.main import main
from ferry.s3.clients import make_client as real_make_client

SLOW_FERRY = [sys.executable, str(Path(__file__).with_name("slow_ferry.py"))]
MiB = 1024 * 1024
PART = 5 * MiB
PARTS = 10


class Counter:
    """Counts the requests of one operation the in-process run sends (a botocore hook on every
    client it makes), with their parameters."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self.calls: list[dict[str, Any]] = []

    def make_client(self, *args: Any, **kwargs: Any) -> Any:
        client = real_make_client(*args, **kwargs)
        client.meta.events.register(f"provide-client-params.s3.{self.operation}", self.hook)
        return client

    def hook(self, params: dict[str, Any], **_: Any) -> None:
        self.calls.append(dict(params))


def run_in_process(args: list[str], counter: Counter, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.setattr(ferry.cli.commands.local_copy, "make_client", counter.make_client)
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(args, stdout, stderr)
    return code, stdout.getvalue() + stderr.getvalue()


@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_a_killed_upload_resumes_without_sending_a_listed_part_again(
    request: pytest.FixtureRequest, server_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server: S3Server = request.getfixturevalue(server_name)
    bucket = server.bucket("resume")
    data = os.urandom(PARTS * PART - 4321)
    path = tmp_path / KEY
    path.write_bytes(data)
    args = ["copy", str(path), f"s3://{bucket}/{KEY}", "--endpoint-url", server.url, "--part-size", "5MiB"]
    args += ["--multipart-threshold", "5MiB", "--part-concurrency", "2", "--quiet"]

    listed_at_kill = _kill_once_parts_listed([*SLOW_FERRY, *args], server, bucket, at_least=4)
    survived = _parts_once_settled(server, bucket)
    assert len(survived) < PARTS, "the upload was not cut: nothing to resume"

    counter = Counter("UploadPart")
    report = tmp_path / "report.jsonl"
    code, output = run_in_process([*args, "--report", str(report)], counter, monkeypatch)

    assert code == 0, output
    result = json.loads(report.read_text().splitlines()[0])
    assert result["status"] == "copied" and result["parts_resumed"] == len(survived)
    sent = sorted(call["PartNumber"] for call in counter.calls)
    assert not set(sent) & set(listed_at_kill), "a part listed before the kill was sent again"
    assert sent == sorted(set(range(1, PARTS + 1)) - set(survived))
    assert server.client.get_object(Bucket=bucket, Key=KEY)["Body"].read() == data
    assert server.open_uploads(bucket) == [] and server.keys(bucket) == [KEY]  # the mark went too


def _kill_once(command: list[str], env: dict[str, str], done: Callable[[], bool]) -> None:
    """Run `command` and SIGKILL it as soon as `done()` holds."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if done():
                process.send_signal(signal.SIGKILL)
                process.wait(timeout=30)
                return
            if process.poll() is not None:
                _, err = process.communicate()
                pytest.fail(
                    f"the download ended before it could be killed ({process.returncode}): {err.decode()}"
                )
            time.sleep(0.02)
        pytest.fail("no part was recorded within 120 s")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream:
                stream.close()


def _recorded(record: Path) -> set[int]:
    try:
        lines = record.read_text().splitlines()[1:]
    except OSError:
        return set()
    parts = set()
    for line in lines:
        try:
            parts.add(json.loads(line)["part"])
        except (ValueError, KeyError):
            continue  # a line being written
    return parts


@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_a_killed_download_keeps_its_parts_and_the_next_run_fetches_only_the_rest(
    request: pytest.FixtureRequest, server_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server: S3Server = request.getfixturevalue(server_name)
    bucket = server.bucket("resume")
    data = os.urandom(PARTS * PART - 4321)
    server.client.put_object(Bucket=bucket, Key=KEY, Body=data)
    dst = tmp_path / "out"
    args = ["copy", f"s3://{bucket}/{KEY}", f"{dst}/", "--endpoint-url", server.url, "--part-size", "5MiB"]
    args += ["--multipart-threshold", "5MiB", "--part-concurrency", "2", "--quiet"]
    final, temp, record = dst / KEY, dst / f".{KEY}.ferry-partial", dst / f".{KEY}.ferry-parts"
    env = dict(os.environ, SLOW_GETS="1", SLOW_PART_SECONDS="0.3")

    _kill_once([*SLOW_FERRY, *args], env, lambda: len(_recorded(record)) >= 4)

    written = _recorded(record)
    assert 4 <= len(written) < PARTS, "the download was not cut: nothing to resume"
    assert not final.exists(), "a partial file took the final name"
    assert temp.stat().st_size == len(data)

    counter = Counter("GetObject")
    report = tmp_path / "report.jsonl"
    code, output = run_in_process([*args, "--report", str(report)], counter, monkeypatch)

    assert code == 0, output
    result = json.loads(report.read_text().splitlines()[0])
    assert result["status"] == "copied" and result["parts_resumed"] == len(written)
    asked = sorted(part for call in counter.calls for part in _parts_in(call["Range"]))
    assert asked == sorted(set(range(1, PARTS + 1)) - written), "only the parts not recorded were fetched"
    assert final.read_bytes() == data
    assert sorted(p.name for p in dst.iterdir()) == [KEY], "the temporary file and its record are gone"


def _parts_in(http_range: str) -> range:
    """The part numbers a GET's `bytes=FIRST-LAST` covers (consecutive parts share a GET)."""
    first, last = (int(n) for n in http_range.split("=")[1].split("-"))
    return range(first // PART + 1, last // PART + 2)


def test_a_damaged_part_in_the_temporary_file_is_fetched_again(
    versitygw: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part the record names but whose bytes no longer hold its checksum (a crash of the
    machine before the page cache reached the disk) is not trusted: it is fetched again."""
    bucket = versitygw.bucket("resume")
    data = os.urandom(4 * PART)
    versitygw.client.put_object(Bucket=bucket, Key=KEY, Body=data)
    dst = tmp_path / "out"
    args = ["copy", f"s3://{bucket}/{KEY}", f"{dst}/", "--endpoint-url", versitygw.url, "--part-size", "5MiB"]
    args += ["--multipart-threshold", "5MiB", "--part-concurrency", "1", "--quiet"]
    env = dict(os.environ, SLOW_GETS="1", SLOW_PART_SECONDS="0.5")
    record = dst / f".{KEY}.ferry-parts"
    _kill_once([*SLOW_FERRY, *args], env, lambda: {1, 2} <= _recorded(record))
    written = _recorded(record)
    assert len(written) < 4
    with open(dst / f".{KEY}.ferry-partial", "r+b") as temp:
        temp.seek(PART + 100)  # inside part 2
        temp.write(b"\0" * 10)

    counter = Counter("GetObject")
    report = tmp_path / "report.jsonl"
    code, output = run_in_process([*args, "--report", str(report)], counter, monkeypatch)

    assert code == 0, output
    assert json.loads(report.read_text().splitlines()[0])["parts_resumed"] == len(written) - 1
    starts = sorted(int(call["Range"].split("=")[1].split("-")[0]) for call in counter.calls)
    assert PART in starts and 0 not in starts, starts  # part 2 again, part 1 kept
    assert (dst / KEY).read_bytes() == data
