"""The Fargate entry point (`python -m handlers.copy_large`) stopped or killed mid-copy, then
retried as the state machine retries it (issue 13, "Crash and resume").

The task runs as a real process with the environment the ECS task definition gives it
(PipelineSettings.worker_environment(fargate=True), the ledger table, the report bucket and
the object in FERRY_JOB_ID / FERRY_BATCH_ID / FERRY_ITEM), its AWS services on this machine:
S3 on versitygw, the DynamoDB ledger on moto's server, reached through boto3's
AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL_DYNAMODB ("Service-specific endpoints", AWS SDKs and
Tools reference guide, feature-ss-endpoints.html). Only the link is slowed (each part request
waits first: tests/pipeline/slow_copy_large.py), so the copy lasts long enough to be cut.

- SIGTERM (a Spot interruption, StopTask): the task stops at the end of its pass, saves a
  checkpoint and exits 75; the retry resumes from the checkpoint.
- SIGKILL (the stopTimeout passed, the host died): nothing is saved; the retry finds the
  marked upload in S3 (ListMultipartUploads, ListParts, each part checked against the source).
The retry runs in-process so a botocore hook can count every part it sends: nothing the
server listed after the stop may be sent again, and the object is counted once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from conftest import create_ledger_table
from ferry.engine.records.upload_marks import list_marks
from ferry.jobspec import parse_job_spec
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from ferry.pipeline.locations import Location
from ferry.pipeline.settings import PipelineSettings

MiB = 1024 * 1024
PART = 5 * MiB
PARTS = 8
KEY = "in/large.bin"
DEST_KEY = "copy/large.bin"
REPO = Path(__file__).resolve().parents[2]
SLOW_TASK = [sys.executable, str(Path(__file__).with_name("slow_copy_large.py"))]


class Task:
    """One job's large object, its servers, and the environment its ECS task gets."""

    def __init__(self, versitygw: Any, motoserver: Any) -> None:
        self.s3 = versitygw.client
        self.src, self.dst, self.reports = (
            versitygw.bucket("src"),
            versitygw.bucket("dst"),
            versitygw.bucket("rep"),
        )
        self.table = f"ledger-{uuid.uuid4().hex[:8]}"
        self.dynamodb = boto3.client("dynamodb", endpoint_url=motoserver.url, region_name="us-east-1")
        create_ledger_table(self.dynamodb, self.table)
        self.ledger = DynamoLedger(self.dynamodb, self.table)
        self.data = os.urandom(PARTS * PART - 1234)
        self.s3.put_object(Bucket=self.src, Key=KEY, Body=self.data)
        spec = parse_job_spec(
            {
                "job_id": "large-job",
                "source": {"bucket": self.src, "prefix": "in/"},
                "destination": {"bucket": self.dst, "prefix": "copy/"},
                "options": {"mode": "stream", "part_size": "5MiB"},
            }
        )
        self.ledger.create_job(spec.job_id, spec.to_dict())
        item = {
            "Key": KEY,
            "Size": len(self.data),
            "ETag": self.s3.head_object(Bucket=self.src, Key=KEY)["ETag"],
        }
        settings = PipelineSettings(sources=(Location(self.src),), destinations=(Location(self.dst),))
        self.env = {
            **settings.worker_environment(fargate=True),
            "FERRY_TABLE": self.table,
            "FERRY_REPORT_BUCKET": self.reports,
            "FERRY_JOB_ID": spec.job_id,
            "FERRY_BATCH_ID": "batch-1",
            "FERRY_ITEM": json.dumps(item),
            # Two parts in flight at a time (a small task), so a cut lands between parts.
            "FERRY_MEMORY_LIMIT": str(2 * PART),
            "POWERTOOLS_SERVICE_NAME": "ferry",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "AWS_XRAY_SDK_ENABLED": "false",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_S3": versitygw.url,
            "AWS_ENDPOINT_URL_DYNAMODB": motoserver.url,
        }

    def listed_parts(self) -> dict[int, int]:
        """The server's view: part number -> size, over the open uploads of the destination key."""
        parts: dict[int, int] = {}
        for upload in self.s3.list_multipart_uploads(Bucket=self.dst, Prefix=DEST_KEY).get("Uploads", []):
            if upload["Key"] == DEST_KEY:
                listing = self.s3.list_parts(Bucket=self.dst, Key=DEST_KEY, UploadId=upload["UploadId"])
                parts.update({p["PartNumber"]: p["Size"] for p in listing.get("Parts", [])})
        return parts

    def run_until_cut(
        self, sig: signal.Signals, extra_env: dict[str, str]
    ) -> subprocess.CompletedProcess[str]:
        """Start the task; send `sig` once the server lists a part; wait for it to end."""
        env = {
            **os.environ,
            **self.env,
            **extra_env,
            "PYTHONPATH": os.pathsep.join(str(REPO / p) for p in ("functions", "tests")),
            "SLOW_PART_SECONDS": "0.5",
        }
        process = subprocess.Popen(
            SLOW_TASK, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and process.poll() is None and not self.listed_parts():
                time.sleep(0.05)
            assert process.poll() is None, f"the task ended before it was cut: {process.communicate()}"
            process.send_signal(sig)
            out, err = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        return subprocess.CompletedProcess(SLOW_TASK, process.returncode, out, err)

    def retry(self, monkeypatch: pytest.MonkeyPatch) -> tuple[int, list[int]]:
        """The state machine's retry of the task, in-process: exit code and part numbers sent."""
        import ferry.engine.strategies.copier
        import ferry.pipeline.services
        from handlers import copy_large, runtime

        for name, value in self.env.items():
            monkeypatch.setenv(name, value)
        runtime.services.cache_clear()
        sent: list[int] = []
        lock = threading.Lock()
        real = ferry.engine.strategies.copier.make_client

        def counted(*args: Any, **kwargs: Any) -> Any:
            client = real(*args, **kwargs)

            def count(params: dict[str, Any], **_: Any) -> None:
                with lock:
                    sent.append(params["PartNumber"])

            client.meta.events.register("before-parameter-build.s3.UploadPart", count)
            return client

        monkeypatch.setattr(ferry.engine.strategies.copier, "make_client", counted)
        monkeypatch.setattr(ferry.pipeline.services, "make_client", counted)  # the clients a worker keeps
        try:
            code = copy_large.main()
        finally:
            runtime.services.cache_clear()
        return code, sent

    def assert_copied_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        assert self.s3.get_object(Bucket=self.dst, Key=DEST_KEY)["Body"].read() == self.data
        assert self.s3.list_multipart_uploads(Bucket=self.dst).get("Uploads", []) == []
        assert list(list_marks(self.s3, self.dst)) == []
        again, sent = self.retry(monkeypatch)  # a retried task after success: counted once
        assert (again, sent) == (0, [])
        tally = self.ledger.tally("large-job").to_dict()
        assert (tally["objects"], tally["copied"], tally["failed"], tally["bytes_copied"]) == (
            1,
            1,
            0,
            len(self.data),
        )


@pytest.fixture
def task(versitygw, motoserver, monkeypatch) -> Task:
    monkeypatch.delenv("FERRY_LARGE_OBJECT_PASS_SECONDS", raising=False)
    return Task(versitygw, motoserver)


def test_a_task_stopped_by_sigterm_exits_75_and_its_retry_resumes_from_the_checkpoint(
    task, monkeypatch
) -> None:
    stopped = task.run_until_cut(signal.SIGTERM, {"FERRY_LARGE_OBJECT_PASS_SECONDS": "1.5"})

    assert stopped.returncode == 75, stopped.stderr[-2000:]
    assert "stopped at a checkpoint (SIGTERM)" in stopped.stdout + stopped.stderr
    kept = task.listed_parts()
    assert 0 < len(kept) < PARTS, kept
    assert task.ledger.tally("large-job").to_dict()["objects"] == 0, "a stopped task records nothing"

    code, sent = task.retry(monkeypatch)

    assert code == 0
    assert sorted(sent) == sorted(set(range(1, PARTS + 1)) - set(kept)), (
        "no part the server held is sent again"
    )
    task.assert_copied_once(monkeypatch)


def test_a_task_killed_by_sigkill_is_resumed_from_its_upload_mark(task, monkeypatch) -> None:
    killed = task.run_until_cut(signal.SIGKILL, {})

    assert killed.returncode == -signal.SIGKILL
    time.sleep(0.5)  # a part whose request was already sent may still land
    kept = task.listed_parts()
    assert 0 < len(kept) < PARTS, kept
    assert (
        task.dynamodb.scan(
            TableName=task.table,
            FilterExpression="begins_with(pk, :c)",
            ExpressionAttributeValues={":c": {"S": "CKPT#"}},
        )["Items"]
        == []
    ), "killed mid-pass: no checkpoint was saved, only S3 knows the upload"
    (mark,) = list_marks(task.s3, task.dst)
    assert (mark.dest_key, mark.job_id) == (DEST_KEY, "large-job")

    code, sent = task.retry(monkeypatch)

    assert code == 0
    assert sorted(sent) == sorted(set(range(1, PARTS + 1)) - set(kept)), (
        "no part the server held is sent again"
    )
    task.assert_copied_once(monkeypatch)
