"""The pipeline's workers leave no upload mark in a versioned destination's history.

CopyBatch (the Lambda) copies multipart objects over many short deadlines (each pass resumes
the upload from its checkpoint: the mark's version is not known to the pass that ends it and
is asked for), a pass killed hard is retried (the retry finds the upload by its mark, and
learns the mark's version from reading it), Finalize aborts an upload the job gave up on, and
the Fargate task stops at a checkpoint and is run again. After each, the destination bucket's
version listing holds nothing under the marks prefix: no mark's version, no delete marker.
The passes run on test_many_deadlines' virtual clock, on moto.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from conftest import FakeLambdaContext
from ferry.models import DEFAULT_MARKS_PREFIX
from handlers import copy_batch, finalize
from pipeline.test_many_deadlines import (
    PART,
    PASS_SECONDS,
    LambdaKilled,
    killed_at_checkpoint,
    listing_items,
    run_passes,
    run_passes_from,
    start_job,
    timed,
)

__all__ = ["timed"]  # the fixture, used by name


def versioned_destination(s3: Any) -> None:
    s3.put_bucket_versioning(Bucket="dst", VersioningConfiguration={"Status": "Enabled"})


def marks_history(s3: Any) -> list[tuple[str, str]]:
    """Every version and delete marker under the marks prefix of the destination bucket."""
    answer = s3.list_object_versions(Bucket="dst", Prefix=DEFAULT_MARKS_PREFIX)
    return [(v["Key"], "version") for v in answer.get("Versions", [])] + [
        (m["Key"], "delete marker") for m in answer.get("DeleteMarkers", [])
    ]


def short_pass_ms(pipeline: Any) -> int:
    return pipeline.settings.deadline_margin_seconds * 1000 + int(PASS_SECONDS * 1000)


def test_passes_over_many_deadlines_leave_no_mark(pipeline, timed) -> None:
    versioned_destination(pipeline.s3)
    data = {f"big/{n}.bin": os.urandom(2 * PART + n) for n in range(2)}
    for key, body in data.items():
        pipeline.s3.put_object(Bucket="src", Key=key, Body=body)

    passes = run_passes(start_job("cut", "out/"), listing_items(pipeline.s3), short_pass_ms(pipeline))

    assert len(passes) > 2, "the deadlines did not cut the copies"
    assert passes[-1]["counts"]["copied"] == 2
    for key, body in data.items():
        assert pipeline.s3.get_object(Bucket="dst", Key=f"out/{key}")["Body"].read() == body
    assert marks_history(pipeline.s3) == []


@pytest.mark.parametrize("nth", [1, 2], ids=["resumed-by-its-mark", "resumed-from-a-checkpoint"])
def test_a_pass_killed_hard_and_retried_leaves_no_mark(pipeline, timed, monkeypatch, nth) -> None:
    versioned_destination(pipeline.s3)
    data = os.urandom(3 * PART)
    pipeline.s3.put_object(Bucket="src", Key="big/a.bin", Body=data)
    job = start_job("killed", "out/")
    killed_at_checkpoint(monkeypatch, nth)
    event: dict[str, Any] = {"job": job, "items": listing_items(pipeline.s3), "pass": 1}
    for _ in range(nth - 1):
        from conftest import copy_batch_pass

        out = copy_batch_pass(event, FakeLambdaContext(short_pass_ms(pipeline)))
        event = {**event, "items": out["remaining"], "pass": out["next_pass"], "batch_id": out["batch_id"]}
    with pytest.raises(LambdaKilled):
        copy_batch.handler(json.loads(json.dumps(event)), FakeLambdaContext(short_pass_ms(pipeline)))
    assert marks_history(pipeline.s3), "the killed pass left its mark"

    retried = run_passes_from(event, short_pass_ms(pipeline))

    assert retried[-1]["counts"]["copied"] == 1
    assert pipeline.s3.get_object(Bucket="dst", Key="out/big/a.bin")["Body"].read() == data
    assert marks_history(pipeline.s3) == []


def test_finalize_aborting_an_upload_the_job_gave_up_on_leaves_no_mark(pipeline, timed, monkeypatch) -> None:
    versioned_destination(pipeline.s3)
    monkeypatch.setenv("FERRY_MAX_PASSES", "2")
    pipeline.services.cache_clear()
    pipeline.s3.put_object(Bucket="src", Key="big/a.bin", Body=os.urandom(3 * PART))
    job = start_job("gave-up", "out/")
    run_passes(job, listing_items(pipeline.s3), short_pass_ms(pipeline))
    assert marks_history(pipeline.s3), "the upload given up on is still marked"

    summary = finalize.handler({"job": job, "map": {}}, FakeLambdaContext())

    assert summary["abandoned_uploads_aborted"] == 1
    assert pipeline.s3.list_multipart_uploads(Bucket="dst").get("Uploads", []) == []
    assert marks_history(pipeline.s3) == []


def test_the_fargate_task_stopped_and_run_again_leaves_no_mark(pipeline, timed, monkeypatch) -> None:
    import ferry.pipeline.batches as batches
    from handlers import copy_large

    versioned_destination(pipeline.s3)
    data = os.urandom(3 * PART + 5)
    pipeline.s3.put_object(Bucket="src", Key="big/a.bin", Body=data)
    job = start_job("fargate", "out/")
    monkeypatch.setenv("FERRY_JOB_ID", job["job_id"])
    monkeypatch.setenv("FERRY_BATCH_ID", "batch-1")
    monkeypatch.setenv("FERRY_ITEM", json.dumps({"Key": "big/a.bin", "Size": len(data)}))
    real = batches.copy_large_object
    monkeypatch.setattr(
        copy_large,
        "copy_large_object",
        lambda *a, **k: real(*a, **{**k, "keep_going": lambda: False, "pass_seconds": PASS_SECONDS}),
    )
    assert copy_large.main() == copy_large.EXIT_STOPPED
    assert marks_history(pipeline.s3), "the stopped task's upload is marked"

    monkeypatch.setattr(copy_large, "copy_large_object", real)
    assert copy_large.main() == copy_large.EXIT_OK

    assert pipeline.s3.get_object(Bucket="dst", Key="out/big/a.bin")["Body"].read() == data
    assert marks_history(pipeline.s3) == []


def test_a_destination_locking_new_versions_gets_no_mark_and_the_worker_says_so(
    pipeline, timed, caplog
) -> None:
    """Where Object Lock's default retention would keep a mark until it ends, the workers write
    none (a crashed copy there starts again), and say so once in their log."""
    pipeline.s3.delete_bucket(Bucket="dst")
    pipeline.s3.create_bucket(Bucket="dst", ObjectLockEnabledForBucket=True)
    pipeline.s3.put_object_lock_configuration(
        Bucket="dst",
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 30}},
        },
    )
    data = {f"big/{n}.bin": os.urandom(2 * PART + n) for n in range(2)}
    for key, body in data.items():
        pipeline.s3.put_object(Bucket="src", Key=key, Body=body)

    with caplog.at_level("WARNING", logger="ferry.engine.records.upload_marks"):
        passes = run_passes(start_job("locked", "out/"), listing_items(pipeline.s3), short_pass_ms(pipeline))

    assert passes[-1]["counts"]["copied"] == 2
    for key, body in data.items():
        assert pipeline.s3.get_object(Bucket="dst", Key=f"out/{key}")["Body"].read() == body
    assert marks_history(pipeline.s3) == []
    said = [r.getMessage() for r in caplog.records if "Object Lock" in r.getMessage()]
    assert said and all(
        m.startswith("s3://dst keeps every new version under Object Lock (COMPLIANCE, 30 days)") for m in said
    )
