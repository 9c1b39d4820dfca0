"""`ferry copy` killed with SIGKILL mid-copy, then run again: it resumes the upload it left.

The first run is a real `ferry copy` process (slowed by a hook that delays each part
request, as a slow link would: tests/cli/slow_ferry.py) killed once the server lists some of
its parts, with no chance to save anything locally. The second run goes in-process so a botocore event hook can count
every part it sends; the server's own ListParts, taken after the kill, says which parts
survived. Nothing the server listed before the kill may be sent again.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import ferry.cli.commands.copy_command
import ferry.engine.strategies.copier
from ferry.cli.main import main
from ferry.s3.clients import make_client as real_make_client
from version_histories import ferrys_history, versioned

SLOW_FERRY = [sys.executable, str(Path(__file__).with_name("slow_ferry.py"))]
MiB = 1024 * 1024
PART = 5 * MiB
PARTS = 10
KEY = "big.bin"
MODES = {"stream": "UploadPart", "server-side": "UploadPartCopy"}


@pytest.fixture(params=["versitygw", "minio"])
def server(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


def _listed_parts(server: Any, bucket: str) -> dict[int, int]:
    """The server's view: part number -> size of every part of the open upload(s) of KEY."""
    parts: dict[int, int] = {}
    for upload in server.client.list_multipart_uploads(Bucket=bucket, Prefix=KEY).get("Uploads", []):
        if upload["Key"] != KEY:
            continue
        try:
            listing = server.client.list_parts(Bucket=bucket, Key=KEY, UploadId=upload["UploadId"])
        except server.client.exceptions.NoSuchUpload:
            continue  # ended since it was listed (MinIO: the upload whose part copies were refused)
        parts.update({p["PartNumber"]: p["Size"] for p in listing.get("Parts", [])})
    return parts


def _parts_once_settled(server: Any, bucket: str) -> dict[int, int]:
    """The parts the killed run left, once the server has finished with them: a part whose
    request was whole when the process died (an UploadPartCopy is a few bytes, the server's
    copy comes after) can still land after the kill. Read until two reads half a second
    apart agree."""
    listed = _listed_parts(server, bucket)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(0.5)
        again = _listed_parts(server, bucket)
        if again == listed:
            return listed
        listed = again
    pytest.fail(f"the server's parts still changed 30 s after the kill: {sorted(listed)}")


def _kill_once_parts_listed(command: list[str], server: Any, bucket: str, at_least: int) -> dict[int, int]:
    """Run `command` and SIGKILL it as soon as the server lists `at_least` parts; returns the
    parts listed at that moment (read just before the kill was sent)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            listed = _listed_parts(server, bucket)
            if len(listed) >= at_least:
                process.send_signal(signal.SIGKILL)
                process.wait(timeout=30)
                return listed
            if process.poll() is not None:
                out, err = process.communicate()
                pytest.fail(
                    f"the copy ended before it could be killed ({process.returncode}): {err.decode()}"
                )
            time.sleep(0.02)
        pytest.fail("no parts were listed within 120 s")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout:
            process.stdout.close()
        if process.stderr:
            process.stderr.close()


def _put_in_parts(server: Any, bucket: str, data: bytes) -> None:
    """A multipart source (no checksum), so both modes copy it in parts: a single-part source
    with only an MD5 ETag would be copied in one request to keep that ETag."""
    client = server.client
    upload_id = client.create_multipart_upload(Bucket=bucket, Key=KEY)["UploadId"]
    parts = []
    for number, start in enumerate(range(0, len(data), PART), 1):
        etag = client.upload_part(
            Bucket=bucket, Key=KEY, UploadId=upload_id, PartNumber=number, Body=data[start : start + PART]
        )["ETag"]
        parts.append({"PartNumber": number, "ETag": etag})
    client.complete_multipart_upload(
        Bucket=bucket, Key=KEY, UploadId=upload_id, MultipartUpload={"Parts": parts}
    )


class PartCounter:
    """Counts the parts the in-process run sends, by a botocore `provide-client-params` hook
    on every client Ferry makes: part numbers, and for UploadPartCopy the bytes of its range."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self.numbers: list[int] = []
        self.copied_bytes = 0

    def hook(self, params: dict[str, Any], **_: Any) -> None:
        self.numbers.append(int(params["PartNumber"]))
        if "CopySourceRange" in params:
            start, end = params["CopySourceRange"].removeprefix("bytes=").split("-")
            self.copied_bytes += int(end) - int(start) + 1

    def make_client(self, *args: Any, **kwargs: Any) -> Any:
        client = real_make_client(*args, **kwargs)
        client.meta.events.register(f"provide-client-params.s3.{self.operation}", self.hook)
        return client


@pytest.mark.parametrize("mode", list(MODES))
def test_sigkilled_copy_resumes_without_sending_a_listed_part_again(
    server: Any, mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst = server.bucket("src"), server.bucket("dst")
    data = os.urandom(PARTS * PART - 12345)  # the last part shorter
    _put_in_parts(server, src, data)
    args = [
        "copy",
        f"s3://{src}/{KEY}",
        f"s3://{dst}/{KEY}",
        "--endpoint-url",
        server.url,
        "--mode",
        mode,
        "--part-size",
        "5MiB",
        "--part-concurrency",
        "2",
        "--quiet",
    ]
    if mode == "server-side" and server.name == "versitygw":
        # versitygw gives the source a full-object CRC64NVME: with the same algorithm a single
        # CopyObject would prove the copy, and there would be no parts to resume.
        args += ["--checksum-algorithm", "CRC32C"]

    listed_at_kill = _kill_once_parts_listed([*SLOW_FERRY, *args], server, dst, at_least=4)
    survived = _parts_once_settled(server, dst)  # parts in flight at the kill may have landed too
    assert set(listed_at_kill) <= set(survived)
    assert len(survived) < PARTS, "the copy was not cut: nothing to resume"
    assert [u["Key"] for u in server.open_uploads(dst)] == [KEY]

    operation = MODES[mode]
    counter = PartCounter(operation)
    monkeypatch.setattr(ferry.cli.commands.copy_command, "make_client", counter.make_client)
    monkeypatch.setattr(ferry.engine.strategies.copier, "make_client", counter.make_client)
    report = tmp_path / "second.jsonl"
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main([*args, "--report", str(report)], stdout, stderr)

    assert code == 0, stderr.getvalue()
    result = json.loads(report.read_text().splitlines()[0])
    assert result["status"] == "copied"
    assert result.get("parts_resumed", 0) == len(survived)  # every surviving part checked out
    assert not set(counter.numbers) & set(listed_at_kill), "a part listed before the kill was sent again"
    assert sorted(counter.numbers) == sorted(set(range(1, PARTS + 1)) - set(survived))  # each once
    sizes = {n: PART for n in range(1, PARTS)} | {PARTS: len(data) - (PARTS - 1) * PART}
    sent = sum(sizes[n] for n in counter.numbers)
    if operation == "UploadPartCopy":
        assert counter.copied_bytes == sent
    # At most the parts in flight at the kill plus those never started were sent again.
    assert sent <= len(data) - sum(sizes[n] for n in listed_at_kill)
    assert server.client.get_object(Bucket=dst, Key=KEY)["Body"].read() == data
    assert server.open_uploads(dst) == []
    assert server.keys(dst) == [KEY]  # the upload's mark went with it


@pytest.mark.parametrize("mode", list(MODES))
def test_a_sigkilled_copy_into_a_versioned_bucket_leaves_no_mark_in_its_history(
    server: Any, mode: str, tmp_path: Path
) -> None:
    """The killed run's mark is found by the resuming run, which deletes it by the version it
    read it from: the destination's history then holds the copy's one version and nothing
    under the marks prefix, neither the mark's version nor a delete marker."""
    src, dst = server.bucket("src"), versioned(server, "dst")
    data = os.urandom(PARTS * PART - 54321)
    _put_in_parts(server, src, data)
    args = ["copy", f"s3://{src}/{KEY}", f"s3://{dst}/{KEY}", "--endpoint-url", server.url, "--mode", mode]
    args += ["--part-size", "5MiB", "--part-concurrency", "2", "--quiet"]
    if mode == "server-side" and server.name == "versitygw":
        args += ["--checksum-algorithm", "CRC32C"]  # as above: else there are no parts

    _kill_once_parts_listed([*SLOW_FERRY, *args], server, dst, at_least=3)
    assert [key for key, kind in ferrys_history(server, dst)] != [], "the killed run left no mark"

    code = main(args, io.StringIO(), stderr := io.StringIO())

    assert code == 0, stderr.getvalue()
    assert server.client.get_object(Bucket=dst, Key=KEY)["Body"].read() == data
    answer = server.client.list_object_versions(Bucket=dst)
    assert [v["Key"] for v in answer.get("Versions", [])] == [KEY]
    assert answer.get("DeleteMarkers", []) == []
    assert ferrys_history(server, dst) == []
    assert server.open_uploads(dst) == []
