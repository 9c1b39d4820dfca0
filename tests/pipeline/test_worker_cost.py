"""What a batch costs to orchestrate (issue 14, "cost of the pipeline per million small
objects"): batches filled by bytes, not cut at a fixed count; a first pass that takes the
Distributed Map's input as it comes (no Pass state); a worker process that keeps its S3
clients and the job's spec from pass to pass; report lines that cost little CPU."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from conftest import PIPELINE_TABLE, FakeLambdaContext
from ferry.models import CopyResult, Status
from ferry.pipeline import batches, recording, services
from ferry.pipeline.batches import pass_event
from ferry.pipeline.item_reader import MAX_BATCH_BYTES
from ferry.pipeline.item_reader import batches as item_batches
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from ferry.pipeline.settings import MAX_BATCH_INPUT_BYTES, PipelineSettings
from handlers import copy_batch, prepare, record_failure


def default(name: str) -> Any:
    return next(f.default for f in fields(PipelineSettings) if f.name == name)


def listing_item(n: int) -> dict[str, Any]:
    """An item as the listObjectsV2 ItemReader gives it, with a 60-character key."""
    key = f"photos/2026/11/23/camera-{n:07d}/" + "x" * 23 + ".jpg"
    assert len(key) == 60
    return {
        "Etag": '"0123456789abcdef0123456789abcdef"',
        "Key": key,
        "LastModified": 1795398272,
        "Size": 500_000,
        "StorageClass": "STANDARD",
    }


def size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def test_default_batches_are_filled_by_bytes_up_to_the_payload_cap_not_cut_at_a_count() -> None:
    """Step Functions bills per state transition, so per batch: at the defaults a batch of
    small objects holds as many items as the payload cap allows (the 256 KiB state limit less
    room for a failed pass's error), whatever their number."""
    assert default("max_input_bytes_per_batch") == MAX_BATCH_INPUT_BYTES <= MAX_BATCH_BYTES
    batch_input = {"job": {"job_id": "j" * 80, "limits": {"large_object_concurrency": 2}}}
    items = [listing_item(n) for n in range(3_000)]

    chunks = list(
        item_batches(
            items,
            max_items=default("max_items_per_batch"),
            max_bytes=default("max_input_bytes_per_batch"),
            batch_input=batch_input,
        )
    )

    assert sum(len(c) for c in chunks) == len(items)
    per_item = size(items[0]) + 1
    for chunk in chunks[:-1]:
        used = size({"Items": chunk, "BatchInput": batch_input})
        assert MAX_BATCH_INPUT_BYTES - per_item < used <= MAX_BATCH_INPUT_BYTES, (len(chunk), used)
    assert len(chunks[0]) > 700, len(chunks[0])


def test_a_first_pass_takes_the_maps_input_as_it_comes() -> None:
    job = {"job_id": "j", "limits": {}}
    items = [{"Key": "a"}, {"Key": "b"}]

    assert pass_event({"Items": items, "BatchInput": {"job": job}}) == {"job": job, "items": items, "pass": 1}
    # The Catch of a failed first pass adds $.error to the Map's input: kept for record_failure.
    error = {"Error": "RuntimeError", "Cause": "boom"}
    caught = pass_event({"Items": items, "BatchInput": {"job": job}, "error": error})
    assert caught == {"job": job, "items": items, "pass": 1, "error": error}
    later = {"job": job, "items": items[1:], "pass": 2, "batch_id": "b", "counts": {"objects": 1}}
    assert pass_event(later) == later


def test_a_batch_in_the_maps_shape_is_copied_and_a_failed_one_recorded(pipeline) -> None:
    for n in range(5):
        pipeline.s3.put_object(Bucket="src", Key=f"m/{n}", Body=b"m" * (n + 1))
    job = prepare.handler(
        {
            "spec": {"source": {"bucket": "src", "prefix": "m/"}, "destination": {"bucket": "dst"}},
            "execution_name": "m",
        },
        FakeLambdaContext(),
    )
    listed = pipeline.s3.list_objects_v2(Bucket="src", Prefix="m/")["Contents"]
    items = [{"Key": o["Key"], "Size": o["Size"], "Etag": o["ETag"]} for o in listed]
    map_input = {"Items": items, "BatchInput": {"job": {"job_id": job["job_id"], "limits": {}}}}

    result = copy_batch.handler(map_input, FakeLambdaContext())

    assert result["counts"]["copied"] == 5 and result["pass"] == 1, result
    assert result["batch_id"] == recording.batch_id_for("m", items)
    # The same batch failing for good in pass 1: the Catch hands RecordFailedBatch the Map's
    # input plus $.error; the pass was recorded already, so nothing is counted twice.
    failed = record_failure.handler({**map_input, "error": {"Error": "E", "Cause": "c"}}, FakeLambdaContext())
    assert failed["counts"]["objects"] == 5 and failed["counts"]["failed"] == 0, failed
    tally = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).tally("m").to_dict()
    assert (tally["objects"], tally["copied"], tally["batches"]) == (5, 5, 1), tally


def test_a_worker_keeps_its_s3_clients_and_the_jobs_spec_from_pass_to_pass(pipeline, monkeypatch) -> None:
    """A Lambda container runs pass after pass: it makes its S3 clients once (a botocore
    session each, an eighth of a pass's CPU at 1,000 objects) and reads the job once."""
    from ferry.engine.strategies import copier as engine_copier
    from ferry.pipeline.ledger.dynamodb import DynamoLedger as Ledger

    for n in range(6):
        pipeline.s3.put_object(Bucket="src", Key=f"k/{n}", Body=b"k")
    job = prepare.handler(
        {
            "spec": {"source": {"bucket": "src", "prefix": "k/"}, "destination": {"bucket": "dst"}},
            "execution_name": "k",
        },
        FakeLambdaContext(),
    )
    made: list[Any] = []
    for module in (engine_copier, batches, services):
        original = module.make_client
        monkeypatch.setattr(module, "make_client", lambda *a, _o=original, **k: made.append(a) or _o(*a, **k))
    reads: list[str] = []
    original_job = Ledger.job
    monkeypatch.setattr(
        Ledger, "job", lambda self, job_id: reads.append(job_id) or original_job(self, job_id)
    )
    listed = pipeline.s3.list_objects_v2(Bucket="src", Prefix="k/")["Contents"]
    items = [{"Key": o["Key"], "Size": o["Size"], "Etag": o["ETag"]} for o in listed]

    for chunk in (items[:3], items[3:]):
        event = {"Items": chunk, "BatchInput": {"job": {"job_id": job["job_id"], "limits": {}}}}
        assert copy_batch.handler(event, FakeLambdaContext())["counts"]["copied"] == 3

    assert len(made) == 1, made  # one endpoint (the workers' own identity) reads and writes
    assert reads == ["k"], reads
    keys = {o["Key"] for o in pipeline.s3.list_objects_v2(Bucket="dst")["Contents"]}
    assert keys == {str(n) for n in range(6)}  # the source prefix is not kept


def test_a_report_line_holds_every_set_field_and_nothing_else() -> None:
    full = CopyResult(
        source_key="a",
        dest_key="b",
        status=Status.COPIED,
        reason="r",
        strategy="server-side",
        bytes=5,
        seconds=0.5,
        checksum="c",
        verified_by="v",
        version_id="1",
        note="n",
        parts_resumed=2,
        source_bucket="s",
        dest_bucket="d",
        handed_over=True,
    )
    assert full.to_dict() == {
        "key": "a",
        "dest_key": "b",
        "status": "copied",
        "reason": "r",
        "strategy": "server-side",
        "bytes": 5,
        "seconds": 0.5,
        "checksum": "c",
        "verified_by": "v",
        "version_id": "1",
        "note": "n",
        "parts_resumed": 2,
        "source_bucket": "s",
        "dest_bucket": "d",
        "handed_over": True,
    }
    bare = CopyResult(source_key="a", dest_key="b", status=Status.SKIPPED)
    assert bare.to_dict() == {"key": "a", "dest_key": "b", "status": "skipped", "bytes": 0}
