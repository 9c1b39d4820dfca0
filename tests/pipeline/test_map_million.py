"""A Map Run of a million items: one job whose CSV manifest lists 1,000,000 objects, through
the whole parent state machine in moto (parent_harness): Prepare reads the manifest through,
the Distributed Map batches the rows with the ItemBatcher settings the pipeline really uses
(max_items_per_batch, max_input_bytes_per_batch) and runs every child with MaxConcurrency at
AWS's cap of 10,000, each child runs the real CopyBatch handler, and Finalize checks the
ledger's counts against the Map Run's, writes the report and reads the ResultWriter's files.

The pipeline is built for jobs of millions of keys; every other scenario runs a few hundred.
This one runs at the number itself and asserts what must hold there: each of the million
items accounted for exactly once (in the ledger's tally, in the per-batch reports, in the
summary), the Map Run's item count equal to the ledger's, every child's batch input within
its byte limit, every state's output and every Lambda's result under Step Functions' 256 KiB,
as many children as the batch arithmetic predicts, and the job SUCCEEDED.

The objects are settled cheaply by a real path: 999,000 rows name `.tmp` files that the job's
`options.exclude` leaves out, so CopyBatch skips each with that reason and no S3 request
(items.plan_item); every 1,000th row is a real small object, copied and verified, so copies
and skips are counted together in every batch. Every tenth batch with copies starts its first
pass too late to make them (LateFirstPasses), so the hand-over path, whose state payloads
are the largest, runs at this size as well.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from parent_harness import MAX_BATCH_BYTES, payload_bytes
from test_parent_workflow import parent  # noqa: F401 - the harness fixture

from conftest import PIPELINE_REPORTS, PIPELINE_TABLE, FakeLambdaContext
from ferry.pipeline.batches import HAND_OVER_FIELD, pass_event
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from ferry.pipeline.settings import STATE_PAYLOAD_LIMIT, WorkerSettings
from handlers import copy_batch

ITEMS = 1_000_000
COPY_EVERY = 1_000  # every 1,000th row is a real object, copied
COPIED = ITEMS // COPY_EVERY
AWS_MAX_CONCURRENCY = 10_000  # Distributed Map: at most 10,000 child executions at once
LATE_EVERY = 10  # every 10th batch with copies hands them over at its first pass (LateFirstPasses)
JOB = "million"
MANIFEST_KEY = "manifests/million.csv"
EXCLUDED_REASON = "excluded by options.include / options.exclude"
# A hung run must not hang the suite; this is no assertion on speed.
TIMEOUT_S = 540  # under the suite's pytest --timeout=600, so a hung run says where it stood


def row_key(index: int) -> str:
    """Every key the same length, so every item is the same number of bytes."""
    return f"in/keep/{index:07d}.txt" if index % COPY_EVERY == 0 else f"in/temp/{index:07d}.tmp"


def row_size(index: int) -> int:
    """Three digits for every row: the copied objects' real sizes, 100 to 999 bytes."""
    return 100 + (index // COPY_EVERY) % 900 if index % COPY_EVERY == 0 else 512


def body_of(index: int) -> bytes:
    return (f"{index:07d}|".encode() * 200)[: row_size(index)]


def manifest() -> bytes:
    """The CSV manifest: a `key,size` header and a million rows."""
    rows = "".join(f"{row_key(i)},{row_size(i)}\n" for i in range(ITEMS))
    return ("key,size\n" + rows).encode()


def report_rows(s3: Any, key: str) -> list[dict[str, Any]]:
    """One batch report's rows (JSON Lines, as JobReports writes it), parsed in one go: a
    million rows read a line at a time would cost the test more than the job."""
    body = s3.get_object(Bucket=PIPELINE_REPORTS, Key=key)["Body"].read().rstrip(b"\n")
    return json.loads(b"[" + body.replace(b"\n", b",") + b"]") if body else []


def predicted_batch(settings: WorkerSettings, batch_input: Any) -> int:
    """Items per child as the ItemBatcher makes them from the pipeline's settings: at most
    max_items_per_batch, and as many equal-sized items as fit in max_input_bytes_per_batch
    (itself at most 256 KiB) of the child's whole input, `{"Items":[...],"BatchInput":...}`."""
    limit = min(settings.max_input_bytes_per_batch, MAX_BATCH_BYTES)
    wrapper = payload_bytes({"Items": [], "BatchInput": batch_input})
    item = payload_bytes({"key": row_key(1), "size": str(row_size(1))})
    assert item == payload_bytes({"key": row_key(0), "size": str(row_size(0))}), "rows of one size"
    by_bytes = (limit - wrapper + 1) // (item + 1)  # n items and n - 1 commas
    return min(settings.max_items_per_batch, by_bytes)


def copies_in(items: list[dict[str, Any]]) -> bool:
    return any(item["key"].startswith("in/keep/") for item in items)


class LateFirstPasses:
    """The CopyBatch function, except that every LATE_EVERY-th first pass with a copy to make
    starts with one second of Lambda time left (under its deadline margin): it settles its
    skipped rows, hands its copies over (FerryHandOver), and ResumeHandOver and a second pass
    finish them. So the hand-over path, whose payloads are the largest (a batch and the error
    beside it), runs at this size too."""

    def __init__(self, handler: Callable[[Any, Any], Any]) -> None:
        self.handler = handler
        self.first_passes = 0
        self.late: list[str] = []  # the first key of each batch whose first pass was late
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        step = pass_event(event)
        if step.get("pass") == 1 and HAND_OVER_FIELD not in event and copies_in(step["items"]):
            with self._lock:
                late = self.first_passes % LATE_EVERY == 0
                self.first_passes += 1
                if late:
                    self.late.append(step["items"][0]["key"])
            if late:
                context = FakeLambdaContext(remaining_ms=1_000)
        return self.handler(event, context)


@pytest.fixture
def parent_at_scale(parent, monkeypatch):  # noqa: F811 - parent is the imported fixture
    """The harness with the pipeline's own batching settings (the shared fixture shrinks
    batches to 40 items) and MaxConcurrency at AWS's cap, in an account whose Lambda quota
    lets Prepare keep it; some first passes late (LateFirstPasses)."""
    env = parent.pipeline.env
    monkeypatch.setenv("FERRY_MAX_ITEMS_PER_BATCH", env["FERRY_MAX_ITEMS_PER_BATCH"])
    monkeypatch.setenv("FERRY_MAX_INPUT_BYTES_PER_BATCH", env["FERRY_MAX_INPUT_BYTES_PER_BATCH"])
    monkeypatch.setenv("FERRY_MAX_CONCURRENCY", str(AWS_MAX_CONCURRENCY))
    parent.pipeline.lambda_quota(2 * AWS_MAX_CONCURRENCY)
    parent.pipeline.services.cache_clear()
    monkeypatch.setitem(parent.harness.lambdas.handlers, "copy-batch", LateFirstPasses(copy_batch.handler))
    return parent


@pytest.mark.slow
def test_a_manifest_of_a_million_rows_is_accounted_for_item_by_item(parent_at_scale) -> None:
    s3 = parent_at_scale.pipeline.s3
    for index in range(0, ITEMS, COPY_EVERY):
        s3.put_object(Bucket="src", Key=row_key(index), Body=body_of(index))
    s3.put_object(Bucket="src", Key=MANIFEST_KEY, Body=manifest())
    spec = {
        "job_id": JOB,
        "source": {
            "bucket": "src",
            "prefix": "in/",
            "manifest": {"bucket": "src", "key": MANIFEST_KEY, "format": "csv"},
        },
        "destination": {"bucket": "dst", "prefix": "out/"},
        "options": {"exclude": ["*.tmp"]},
    }

    described = parent_at_scale.run(spec, "million-job", timeout_s=TIMEOUT_S)

    # Finalize's summary, the execution and the ledger: SUCCEEDED, every item counted once.
    assert described["status"] == "SUCCEEDED", {k: described.get(k) for k in ("status", "error", "cause")}
    output = json.loads(described["output"])
    counts = {k: output[k] for k in ("status", "objects", "copied", "skipped", "failed", "pending")}
    assert counts == {
        "status": "SUCCEEDED",
        "objects": ITEMS,
        "copied": COPIED,
        "skipped": ITEMS - COPIED,
        "failed": 0,
        "pending": 0,
    }
    assert output["copied"] + output["skipped"] + output["failed"] + output["pending"] == ITEMS
    assert output["bytes_copied"] == sum(row_size(i) for i in range(0, ITEMS, COPY_EVERY))
    assert "map_error" not in output and "count_problems" not in output, output
    report = parent_at_scale.report(JOB)
    assert report == {
        k: v for k, v in output.items() if k not in ("report", "failures_report", "report_html")
    }
    ledger = DynamoLedger(parent_at_scale.pipeline.dynamodb, PIPELINE_TABLE)
    tally = ledger.tally(JOB)
    assert tally.items == ITEMS
    assert (tally.counts.copied, tally.counts.skipped, tally.counts.failed, tally.counts.pending) == (
        COPIED,
        ITEMS - COPIED,
        0,
        0,
    )
    job = parent_at_scale.ledger_job(JOB)
    assert (job["status"], job["objects"], job["copied"], job["skipped"]) == (
        "SUCCEEDED",
        ITEMS,
        COPIED,
        ITEMS - COPIED,
    )

    # The per-batch reports name each of the million keys once, with its true outcome.
    seen: Counter[str] = Counter()
    statuses: Counter[tuple[str, str]] = Counter()
    for marker in ledger.batches(JOB):
        for row in report_rows(s3, marker["report_key"]):
            seen[row["key"]] += 1
            statuses[(row["status"], row.get("reason") or "")] += 1
    assert set(seen.values()) == {1}, seen.most_common(3)
    assert seen.keys() == {row_key(i) for i in range(ITEMS)}
    assert statuses == {("copied", ""): COPIED, ("skipped", EXCLUDED_REASON): ITEMS - COPIED}, statuses
    copied = [
        o["Key"]
        for p in s3.get_paginator("list_objects_v2").paginate(Bucket="dst")
        for o in p.get("Contents", [])
    ]
    assert sorted(copied) == sorted(row_key(i).replace("in/", "out/", 1) for i in range(0, ITEMS, COPY_EVERY))
    last = ITEMS - COPY_EVERY
    assert s3.get_object(Bucket="dst", Key=row_key(last).replace("in/", "out/", 1))["Body"].read() == body_of(
        last
    )

    # The Map Run: its children as the batch settings make them, its counts the ledger's.
    [run] = parent_at_scale.harness.map_runs
    assert run.state_name == "CopyCsvManifest"
    batch_input = run.children[0].input["BatchInput"]
    assert batch_input == {"job": {"job_id": JOB, "limits": {"large_object_concurrency": 2}}}
    per_batch = predicted_batch(WorkerSettings.from_environ(), batch_input)
    children = math.ceil(ITEMS / per_batch)
    assert len(run.children) == children
    assert [c.items for c in run.children] == [per_batch] * (children - 1) + [
        ITEMS - per_batch * (children - 1)
    ]
    assert sum(c.items for c in run.children) == ITEMS
    largest_batch = max(payload_bytes(c.input) for c in run.children)
    assert largest_batch <= WorkerSettings.from_environ().max_input_bytes_per_batch <= MAX_BATCH_BYTES
    assert {c.status for c in run.children} == {"SUCCEEDED"}
    assert run.max_concurrency == AWS_MAX_CONCURRENCY
    assert 1 <= run.peak_running <= min(children, AWS_MAX_CONCURRENCY)
    described_run = parent_at_scale.sfn.describe_map_run(mapRunArn=run.map_run_arn)
    assert described_run["itemCounts"]["total"] == ITEMS == tally.items
    assert described_run["executionCounts"]["total"] == children
    assert output["map_run_counts"] == {
        "item_counts_total": ITEMS,
        "execution_counts_total": children,
        "item_counts_read_as": "items",
        "batches_recorded": children,
        "objects_given_to_batches": ITEMS,
    }
    late = parent_at_scale.harness.lambdas.handlers["copy-batch"].late
    assert len(late) == math.ceil(sum(copies_in(c.input["Items"]) for c in run.children) / LATE_EVERY)
    passes = [pass_event(e) for e in parent_at_scale.harness.lambdas.called("copy-batch")]
    assert sum(HAND_OVER_FIELD in p for p in passes) == len(late), "one ResumeHandOver per late pass"
    second = [p for p in passes if p["pass"] == 2]
    assert sorted(
        row_key(int(p["items"][0]["key"][8:15]) // per_batch * per_batch) for p in second
    ) == sorted(late), "each late batch's second pass, and no other"
    assert all(p["items"] and all(i["key"].startswith("in/keep/") for i in p["items"]) for p in second)
    assert len(passes) == children + 2 * len(late)
    assert output["batches"] == children + len(late)  # markers: a first pass per batch, a second per late one
    manifest_doc, records = parent_at_scale.result_files(output["map_run"]["results"])
    assert manifest_doc["MapRunArn"] == run.map_run_arn
    assert set(records) == {"SUCCEEDED"} and len(records["SUCCEEDED"]) == children
    assert sum(len(json.loads(r["Input"])["Items"]) for r in records["SUCCEEDED"]) == ITEMS

    # No state's output and no Lambda's result came near Step Functions' 256 KiB.
    outputs = parent_at_scale.harness.state_outputs
    copy_state = "CopyBatch (CopyCsvManifest)"  # the child's states, named per Map (ferry_cdk.definition)
    assert {"Prepare", "CopyCsvManifest", copy_state, "Finalize"} <= set(outputs), sorted(outputs)
    # Each pass's Lambda result and its state output; a late first pass has only its output,
    # its Catch's: the batch with the FerryHandOver beside it, the largest payload of a job.
    assert outputs[copy_state].count == 2 * children + len(late)
    assert outputs[copy_state].largest > largest_batch
    assert outputs["ResumeHandOver (CopyCsvManifest)"].count == 2 * len(late)
    too_large = {name: o.largest for name, o in outputs.items() if o.largest > STATE_PAYLOAD_LIMIT}
    assert not too_large, too_large
    responses = parent_at_scale.harness.lambdas.largest_response
    assert set(responses) == {"prepare", "copy-batch", "finalize"}
    assert max(responses.values()) <= STATE_PAYLOAD_LIMIT, responses
