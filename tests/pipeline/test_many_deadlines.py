"""The Lambda path forced through many short deadlines in a row (issue 13, "Crash and resume"):
a batch of multipart and small objects copied by CopyBatch in pass after pass, each pass
handing over what it could not finish, ends exactly as one uninterrupted pass does.

Time is a virtual clock: the engine's deadline checks read the seconds the S3 requests made
so far are deemed to have taken (`VirtualClock`), and objects are copied one at a time, so
each pass runs out of time after one part or ten small objects on any machine, however
loaded, without sleeping. The passes are driven as the child workflow drives them
(statemachine/copy_batch.asl.json): a pass that hands over raises FerryHandOver and
ResumeHandOver reads its result back from the ledger (conftest.copy_batch_pass); NextPass
then gives the next pass the previous pass's `remaining`, `next_pass`, `batch_id`, `counts`
and `large`.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import PIPELINE_REPORTS, PIPELINE_TABLE, FakeLambdaContext, copy_batch_pass
from ferry.engine.records.upload_marks import list_marks
from ferry.pipeline.batches import copy_large_object
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from handlers import copy_batch, finalize, prepare, record_failure

MiB = 1024 * 1024
PART = 5 * MiB
# Seconds each request is deemed to take on the virtual clock: a part more than a pass has (so
# a pass sends one part), a small object's GET and PUT a few hundredths of a second.
COST = {"UploadPart": 1.5, "UploadPartCopy": 1.5, "GetObject": 0.02, "PutObject": 0.02, "CopyObject": 0.02}
PASS_SECONDS = 1.4  # what each pass has left after the deadline margin
LARGE = {"big/a.bin": 3 * PART, "big/b.bin": 2 * PART + 123_457, "big/c.bin": 2 * PART}
SMALL = 30


class VirtualClock:
    """The engine's `time.monotonic()`: only the seconds the requests made so far are deemed
    to have taken, never the machine's own time, so how loaded it is changes nothing."""

    def __init__(self) -> None:
        self.offset = 1000.0
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        with self._lock:
            return self.offset

    def spend(self, seconds: float) -> None:
        with self._lock:
            self.offset += seconds


class Requests:
    """Every request of COST's kinds the engine's clients make, as (operation, key, part
    number); each one advances the virtual clock by its cost as it is sent."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.sent: list[tuple[str, str, int | None]] = []
        self._lock = threading.Lock()

    def watch(self, client: Any) -> Any:
        for operation in COST:
            client.meta.events.register(f"before-parameter-build.s3.{operation}", self._sent(operation))
        return client

    def _sent(self, operation: str) -> Any:
        def record(params: dict[str, Any], **_: Any) -> None:
            with self._lock:
                self.sent.append((operation, params["Key"], params.get("PartNumber")))
            self.clock.spend(COST[operation])

        return record

    def of(self, operation: str, prefix: str) -> Counter[tuple[str, int | None]]:
        return Counter(
            (key, part) for op, key, part in self.sent if op == operation and key.startswith(prefix)
        )


@pytest.fixture
def timed(pipeline, monkeypatch) -> Requests:
    """The engine on the virtual clock, its clients' write requests recorded."""
    from ferry.engine.run import deadlines
    from ferry.engine.strategies import copier
    from ferry.pipeline import batches, services

    clock = VirtualClock()
    fake_time = SimpleNamespace(monotonic=clock.monotonic)
    monkeypatch.setattr(copier, "time", fake_time)
    monkeypatch.setattr(deadlines, "time", fake_time)  # every deadline is made and read there
    requests = Requests(clock)
    real_make_client = copier.make_client
    monkeypatch.setattr(copier, "make_client", lambda *a, **k: requests.watch(real_make_client(*a, **k)))
    # The clients a worker keeps from pass to pass are made by the pipeline (services), its
    # other clients by the batch's own code.
    monkeypatch.setattr(services, "make_client", lambda *a, **k: requests.watch(real_make_client(*a, **k)))
    monkeypatch.setattr(batches, "make_client", lambda *a, **k: requests.watch(real_make_client(*a, **k)))
    # One object at a time, so which objects a pass starts depends on the clock alone.
    monkeypatch.setattr(copier, "default_concurrency", lambda *a, **k: 1)
    # Room for one 5 MiB part at a time, and passes enough to finish.
    monkeypatch.setenv("FERRY_MEMORY_LIMIT", str(PART))
    monkeypatch.setenv("FERRY_MAX_PASSES", "400")
    pipeline.services.cache_clear()
    return requests


def fill_source(s3: Any) -> dict[str, bytes]:
    """Multipart-sized objects and many small ones, each with its own type, metadata and tags."""
    data: dict[str, bytes] = {}
    for key, size in LARGE.items():
        data[key] = os.urandom(size)
    for n in range(SMALL):
        data[f"small/{n:03}.txt"] = f"small object {n}\n".encode() * (n + 1)
    for n, (key, body) in enumerate(data.items()):
        s3.put_object(
            Bucket="src",
            Key=key,
            Body=body,
            ContentType="application/x-ferry" if key.startswith("big/") else "text/plain",
            Metadata={"n": str(n), "origin": "crash-test"},
            Tagging=f"n={n}&kind={key.split('/')[0]}",
        )
    return data


def start_job(job_id: str, prefix: str) -> dict[str, Any]:
    spec = {
        "job_id": job_id,
        "source": {"bucket": "src"},
        "destination": {"bucket": "dst", "prefix": prefix},
        "options": {"mode": "stream", "part_size": "5MiB", "multipart_threshold": "5MiB"},
    }
    job = prepare.handler({"spec": spec, "execution_name": job_id}, FakeLambdaContext())
    assert "rejected" not in job, job
    return job


def listing_items(s3: Any) -> list[dict[str, Any]]:
    """Items as the Distributed Map's listObjectsV2 reader gives them."""
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket="src")
    return [
        {
            "Key": o["Key"],
            "Size": o["Size"],
            "ETag": o["ETag"],
            "StorageClass": o.get("StorageClass", "STANDARD"),
        }
        for page in pages
        for o in page.get("Contents", [])
    ]


def run_passes(job: dict[str, Any], items: list[dict[str, Any]], remaining_ms: int) -> list[dict[str, Any]]:
    """CopyBatch in passes, each fed as the child workflow's NextPass feeds it, until nothing is
    handed over. Returns every pass's output (a pass that hands over raises FerryHandOver; its
    output is then what ResumeHandOver reads back from the ledger, as in the child workflow)."""
    return run_passes_from({"job": job, "items": items, "pass": 1}, remaining_ms)


def run_passes_from(event: dict[str, Any], remaining_ms: int) -> list[dict[str, Any]]:
    """The passes from `event` on (a first pass, or a retried one)."""
    outputs = []
    while True:
        out = copy_batch_pass(event, FakeLambdaContext(remaining_ms))
        outputs.append(out)
        assert len(outputs) < 400, "the passes never finished"
        if not out["remaining"]:
            return outputs
        event = {
            "job": out["job"],
            "items": out["remaining"],
            "large": out["large"],
            "pass": out["next_pass"],
            "batch_id": out["batch_id"],
            "counts": out["counts"],
        }


def destination(s3: Any, prefix: str) -> dict[str, dict[str, Any]]:
    """Everything a copy is meant to keep, per key under the prefix (the prefix taken off)."""
    found = {}
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket="dst", Prefix=prefix)
    for key in (o["Key"] for page in pages for o in page.get("Contents", [])):
        got = s3.get_object(Bucket="dst", Key=key)
        tags = s3.get_object_tagging(Bucket="dst", Key=key)["TagSet"]
        found[key[len(prefix) :]] = {
            "body": got["Body"].read(),
            "etag": got["ETag"],
            "content_type": got["ContentType"],
            "metadata": got["Metadata"],
            "tags": sorted((t["Key"], t["Value"]) for t in tags),
        }
    return found


def report_rows(s3: Any, job_id: str) -> list[dict[str, Any]]:
    reports = s3.list_objects_v2(Bucket=PIPELINE_REPORTS, Prefix=f"jobs/{job_id}/objects/")["Contents"]
    return [
        json.loads(line)
        for report in reports
        for line in s3.get_object(Bucket=PIPELINE_REPORTS, Key=report["Key"])["Body"]
        .read()
        .decode()
        .splitlines()
    ]


def test_many_short_deadlines_end_as_one_uninterrupted_pass(pipeline, timed) -> None:
    data = fill_source(pipeline.s3)
    items = listing_items(pipeline.s3)
    parts = {key: -(-size // PART) for key, size in LARGE.items()}
    margin_ms = pipeline.settings.deadline_margin_seconds * 1000

    whole = run_passes(start_job("whole", "whole/"), items, 900_000)
    cut = run_passes(start_job("cut", "cut/"), items, margin_ms + int(PASS_SECONDS * 1000))

    assert len(whole) == 1, "the uninterrupted run finishes in one pass"
    # Each pass has time to send one part (and a few small objects): a pass per part at least.
    assert len(cut) >= sum(parts.values()), f"only {len(cut)} passes: the deadlines did not cut the batch"
    handed_over = [len(out["remaining"]) for out in cut[:-1]]
    assert max(handed_over) > len(LARGE), f"small objects were handed over too: {handed_over}"

    # Counts add up, pass by pass and in the ledger: every object once, nothing failed or pending.
    everything = {"objects": len(data), "copied": len(data), "skipped": 0, "failed": 0, "pending": 0}
    for out in (whole[-1], cut[-1]):
        assert {k: out["counts"][k] for k in everything} == everything
        assert out["counts"]["bytes_copied"] == sum(len(b) for b in data.values())
    ledger = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE)
    tally = ledger.tally("cut").to_dict()
    assert {k: tally[k] for k in everything} == everything
    assert tally["batches"] == len(cut), "one marker per pass"
    assert list(ledger.failures("cut")) == []
    rows = report_rows(pipeline.s3, "cut")
    assert sorted(r["key"] for r in rows) == sorted(data), (
        "each object reported once, by the pass that settled it"
    )
    resumed = {r["key"]: r.get("parts_resumed", 0) for r in rows if r["key"] in LARGE}
    assert all(resumed.values()), f"a multipart copy did not resume over a deadline: {resumed}"

    # Each part sent once, each small object written once; nothing left open or checkpointed.
    sent_parts = timed.of("UploadPart", "cut/")
    assert sent_parts == Counter({(f"cut/{k}", n): 1 for k in LARGE for n in range(1, parts[k] + 1)})
    assert timed.of("PutObject", "cut/") == Counter({(f"cut/{k}", None): 1 for k in data if k not in LARGE})
    assert pipeline.s3.list_multipart_uploads(Bucket="dst").get("Uploads", []) == []
    assert list(list_marks(pipeline.s3, "dst")) == [], "every upload's mark went with it"
    checkpoints = pipeline.dynamodb.scan(
        TableName=PIPELINE_TABLE,
        FilterExpression="begins_with(pk, :ckpt)",
        ExpressionAttributeValues={":ckpt": {"S": "CKPT#"}},
    )["Items"]
    assert checkpoints == []

    # The same bytes, ETags (the same part layout), type, metadata and tags as without deadlines.
    copied, reference = destination(pipeline.s3, "cut/"), destination(pipeline.s3, "whole/")
    assert copied.keys() == reference.keys() == data.keys()
    for key, body in data.items():
        assert copied[key]["body"] == body, key
        assert copied[key] == reference[key], key


def test_the_last_pass_hands_an_unfinished_copy_to_fargate_which_resumes_it(
    pipeline, timed, monkeypatch
) -> None:
    """A multipart copy still unfinished at the batch's last Lambda pass (max_passes) is not
    failed: the pass hands it to the Fargate task, which resumes it from the checkpoint the
    pass saved, sends only the parts S3 does not hold yet, and counts the object once."""
    from handlers.runtime import services

    monkeypatch.setenv("FERRY_MAX_PASSES", "2")
    pipeline.services.cache_clear()
    data = os.urandom(3 * PART)
    pipeline.s3.put_object(Bucket="src", Key="big/a.bin", Body=data)
    job = start_job("last-pass", "out/")
    margin_ms = pipeline.settings.deadline_margin_seconds * 1000

    passes = run_passes(job, listing_items(pipeline.s3), margin_ms + int(PASS_SECONDS * 1000))

    assert [(out["remaining"], len(out["large"])) for out in passes[1:]] == [([], 1)], "to Fargate at pass 2"
    assert [out["counts"]["failed"] for out in passes] == [0, 0]
    assert timed.of("UploadPart", "out/") == Counter({("out/big/a.bin", 1): 1, ("out/big/a.bin", 2): 1})

    result = copy_large_object("last-pass", passes[-1]["batch_id"], passes[-1]["large"][0], services())

    assert result is not None and result.status.value == "copied" and result.parts_resumed == 2
    assert timed.of("UploadPart", "out/") == Counter({("out/big/a.bin", n): 1 for n in (1, 2, 3)})
    assert pipeline.s3.get_object(Bucket="dst", Key="out/big/a.bin")["Body"].read() == data
    tally = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).tally("last-pass").to_dict()
    assert (tally["objects"], tally["copied"], tally["failed"]) == (1, 1, 0)
    assert pipeline.s3.list_multipart_uploads(Bucket="dst").get("Uploads", []) == []


def test_an_upload_the_job_gave_up_on_is_aborted_by_its_finalize(pipeline, timed, monkeypatch) -> None:
    """A multipart copy the last Lambda pass handed to Fargate, whose task then failed for good
    (RecordFailedLargeObject records it failed), leaves its upload (checkpointed, marked with
    the job) open: Finalize aborts it, no later job resumes it, nothing keeps costing storage."""
    monkeypatch.setenv("FERRY_MAX_PASSES", "2")
    pipeline.services.cache_clear()
    pipeline.s3.put_object(Bucket="src", Key="big/a.bin", Body=os.urandom(3 * PART))
    job = start_job("gave-up", "out/")
    margin_ms = pipeline.settings.deadline_margin_seconds * 1000

    passes = run_passes(job, listing_items(pipeline.s3), margin_ms + int(PASS_SECONDS * 1000))
    error = {"Error": "States.TaskFailed", "Cause": "the task kept failing"}
    last = passes[-1]
    record_failure.handler(
        {"job": job, "batch_id": last["batch_id"], "large_item": last["large"][0], "error": error},
        FakeLambdaContext(),
    )

    (upload,) = pipeline.s3.list_multipart_uploads(Bucket="dst")["Uploads"]
    (mark,) = list_marks(pipeline.s3, "dst")
    assert (mark.dest_key, mark.upload_id, mark.job_id) == ("out/big/a.bin", upload["UploadId"], "gave-up")

    summary = finalize.handler({"job": job, "map": {}}, FakeLambdaContext())

    assert summary["abandoned_uploads_aborted"] == 1
    assert (summary["status"], summary["failed"]) == ("FAILED", 1)
    assert pipeline.s3.list_multipart_uploads(Bucket="dst").get("Uploads", []) == []
    assert list(list_marks(pipeline.s3, "dst")) == []


class LambdaKilled(BaseException):
    """The Lambda's timeout: the process ends where it stands, with no handler, cleanup or
    checkpoint after it (a BaseException: no `except Exception` in the engine catches it)."""


def killed_at_checkpoint(monkeypatch: pytest.MonkeyPatch, nth: int) -> None:
    """The `nth` checkpoint a pass would save is never saved: the Lambda is killed first."""
    from ferry.pipeline.ledger.dynamodb import DynamoCheckpointStore

    real = DynamoCheckpointStore.save
    calls = 0

    def save(self: Any, checkpoint: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == nth:
            raise LambdaKilled(f"killed before checkpoint {nth} was saved")
        real(self, checkpoint)

    monkeypatch.setattr(DynamoCheckpointStore, "save", save)


@pytest.mark.parametrize(
    "nth", [1, 2], ids=["killed-before-any-checkpoint", "killed-after-an-earlier-checkpoint"]
)
def test_a_pass_killed_hard_is_retried_and_resumes_from_s3(pipeline, timed, monkeypatch, nth) -> None:
    """A pass killed by the Lambda timeout records nothing and saves no checkpoint; Step
    Functions retries the same pass (Sandbox.Timedout, statemachine/copy_batch.asl.json). The
    retry finds the upload the killed pass left, by its mark, and sends no part again that S3
    already holds, whether or not an earlier pass had checkpointed the copy."""
    data = os.urandom(3 * PART)
    pipeline.s3.put_object(Bucket="src", Key="big/a.bin", Body=data)
    job = start_job("killed", "out/")
    killed_at_checkpoint(monkeypatch, nth)
    remaining_ms = pipeline.settings.deadline_margin_seconds * 1000 + int(PASS_SECONDS * 1000)
    event: dict[str, Any] = {"job": job, "items": listing_items(pipeline.s3), "pass": 1}
    for _ in range(nth - 1):  # the passes before the killed one hand the copy over as usual
        out = copy_batch_pass(event, FakeLambdaContext(remaining_ms))
        event = {**event, "items": out["remaining"], "pass": out["next_pass"], "batch_id": out["batch_id"]}

    with pytest.raises(LambdaKilled):
        copy_batch.handler(json.loads(json.dumps(event)), FakeLambdaContext(remaining_ms))
    sent_before = timed.of("UploadPart", "out/")
    assert sum(sent_before.values()) == nth, "the killed pass had sent its part"
    assert pipeline.s3.list_multipart_uploads(Bucket="dst")["Uploads"], "the killed pass left its upload"

    retried = run_passes_from(event, remaining_ms)

    assert retried[-1]["counts"]["copied"] == 1
    assert timed.of("UploadPart", "out/") == Counter({("out/big/a.bin", n): 1 for n in (1, 2, 3)}), (
        "a part S3 held when the pass was killed was sent again"
    )
    rows = report_rows(pipeline.s3, "killed")
    assert [(r["key"], r["status"]) for r in rows] == [("big/a.bin", "copied")]
    assert pipeline.s3.get_object(Bucket="dst", Key="out/big/a.bin")["Body"].read() == data
    assert pipeline.s3.list_multipart_uploads(Bucket="dst").get("Uploads", []) == []
    assert list(list_marks(pipeline.s3, "dst")) == []
    tally = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).tally("killed").to_dict()
    assert (tally["objects"], tally["copied"], tally["failed"]) == (1, 1, 0)
