"""Objects at S3's limits through the Fargate door (`python -m handlers.copy_large`): a 5 TiB
object in 10,000 parts copied server-side, and 10,000 parts streamed, each killed (SIGKILL)
between two passes and retried as the state machine retries the task. The same again as a
key's history in an all_versions job (versioned buckets): a version of 10,000 parts with a
small version after it, the history's bytes over the Lambda threshold, so the pipeline sends
the key whole to the Fargate task, which copies its versions in order.

S3 is tests/virtual_s3.py, an endpoint of virtual objects (their bytes are made from a seed
when read and never stored), so the engine's real request path runs at the real part count
and size; the ledger and its checkpoints are DynamoDB on moto's server. The task's passes are
2 s long, so a copy of 10,000 parts saves many checkpoints; after each save the task says so,
and after the first of 2,500 parts or more it waits (tests/pipeline/paused_copy_large.py),
which is when the test kills it: no part is in flight then, so the retry must send exactly
the parts the checkpoint does not hold. One more kills the task of a small history between a
version's CompleteMultipartUpload and the deletion of its upload's mark.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from conftest import create_ledger_table
from ferry.jobspec import parse_job_spec
from ferry.pipeline.abandoned_uploads import AbandonedUploads, abort_abandoned_uploads
from ferry.pipeline.items import plan_item
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from ferry.pipeline.locations import Location
from ferry.pipeline.settings import PipelineSettings

TiB = 1024**4
MAX_PARTS = 10_000
REPO = Path(__file__).resolve().parents[2]
TASK = [sys.executable, str(Path(__file__).with_name("paused_copy_large.py"))]
KEY, DEST_KEY = "in/big.bin", "copy/big.bin"
SMALL_VERSION = b"the small version written after the large one\n" * 20


class LargeTask:
    """One job's object on the virtual endpoint, the ledger, and the ECS task's environment.
    With `history`, an all_versions job's key: buckets that keep versions, the large object its
    first version and SMALL_VERSION its second, the task's item the key (`k`, `n`, `s`)."""

    def __init__(
        self, server: Any, motoserver: Any, part_sizes: list[int], mode: str, *, history: bool = False
    ) -> None:
        self.server, self.s3 = server, server.client
        self.src, self.dst, self.reports = server.bucket("src"), server.bucket("dst"), server.bucket("rep")
        if history:
            for bucket in (self.src, self.dst):
                self.s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        self.source = server.make(self.src, KEY, f"seed-{uuid.uuid4().hex}", part_sizes)
        self.small = self.s3.put_object(Bucket=self.src, Key=KEY, Body=SMALL_VERSION) if history else None
        self.table = f"ledger-{uuid.uuid4().hex[:8]}"
        self.dynamodb = boto3.client(
            "dynamodb",
            endpoint_url=motoserver.url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        create_ledger_table(self.dynamodb, self.table)
        self.ledger = DynamoLedger(self.dynamodb, self.table)
        spec = parse_job_spec(
            {
                "job_id": "limits-job",
                "source": {"bucket": self.src, "prefix": "in/"},
                "destination": {"bucket": self.dst, "prefix": "copy/"},
                "options": {"mode": mode, **({"all_versions": True} if history else {})},
            }
        )
        self.ledger.create_job(spec.job_id, spec.to_dict())
        self.spec = spec
        item: dict[str, Any] = {"Key": KEY, "Size": self.source["Size"], "ETag": f'"{self.source["ETag"]}"'}
        if history:  # as pipeline/history_keys.py lists it: the key, its versions, their bytes
            item = {"k": KEY, "n": 2, "s": self.source["Size"] + len(SMALL_VERSION)}
        settings = PipelineSettings(sources=(Location(self.src),), destinations=(Location(self.dst),))
        self.goes_to_fargate = plan_item(item, spec).obj.size > settings.large_object_threshold  # type: ignore[union-attr]
        self.env = {
            **os.environ,
            **settings.worker_environment(fargate=True),
            "FERRY_TABLE": self.table,
            "FERRY_REPORT_BUCKET": self.reports,
            "FERRY_JOB_ID": spec.job_id,
            "FERRY_BATCH_ID": "batch-1",
            "FERRY_ITEM": json.dumps(item),
            "FERRY_LARGE_OBJECT_PASS_SECONDS": "2",
            "POWERTOOLS_SERVICE_NAME": "ferry",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "AWS_XRAY_SDK_ENABLED": "false",
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_ENDPOINT_URL_S3": server.url,
            "AWS_ENDPOINT_URL_DYNAMODB": motoserver.url,
            "PYTHONPATH": os.pathsep.join(str(REPO / p) for p in ("functions", "tests")),
        }

    def kill_after_a_checkpoint(self, at_least: int) -> int:
        """Run the task until it has saved a checkpoint of `at_least` parts, SIGKILL it while
        it waits before its next pass, and return how many parts that checkpoint holds."""
        process = subprocess.Popen(
            TASK,
            env={**self.env, "PAUSE_AT_PARTS": str(at_least)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        said = []
        try:
            assert process.stdout is not None
            for line in process.stdout:
                said.append(line)
                if line.startswith("checkpoint "):
                    saved = int(line.split()[1])
                    if saved >= at_least:
                        process.send_signal(signal.SIGKILL)
                        process.wait(timeout=60)
                        assert process.returncode == -signal.SIGKILL
                        return saved
            raise AssertionError(
                f"the task ended before a checkpoint of {at_least} parts: "
                + "".join(said)[-3000:]
                + process.communicate()[1][-3000:]
            )
        finally:
            if process.poll() is None:
                process.kill()
            process.communicate()

    def kill_after_completing(self) -> None:
        """Run the task until a CompleteMultipartUpload has answered, and SIGKILL it before
        the upload's mark is deleted."""
        process = subprocess.Popen(
            TASK,
            env={**self.env, "PAUSE_AFTER_COMPLETE": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None
            for line in process.stdout:
                if line.startswith("completed"):
                    process.send_signal(signal.SIGKILL)
                    process.wait(timeout=60)
                    return
            raise AssertionError(
                "the task ended before completing an upload: " + process.communicate()[1][-3000:]
            )
        finally:
            if process.poll() is None:
                process.kill()
            process.communicate()

    def retry(self) -> subprocess.CompletedProcess[str]:
        """The state machine's retry of the task: the same entry point, run to its end."""
        return subprocess.run(TASK, env=self.env, capture_output=True, text=True, timeout=600)

    def checkpoint_items(self) -> list[str]:
        items = self.dynamodb.scan(TableName=self.table, ProjectionExpression="pk, sk")["Items"]
        return [i["sk"]["S"] for i in items if i["pk"]["S"].startswith("CKPT#")]

    def parts_sent(self, upload_id: str) -> list[int]:
        return [r["part"] for r in self.server.part_requests() if r["upload"] == upload_id]

    def assert_copied_once(self) -> None:
        head = self.s3.head_object(Bucket=self.dst, Key=DEST_KEY)
        assert head["ContentLength"] == self.source["Size"]
        assert head["ETag"].strip('"') == self.source["ETag"]  # the source's 10,000-part ETag
        assert self.s3.list_multipart_uploads(Bucket=self.dst).get("Uploads", []) == []
        assert self.server.keys(self.dst) == [DEST_KEY]  # no upload mark left
        assert self.checkpoint_items() == []
        tally = self.ledger.tally("limits-job").to_dict()
        assert (tally["objects"], tally["copied"], tally["failed"], tally["bytes_copied"]) == (
            1,
            1,
            0,
            self.source["Size"],
        )

    def assert_history_copied_once(self) -> None:
        """The destination's history is the source's, oldest first, each version once; no
        upload, mark, marker or checkpoint is left; the ledger counts two versions of one key."""
        listed = self.s3.list_object_versions(Bucket=self.dst)
        assert listed.get("DeleteMarkers", []) == []  # not even a deleted mark's
        versions = listed["Versions"]  # newest first: the answer's order, by how it was written
        assert [(v["Key"], v["IsLatest"]) for v in versions] == [(DEST_KEY, True), (DEST_KEY, False)]
        small, large = versions
        assert (large["Size"], large["ETag"].strip('"')) == (self.source["Size"], self.source["ETag"])
        assert (small["Size"], small["ETag"]) == (len(SMALL_VERSION), self.small["ETag"])  # type: ignore[index]
        body = self.s3.get_object(Bucket=self.dst, Key=DEST_KEY, VersionId=small["VersionId"])["Body"]
        assert body.read() == SMALL_VERSION
        assert self.s3.list_multipart_uploads(Bucket=self.dst).get("Uploads", []) == []
        assert self.checkpoint_items() == []
        tally = self.ledger.tally("limits-job")
        counts = tally.counts.to_dict()
        assert (counts["objects"], counts["copied"], counts["failed"], tally.items) == (2, 2, 0, 1)
        assert counts["bytes_copied"] == self.source["Size"] + len(SMALL_VERSION)


def copy_killed_between_passes(task: LargeTask, operation: str) -> None:
    """Kill the task after a checkpoint of 2,500 parts or more, retry it, and assert the retry
    sent each part the checkpoint lacked once (the copy's own assertions are the caller's)."""
    saved = task.kill_after_a_checkpoint(at_least=2_500)
    assert saved < MAX_PARTS
    (upload,) = task.s3.list_multipart_uploads(Bucket=task.dst)["Uploads"]
    before = task.parts_sent(upload["UploadId"])
    assert len(before) == saved  # no part was in flight when the task was killed
    assert len([s for s in task.checkpoint_items() if s.startswith("PARTS#")]) == -(-saved // 1000)

    retried = task.retry()
    assert retried.returncode == 0, retried.stderr[-3000:]
    after = task.parts_sent(upload["UploadId"])[len(before) :]
    assert sorted(after) == sorted(set(range(1, MAX_PARTS + 1)) - set(before))  # each part sent once
    assert {r["op"] for r in task.server.part_requests()} == {operation}


def s3_limits_part_sizes() -> list[int]:
    """S3's largest object (5 TiB) in its most parts (10,000): 549,755,814 bytes each, the last
    part what is left."""
    part = -(-5 * TiB // MAX_PARTS)
    return [part] * (MAX_PARTS - 1) + [5 * TiB - part * (MAX_PARTS - 1)]


@pytest.mark.slow
def test_a_5_tib_object_in_10000_parts_copied_server_side_resumes_after_a_sigkill(
    virtual_s3, motoserver
) -> None:
    task = LargeTask(virtual_s3, motoserver, s3_limits_part_sizes(), mode="server-side")
    assert task.source["Size"] == 5 * TiB
    copy_killed_between_passes(task, "UploadPartCopy")
    task.assert_copied_once()


@pytest.mark.slow
@pytest.mark.parametrize("virtual_s3", [4096], indirect=True)
def test_10000_parts_streamed_resume_after_a_sigkill(virtual_s3, motoserver) -> None:
    """A 100 GiB object streams in S3's 10,000 parts (parts of 11 MiB by default): the part
    count is what a checkpoint must hold, so the bytes are simulated at 4 KiB a part."""
    task = LargeTask(virtual_s3, motoserver, [4096] * MAX_PARTS, mode="stream")
    copy_killed_between_passes(task, "UploadPart")
    task.assert_copied_once()


@pytest.mark.slow
def test_a_history_with_a_5_tib_version_in_10000_parts_copied_server_side_resumes_after_a_sigkill(
    virtual_s3, motoserver
) -> None:
    """The 5 TiB version goes in 10,000 UploadPartCopy requests naming its VersionId, the small
    version after it in one CopyObject; the retry resumes the first version's upload."""
    task = LargeTask(virtual_s3, motoserver, s3_limits_part_sizes(), mode="server-side", history=True)
    assert task.goes_to_fargate
    copy_killed_between_passes(task, "UploadPartCopy")
    task.assert_history_copied_once()


@pytest.mark.slow
@pytest.mark.parametrize("virtual_s3", [4096], indirect=True)
def test_a_history_with_a_version_of_10000_parts_streamed_resumes_after_a_sigkill(
    virtual_s3, motoserver
) -> None:
    """The version of 10,000 parts (4 KiB each, as above) streamed by ranged GETs of its
    VersionId, the small version after it in one GET and PUT."""
    task = LargeTask(virtual_s3, motoserver, [4096] * MAX_PARTS, mode="stream", history=True)
    copy_killed_between_passes(task, "UploadPart")
    task.assert_history_copied_once()


def test_a_mark_left_by_a_task_killed_between_completing_a_version_and_deleting_the_mark_goes_at_finalize(
    virtual_s3, motoserver
) -> None:
    """Killed right after the first version's CompleteMultipartUpload: the retry finds that
    version in the destination's history and copies the next, so no copy of that version is
    left to delete its mark, a version in the destination bucket's history. The upload is gone,
    so Finalize's clean-up of what the job's crashes left deletes the mark, by its version."""
    task = LargeTask(virtual_s3, motoserver, [5 * 1024**2] * 3, mode="server-side", history=True)
    task.kill_after_completing()
    (mark,) = [k for k in task.server.keys(task.dst) if k != DEST_KEY]
    retried = task.retry()
    assert retried.returncode == 0, retried.stderr[-3000:]
    assert mark in task.server.keys(task.dst)  # the crash's leftover, until the job ends

    cleanup = abort_abandoned_uploads(task.s3, task.spec)

    listed = task.s3.list_object_versions(Bucket=task.dst)
    assert [v["Key"] for v in listed["Versions"]] == [DEST_KEY, DEST_KEY]
    assert listed.get("DeleteMarkers", []) == []
    assert cleanup == AbandonedUploads(aborted=0, marks_deleted=1)
