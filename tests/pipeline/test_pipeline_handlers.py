"""The Lambda handlers and the Fargate entry point, called as AWS calls them, on moto S3 and
DynamoDB: a job is accepted or refused before any fan-out; every object listed ends in the
ledger's counts exactly once, also when batches run concurrently or are retried; failures
are kept one per object with their reason; the report and the status say what happened."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from conftest import PIPELINE_REPORTS, PIPELINE_TABLE, FakeLambdaContext, copy_batch_pass
from ferry.pipeline.batches import FerryHandOver, job_copier
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from handlers import copy_batch, finalize, prepare, record_failure


def start_job(spec: dict[str, Any], name: str = "exec-1") -> dict[str, Any]:
    event = {"spec": spec, "execution_name": name, "execution_arn": f"arn:aws:states:::execution:x:{name}"}
    return prepare.handler(event, FakeLambdaContext())


def listing_items(s3: Any, bucket: str, prefix: str = "") -> list[dict[str, Any]]:
    """Items as the Distributed Map's listObjectsV2 reader gives them."""
    response = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return [
        {
            "Key": o["Key"],
            "Size": o["Size"],
            "ETag": o["ETag"],
            "StorageClass": o.get("StorageClass", "STANDARD"),
        }
        for o in response.get("Contents", [])
    ]


def job_item(pipeline: Any, job_id: str) -> dict[str, Any]:
    """The job's record with its counts as they stand: the sum of its recorded markers."""
    ledger = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE)
    job = ledger.job(job_id)
    assert job is not None
    return {**job, **ledger.tally(job_id).to_dict()}


def fill(s3: Any, count: int, prefix: str = "data/") -> None:
    for n in range(count):
        s3.put_object(Bucket="src", Key=f"{prefix}{n:03}.txt", Body=f"object {n}".encode() * (n + 1))


SPEC = {"source": {"bucket": "src", "prefix": "data"}, "destination": {"bucket": "dst", "prefix": "copy"}}


def test_prepare_accepts_a_job_and_passes_the_configured_limits_to_the_map(pipeline) -> None:
    fill(pipeline.s3, 1)  # a source with nothing under its prefix is refused
    job = start_job(SPEC)

    assert job["job_id"] == "exec-1"
    assert job["reader"] == "listing"
    assert job["listing"] == {"bucket": "src", "prefix": "data/"}
    settings = pipeline.settings
    assert job["limits"] == {
        "max_items_per_batch": settings.max_items_per_batch,
        "max_input_bytes_per_batch": settings.max_input_bytes_per_batch,
        "max_concurrency": settings.max_concurrency,
        "tolerated_failure_percentage": settings.tolerated_failure_percentage,
        "large_object_concurrency": settings.fargate_max_concurrency,
    }
    record = job_item(pipeline, "exec-1")
    assert record["status"] == "RUNNING"
    assert record["spec"]["destination"] == {"bucket": "dst", "prefix": "copy/"}
    assert pipeline.s3.list_multipart_uploads(Bucket="dst").get("Uploads", []) == []  # the write probe


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({**SPEC, "options": {"mode": "fast"}}, "options.mode: 'fast' is not one of"),
        ({**SPEC, "options": {"part_size": "1MiB"}}, "options.part_size:"),
        ({**SPEC, "options": {"colour": "red"}}, "options.colour: unknown option"),
        (
            {**SPEC, "destination": {"bucket": "Not_A_Bucket"}},
            "destination.bucket: 'Not_A_Bucket' is not a valid",
        ),
        (
            {
                "source": {"manifest": {"bucket": "src", "key": "m.csv", "format": "xml"}},
                "destination": {"bucket": "dst"},
            },
            "source.manifest.format: 'xml' is not one of csv, jsonl, inventory",
        ),
        ({**SPEC, "job_id": "no spaces please"}, "job_id:"),
        ({"source": {"bucket": "src"}}, "destination: missing"),
        ({**SPEC, "source": {"bucket": "missing-bucket"}}, "source: cannot list s3://missing-bucket/"),
        (
            {**SPEC, "source": {"bucket": "src", "prefix": "dat"}},
            "source: nothing matched s3://src/dat/: no object under it; did you mean s3://src/data/?",
        ),
        ({**SPEC, "destination": {"bucket": "missing-dest"}}, "destination: cannot write s3://missing-dest/"),
        (
            {
                "source": {"manifest": {"bucket": "src", "key": "none.csv", "format": "csv"}},
                "destination": {"bucket": "dst"},
            },
            "source.manifest: s3://src/none.csv does not exist",
        ),
    ],
)
def test_prepare_refuses_a_wrong_job_naming_the_field_before_any_record(pipeline, spec, named) -> None:
    fill(pipeline.s3, 1)  # a source with nothing under its prefix is refused
    result = start_job(spec)

    assert set(result) == {"rejected"}
    assert result["rejected"].startswith(named.split(":")[0]), result["rejected"]
    assert named in result["rejected"]
    assert "Traceback" not in result["rejected"]
    assert DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).job("exec-1") is None


def test_prepare_refuses_a_job_id_used_before(pipeline) -> None:
    fill(pipeline.s3, 1)  # a source with nothing under its prefix is refused
    start_job({**SPEC, "job_id": "nightly"})
    again = start_job({**SPEC, "job_id": "nightly"}, name="exec-2")
    assert "job_id: a job 'nightly' already exists" in again["rejected"]


def test_a_retried_prepare_of_the_same_execution_gives_the_same_job_not_a_rejection(pipeline) -> None:
    """Step Functions retries Prepare after a Lambda service error, which may come after the
    function ran and recorded the job: the retry is the same execution, so the job is its own."""
    fill(pipeline.s3, 1)  # a source with nothing under its prefix is refused
    first = start_job({**SPEC, "job_id": "nightly"})
    retried = start_job({**SPEC, "job_id": "nightly"})
    assert "rejected" not in retried, retried
    assert retried == first
    assert DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).job("nightly")["status"] == "RUNNING"


def test_prepare_refuses_an_inventory_that_is_not_csv(pipeline) -> None:
    manifest = {"sourceBucket": "src", "fileFormat": "Parquet", "fileSchema": "message s3.inventory {...}"}
    pipeline.s3.put_object(Bucket="src", Key="inv/manifest.json", Body=json.dumps(manifest).encode())
    spec = {
        "source": {"manifest": {"bucket": "src", "key": "inv/manifest.json", "format": "inventory"}},
        "destination": {"bucket": "dst"},
    }
    assert "Step Functions reads CSV inventories only" in start_job(spec)["rejected"]


def test_a_batch_copies_reports_and_counts_every_item_once_even_when_retried(pipeline) -> None:
    fill(pipeline.s3, 12)
    job = start_job({**SPEC, "options": {"exclude": ["*5.txt"]}})
    items = listing_items(pipeline.s3, "src", "data/") + [
        {"Key": "data/vanished.txt", "Size": 3, "ETag": '"x"'}
    ]
    event = {"job": job, "items": items, "pass": 1}

    first = copy_batch.handler(json.loads(json.dumps(event)), FakeLambdaContext())
    retry = copy_batch.handler(json.loads(json.dumps(event)), FakeLambdaContext())

    assert first["counts"] == {
        "objects": 13,
        "copied": 11,
        "skipped": 1,
        "failed": 1,
        "pending": 0,
        "bytes_copied": first["counts"]["bytes_copied"],
    }
    assert retry["counts"] == first["counts"]  # the retry's own outcome (all skipped) does not count
    assert first["remaining"] == [] and first["large"] == []
    record = job_item(pipeline, "exec-1")
    assert (record["objects"], record["copied"], record["skipped"], record["failed"]) == (13, 11, 1, 1)
    assert record["batches"] == 1
    copied = {o["Key"] for o in pipeline.s3.list_objects_v2(Bucket="dst")["Contents"]}
    assert copied == {f"copy/{n:03}.txt" for n in range(12) if n != 5}

    reports = pipeline.s3.list_objects_v2(Bucket=PIPELINE_REPORTS, Prefix="jobs/exec-1/objects/")["Contents"]
    assert len(reports) == 1, "the losing attempt's report is removed: one report per recorded batch"
    lines = (
        pipeline.s3.get_object(Bucket=PIPELINE_REPORTS, Key=reports[0]["Key"])["Body"]
        .read()
        .decode()
        .splitlines()
    )
    statuses = sorted(json.loads(line)["status"] for line in lines)
    assert statuses == ["copied"] * 11 + ["failed", "skipped"]

    failures = list(DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).failures("exec-1"))
    assert [(f.key, f.dest_key) for f in failures] == [("data/vanished.txt", "copy/vanished.txt")]
    assert "NoSuchKey" in failures[0].reason or "no longer exists" in failures[0].reason


def test_counters_add_up_across_concurrent_and_retried_batches(pipeline) -> None:
    fill(pipeline.s3, 40)
    job = start_job(SPEC)
    items = listing_items(pipeline.s3, "src", "data/")
    batches = [items[i : i + 7] for i in range(0, len(items), 7)]
    events = [{"job": job, "items": b, "pass": 1} for b in batches] * 2  # every batch twice, at once
    outputs: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def run(event: dict[str, Any]) -> None:
        try:
            outputs.append(copy_batch.handler(json.loads(json.dumps(event)), FakeLambdaContext()))
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(e,)) for e in events]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    record = job_item(pipeline, "exec-1")
    assert record["objects"] == 40
    assert record["copied"] + record["skipped"] == 40
    assert record["failed"] == record["pending"] == 0
    # Which attempt won a batch decides copied or skipped; either way each object counts once.
    assert len(pipeline.s3.list_objects_v2(Bucket="dst")["Contents"]) == 40
    assert record["batches"] == len(batches)
    assert len({o["batch_id"] for o in outputs}) == len(batches)


def test_objects_above_the_lambda_threshold_are_handed_to_fargate_uncounted(pipeline) -> None:
    fill(pipeline.s3, 3)
    job = start_job(SPEC)
    items = listing_items(pipeline.s3, "src", "data/")
    items.append({"Key": "data/huge.bin", "Size": 100 * 1024 * 1024 * 1024, "ETag": '"abc-9"'})

    with pytest.raises(FerryHandOver):  # the large object goes to Fargate: not the child's end
        copy_batch.handler({"job": job, "items": items, "pass": 1}, FakeLambdaContext())
    out = copy_batch_pass({"job": job, "items": items, "pass": 1}, FakeLambdaContext())

    assert out["large"] == [items[-1]]
    assert out["counts"]["objects"] == 3
    assert job_item(pipeline, "exec-1")["objects"] == 3


def test_a_failed_batch_is_recorded_as_failed_unless_it_was_already_counted(pipeline) -> None:
    fill(pipeline.s3, 4)
    job = start_job(SPEC)
    items = listing_items(pipeline.s3, "src", "data/")
    error = {
        "Error": "Lambda.Unknown",
        "Cause": json.dumps({"errorMessage": "Task timed out after 900 seconds"}),
    }

    out = record_failure.handler(
        {"job": job, "items": items[:2], "pass": 1, "error": error}, FakeLambdaContext()
    )
    assert out["counts"]["failed"] == 2
    assert out["remaining"] == []
    failures = sorted(f.key for f in DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).failures("exec-1"))
    assert failures == ["data/000.txt", "data/001.txt"]
    reasons = {f.reason for f in DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).failures("exec-1")}
    assert reasons == {"batch failed after retries: Lambda.Unknown: Task timed out after 900 seconds"}

    done = copy_batch.handler({"job": job, "items": items[2:], "pass": 1}, FakeLambdaContext())
    late = record_failure.handler(
        {"job": job, "items": items[2:], "pass": 1, "batch_id": done["batch_id"], "error": error},
        FakeLambdaContext(),
    )
    assert late["counts"]["copied"] == 2 and late["counts"]["failed"] == 0
    record = job_item(pipeline, "exec-1")
    assert (record["objects"], record["copied"], record["failed"]) == (4, 2, 2)


def test_finalize_reports_success(pipeline) -> None:
    fill(pipeline.s3, 3)
    job = start_job(SPEC)
    copy_batch.handler(
        {"job": job, "items": listing_items(pipeline.s3, "src", "data/"), "pass": 1}, FakeLambdaContext()
    )

    summary = finalize.handler({"job": job, "map": {"map_run_arn": "arn:x"}}, FakeLambdaContext())

    assert summary["status"] == "SUCCEEDED"
    assert (summary["objects"], summary["copied"], summary["failed"]) == (3, 3, 0)
    assert "cause" not in summary
    stored = json.loads(
        pipeline.s3.get_object(Bucket=PIPELINE_REPORTS, Key="jobs/exec-1/summary.json")["Body"].read()
    )
    assert stored["status"] == "SUCCEEDED" and stored["copied"] == 3
    assert (
        pipeline.s3.get_object(Bucket=PIPELINE_REPORTS, Key="jobs/exec-1/failures.jsonl")["Body"].read()
        == b""
    )
    assert job_item(pipeline, "exec-1")["status"] == "SUCCEEDED"


def test_finalize_reports_partial_with_the_failures_and_where_they_are(pipeline) -> None:
    fill(pipeline.s3, 3)
    job = start_job(SPEC)
    items = listing_items(pipeline.s3, "src", "data/") + [{"Key": "data/gone.txt", "Size": 1}]
    copy_batch.handler({"job": job, "items": items, "pass": 1}, FakeLambdaContext())

    summary = finalize.handler({"job": job, "map": {}}, FakeLambdaContext())

    assert summary["status"] == "PARTIAL"
    assert summary["cause"].startswith("1 of 4 objects failed, 0 pending")
    assert f"s3://{PIPELINE_REPORTS}/jobs/exec-1/failures.jsonl" in summary["cause"]
    lines = (
        pipeline.s3.get_object(Bucket=PIPELINE_REPORTS, Key="jobs/exec-1/failures.jsonl")["Body"]
        .read()
        .decode()
        .splitlines()
    )
    assert [json.loads(line)["key"] for line in lines] == ["data/gone.txt"]
    assert json.loads(lines[0])["reason"]
    assert job_item(pipeline, "exec-1")["status"] == "PARTIAL"


def test_finalize_after_the_map_failed_says_failed(pipeline) -> None:
    fill(pipeline.s3, 1)  # a source with nothing under its prefix is refused
    job = start_job(SPEC)
    summary = finalize.handler(
        {"job": job, "map_error": {"Error": "States.ExceedToleratedFailureThreshold", "Cause": "too many"}},
        FakeLambdaContext(),
    )
    assert summary["status"] == "FAILED"
    assert "the Distributed Map stopped: States.ExceedToleratedFailureThreshold" in summary["cause"]


def test_manifest_rows_of_each_format_map_to_keys(pipeline) -> None:
    pipeline.s3.put_object(Bucket="src", Key="a b+c.txt", Body=b"1")
    pipeline.s3.put_object(Bucket="src", Key="plain.txt", Body=b"22")
    pipeline.s3.put_object(Bucket="src", Key="m.csv", Body=b"key\nplain.txt\n")
    job = start_job(
        {
            "source": {"bucket": "src", "manifest": {"bucket": "src", "key": "m.csv", "format": "csv"}},
            "destination": {"bucket": "dst", "prefix": "x"},
        }
    )
    assert job["reader"] == "csv"
    out = copy_batch.handler({"job": job, "items": [{"key": "plain.txt"}], "pass": 1}, FakeLambdaContext())
    assert out["counts"]["copied"] == 1
    assert pipeline.s3.get_object(Bucket="dst", Key="x/plain.txt")["Body"].read() == b"22"

    manifest = {
        "sourceBucket": "src",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size",
    }
    pipeline.s3.put_object(Bucket="src", Key="inv/manifest.json", Body=json.dumps(manifest).encode())
    inv = start_job(
        {
            "source": {"manifest": {"bucket": "src", "key": "inv/manifest.json", "format": "inventory"}},
            "destination": {"bucket": "dst", "prefix": "inv"},
        },
        name="exec-2",
    )
    rows = [
        {"Bucket": "src", "Key": "a+b%2Bc.txt", "IsLatest": "true", "IsDeleteMarker": "false", "Size": "1"},
        {"Bucket": "src", "Key": "plain.txt", "IsLatest": "true", "IsDeleteMarker": "true", "Size": ""},
    ]
    out = copy_batch.handler({"job": inv, "items": rows, "pass": 1}, FakeLambdaContext())
    assert (out["counts"]["copied"], out["counts"]["skipped"]) == (1, 1)
    assert pipeline.s3.get_object(Bucket="dst", Key="inv/a b+c.txt")["Body"].read() == b"1"


def test_failures_of_a_recorded_batch_are_kept_even_if_the_worker_died_before_writing_them(pipeline) -> None:
    """A crash between counting a batch and writing its failure items: the next attempt (whose
    own results do not count) writes the recorded attempt's failures from its report."""
    from ferry.models import CopyResult, Status
    from ferry.pipeline.batches import record
    from ferry.pipeline.ledger.contract import BatchCounts

    fill(pipeline.s3, 1)  # a source with nothing under its prefix is refused
    job = start_job(SPEC)
    services = pipeline.services()
    failed = CopyResult(
        "data/a", "copy/a", Status.FAILED, reason="AccessDenied", source_bucket="src", dest_bucket="dst"
    )
    copied = CopyResult("data/b", "copy/b", Status.COPIED, bytes=3, source_bucket="src", dest_bucket="dst")
    report_key = services.reports.put_batch("exec-1", "b1-p1", "first", [failed, copied])
    services.ledger.record_batch(
        "exec-1", "b1-p1", BatchCounts.of([failed, copied]), attempt="first", report_key=report_key
    )
    assert list(services.ledger.failures("exec-1")) == []  # the crash: counted, failures not yet written

    retry = CopyResult("data/a", "copy/a", Status.COPIED, bytes=3, source_bucket="src", dest_bucket="dst")
    recorded = record(services, "exec-1", "b1-p1", [retry, copied])

    assert not recorded.first and recorded.counts.failed == 1
    failures = list(services.ledger.failures("exec-1"))
    assert [(f.key, f.reason) for f in failures] == [("data/a", "AccessDenied")]
    assert services.ledger.batch("exec-1", "b1-p1")["failures_recorded"] is True
    record_ = job_item(pipeline, "exec-1")
    assert (record_["objects"], record_["failed"], record_["copied"]) == (2, 1, 1)
    assert job["job_id"] == "exec-1"


def test_fargate_worker_copies_one_large_object_and_records_it_once(pipeline, monkeypatch) -> None:
    """The Fargate entry point: the object comes in the environment; a stop request before the
    end exits 75 (the retry resumes); the finished copy is counted once."""
    from handlers import copy_large

    data = b"L" * (6 * 1024 * 1024)
    pipeline.s3.put_object(Bucket="src", Key="data/large.bin", Body=data)
    job = start_job(SPEC)
    item = {"Key": "data/large.bin", "Size": len(data)}
    monkeypatch.setenv("FERRY_JOB_ID", job["job_id"])
    monkeypatch.setenv("FERRY_BATCH_ID", "batch-1")
    monkeypatch.setenv("FERRY_ITEM", json.dumps(item))

    import ferry.pipeline.batches as batches

    real = batches.copy_large_object
    monkeypatch.setattr(
        copy_large,
        "copy_large_object",
        lambda *a, **k: real(*a, **{**k, "keep_going": lambda: False, "pass_seconds": -1}),
    )
    assert copy_large.main() == copy_large.EXIT_STOPPED
    assert job_item(pipeline, "exec-1")["objects"] == 0, "a stopped task records nothing"

    monkeypatch.setattr(copy_large, "copy_large_object", real)
    assert copy_large.main() == copy_large.EXIT_OK
    assert copy_large.main() == copy_large.EXIT_OK  # a retried task after success: counted once
    record_ = job_item(pipeline, "exec-1")
    assert (record_["objects"], record_["copied"]) == (1, 1)
    assert pipeline.s3.get_object(Bucket="dst", Key="copy/large.bin")["Body"].read() == data


def test_the_pass_at_max_passes_hands_what_it_could_not_finish_to_fargate(pipeline, monkeypatch) -> None:
    """The batch's last Lambda pass does not fail what it could not finish, nor send it round
    again: it hands it to the Fargate task (no time limit), which copies it. A pass past the
    bound (max_passes lowered while the batch ran) does the same."""
    from handlers import copy_large

    fill(pipeline.s3, 2)
    job = start_job(SPEC)
    items = listing_items(pipeline.s3, "src", "data/")
    max_passes = pipeline.settings.max_passes
    context = FakeLambdaContext(remaining_ms=0)  # the deadline has passed: nothing starts

    early = copy_batch_pass({"job": job, "items": items, "pass": 1}, context)
    last = copy_batch_pass(
        {"job": job, "items": items, "pass": max_passes, "batch_id": early["batch_id"]}, context
    )
    past = copy_batch_pass({"job": job, "items": items, "pass": max_passes + 3, "batch_id": "b2"}, context)

    assert early["remaining"] == items and early["large"] == [] and early["counts"]["objects"] == 0
    assert last["remaining"] == [] and last["large"] == items and last["counts"]["objects"] == 0
    assert past["remaining"] == [] and past["large"] == items
    assert list(DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).failures("exec-1")) == []
    monkeypatch.setenv("FERRY_ITEM", json.dumps(items[0]))
    monkeypatch.setenv("FERRY_JOB_ID", "exec-1")
    monkeypatch.setenv("FERRY_BATCH_ID", last["batch_id"])
    assert copy_large.main() == copy_large.EXIT_OK
    record_ = job_item(pipeline, "exec-1")
    assert (record_["objects"], record_["copied"], record_["failed"]) == (1, 1, 0)


def test_concurrent_batches_count_every_object_when_dynamodb_transactions_conflict(
    pipeline, dynamodb_transaction_conflicts
) -> None:
    """Issue 10, defect 1: every batch used to add its counts to the one job item in a
    transaction; concurrent transactions on that item are cancelled (TransactionConflict),
    and the Catch then records copied objects as failed. Batches must not contend."""
    conflicts = dynamodb_transaction_conflicts
    fill(pipeline.s3, 60)
    job = start_job(SPEC)
    items = listing_items(pipeline.s3, "src", "data/")
    batches = [items[i : i + 5] for i in range(0, len(items), 5)]
    errors: list[BaseException] = []

    def run(batch: list[dict[str, Any]]) -> None:
        try:
            copy_batch.handler({"job": job, "items": batch, "pass": 1}, FakeLambdaContext())
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == [], f"{len(errors)} batches failed: {errors[:1]} ({len(conflicts)} conflicts)"
    record = job_item(pipeline, "exec-1")
    assert (record["objects"], record["copied"], record["failed"], record["batches"]) == (60, 60, 0, 12)


def test_a_retried_pass_returns_the_hand_over_of_the_attempt_that_was_recorded(pipeline) -> None:
    """Issue 10, defect 6: a retry of a pass that was already recorded returned the recorded
    counts but its OWN remaining/large lists: objects the recorded attempt handed over were
    lost (or ones it settled were copied and counted again)."""
    fill(pipeline.s3, 6)
    job = start_job(SPEC)
    event = {"job": job, "items": listing_items(pipeline.s3, "src", "data/"), "pass": 1}

    # Attempt 1 starts with less time than the deadline margin: it copies nothing and hands
    # every object over; it is recorded, then (say) its response is lost and the pass retried.
    # The retry has all the time it needs and settles every object itself, yet the pass is
    # recorded as handed over: it must hand over (FerryHandOver) what the record says.
    with pytest.raises(FerryHandOver):
        copy_batch.handler(json.loads(json.dumps(event)), FakeLambdaContext(remaining_ms=1_000))
    with pytest.raises(FerryHandOver):
        copy_batch.handler(json.loads(json.dumps(event)), FakeLambdaContext())
    first = copy_batch_pass(event, FakeLambdaContext(remaining_ms=1_000))
    retry = copy_batch_pass(event, FakeLambdaContext())

    assert len(first["remaining"]) == 6 and first["counts"]["objects"] == 0
    assert retry["counts"] == first["counts"]
    assert retry["remaining"] == first["remaining"], "the recorded attempt's hand-over, not the retry's"
    assert retry["large"] == first["large"]


def test_a_pass_recorded_with_a_hand_over_then_failed_for_good_hands_the_objects_over_still(
    pipeline,
) -> None:
    """A pass records its hand-over, then fails for good (say its retries each die after the
    record): RecordFailedBatch finds the pass recorded and counts nothing again, but returned
    no `remaining`, so the objects the pass handed over were neither copied nor recorded: the
    child succeeded with them missing from its counts. It must hand them over as recorded."""
    fill(pipeline.s3, 4)
    job = start_job(SPEC)
    event = {"job": job, "items": listing_items(pipeline.s3, "src", "data/"), "pass": 1}
    handed = copy_batch_pass(event, FakeLambdaContext(remaining_ms=1_000))
    error = {"Error": "Lambda.Unknown", "Cause": "{}"}

    out = record_failure.handler({**event, "error": error}, FakeLambdaContext())

    assert len(handed["remaining"]) == 4
    assert out["remaining"] == handed["remaining"], "the recorded hand-over goes round again"
    assert out["counts"] == handed["counts"]
    assert list(DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).failures("exec-1")) == []


def test_a_pass_that_hands_over_publishes_its_counts_and_one_hand_over(pipeline, capsys) -> None:
    """The pass's metrics are flushed before FerryHandOver is raised (a hand-over is counted in
    Lambda's Errors metric; Ferry/PassesHandedOver tells the two apart); the resume publishes
    nothing: the pass counted itself."""
    from ferry.pipeline.batches import HAND_OVER_METRIC

    fill(pipeline.s3, 3)
    job = start_job(SPEC)
    event = {"job": job, "items": listing_items(pipeline.s3, "src", "data/"), "pass": 1}
    capsys.readouterr()

    with pytest.raises(FerryHandOver):
        copy_batch.handler(json.loads(json.dumps(event)), FakeLambdaContext(remaining_ms=1_000))
    emitted = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"_aws"' in x]
    copy_batch_pass(event, FakeLambdaContext(remaining_ms=1_000))  # again, and resumed
    resumed = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"_aws"' in x]

    (metric,) = emitted
    assert metric[HAND_OVER_METRIC] == [1.0] and metric["ObjectsCopied"] == [0.0]
    assert [m.get(HAND_OVER_METRIC) for m in resumed] == [[1.0]], "the retried pass only"


def test_failures_jsonl_is_streamed_not_built_in_memory(pipeline) -> None:
    """Issue 10, defect 9: Finalize built failures.jsonl as one string (a million failures do
    not fit a Lambda's memory). It must reach S3 a part at a time, each part sent before the
    next one is read from the ledger."""
    from ferry.pipeline.job_reports import FAILURES_PART_SIZE, JobReports
    from ferry.pipeline.ledger.contract import Failure

    total, read, before_each_part = 100_000, [0], []

    def failures() -> Any:
        for n in range(total):
            failure = Failure(
                "src", f"data/{n:07}-{'x' * 60}", f"copy/{n:07}", "AccessDenied on s3:GetObject"
            )
            read[0] += len(json.dumps(failure.to_dict(), ensure_ascii=False).encode()) + 1
            yield failure

    s3 = pipeline.services().s3  # the handlers' own client: botocore's, without boto3's upload methods
    s3.meta.events.register("before-call.s3.UploadPart", lambda **_: before_each_part.append(read[0]))
    reports = JobReports(s3, PIPELINE_REPORTS)
    _, failures_key = reports.put_final("exec-1", {"status": "PARTIAL"}, failures())

    assert len(before_each_part) >= 2, (
        "failures.jsonl was sent in one request, so it was held whole in memory"
    )
    line = 200  # a row is about 150 bytes: reading may run one row (and one 1 MiB buffer) ahead
    for number, bytes_read in enumerate(before_each_part, start=1):
        assert bytes_read <= number * FAILURES_PART_SIZE + 1024 * 1024 + line, (number, bytes_read)
    lines = s3.get_object(Bucket=PIPELINE_REPORTS, Key=failures_key)["Body"].read().splitlines()
    assert len(lines) == total and json.loads(lines[-1])["key"].startswith(f"data/{total - 1:07}")


# -- SSE-KMS: a source key is reused only where the workers may write with it ------------------

SOURCE_KEY = "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-source000001"
OTHER_REGION_KEY = "arn:aws:kms:eu-west-1:123456789012:key/11111111-2222-3333-4444-eusource0001"


def configure_destination_keys(pipeline: Any, monkeypatch: pytest.MonkeyPatch, keys: tuple[str, ...]) -> None:
    """The workers' environment as the CDK app writes it for these destination_kms_key_arns."""
    from dataclasses import replace

    settings = replace(pipeline.settings, destination_kms_key_arns=keys)
    for name, value in settings.worker_environment().items():
        monkeypatch.setenv(name, value)
    pipeline.services.cache_clear()


def copy_kms_source(pipeline: Any, key_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """One SSE-KMS source object copied by a batch; the destination's HEAD and its report line."""
    pipeline.s3.put_bucket_encryption(
        Bucket="dst",
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        },
    )
    pipeline.s3.put_object(
        Bucket="src",
        Key="data/secret.txt",
        Body=b"secret",
        ServerSideEncryption="aws:kms",
        SSEKMSKeyId=key_id,
    )
    job = start_job(SPEC)
    result = copy_batch.handler(
        {"job": job, "items": listing_items(pipeline.s3, "src", "data/"), "pass": 1}, FakeLambdaContext()
    )
    assert result["counts"]["copied"] == 1
    (report,) = pipeline.s3.list_objects_v2(Bucket=PIPELINE_REPORTS, Prefix="jobs/exec-1/objects/")[
        "Contents"
    ]
    (line,) = pipeline.s3.get_object(Bucket=PIPELINE_REPORTS, Key=report["Key"])["Body"].read().splitlines()
    return pipeline.s3.head_object(Bucket="dst", Key="copy/secret.txt"), json.loads(line)


def test_a_kms_source_key_not_configured_for_destinations_is_not_reused(pipeline) -> None:
    """The workers hold only kms:Decrypt on source keys: writing with one would be denied."""
    head, line = copy_kms_source(pipeline, SOURCE_KEY)

    assert head.get("SSEKMSKeyId") != SOURCE_KEY
    assert head["ServerSideEncryption"] == "AES256"  # the destination bucket's default
    assert "destination bucket's default (AES256)" in line["note"]


def test_a_kms_source_key_configured_for_destinations_is_kept(pipeline, monkeypatch) -> None:
    configure_destination_keys(pipeline, monkeypatch, (SOURCE_KEY,))
    head, line = copy_kms_source(pipeline, SOURCE_KEY)

    assert (head["ServerSideEncryption"], head["SSEKMSKeyId"]) == ("aws:kms", SOURCE_KEY)
    assert line.get("note") is None


def test_a_kms_source_key_of_another_region_is_not_sent_to_the_destinations_region(
    pipeline, monkeypatch
) -> None:
    """A KMS key is regional: listed for destinations or not, a key of eu-west-1 cannot encrypt
    in the workers' (and destination's) us-east-1."""
    configure_destination_keys(pipeline, monkeypatch, (OTHER_REGION_KEY,))
    head, line = copy_kms_source(pipeline, OTHER_REGION_KEY)

    assert head.get("SSEKMSKeyId") != OTHER_REGION_KEY
    assert head["ServerSideEncryption"] == "AES256"
    assert "destination bucket's default (AES256)" in line["note"]


def test_prepare_refuses_a_kms_key_id_the_workers_may_not_write_with(pipeline, monkeypatch) -> None:
    fill(pipeline.s3, 1)  # a source with nothing under its prefix is refused
    configure_destination_keys(pipeline, monkeypatch, (SOURCE_KEY,))
    other = "arn:aws:kms:us-east-1:123456789012:key/99999999-2222-3333-4444-notconfigured"

    refused = start_job({**SPEC, "options": {"kms_key_id": other}})

    assert set(refused) == {"rejected"}
    assert refused["rejected"].startswith("options.kms_key_id:"), refused["rejected"]
    assert other in refused["rejected"] and "destination_kms_key_arns" in refused["rejected"]
    assert DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).job("exec-1") is None

    accepted = start_job({**SPEC, "options": {"kms_key_id": SOURCE_KEY}}, name="exec-2")
    assert "rejected" not in accepted
    assert pipeline.s3.list_multipart_uploads(Bucket="dst").get("Uploads", []) == []  # probes aborted


def test_the_workers_budget_a_copy_object_at_the_configured_cross_region_rate(pipeline, monkeypatch) -> None:
    """The deadline gate's rate is a setting (default 16 MiB/s), carried to every worker."""
    from ferry.errors import ConfigError
    from ferry.models import CopyPolicy
    from ferry.pipeline.settings import PipelineSettings

    assert pipeline.settings.copy_object_mib_per_second == 16
    assert pipeline.env["FERRY_COPY_OBJECT_MIB_PER_SECOND"] == "16"
    with job_copier(pipeline.services(), CopyPolicy()) as copier:
        assert copier.single_request_rate == 16 * 1024 * 1024
    monkeypatch.setenv("FERRY_COPY_OBJECT_MIB_PER_SECOND", "40")
    pipeline.services.cache_clear()
    with job_copier(pipeline.services(), CopyPolicy()) as copier:
        assert copier.single_request_rate == 40 * 1024 * 1024
    with pytest.raises(ConfigError, match="copy_object_mib_per_second: 0 is out of range"):
        PipelineSettings.from_context(
            {"sources": ["a"], "destinations": ["b"], "copy_object_mib_per_second": 0}
        )


def other_region_bucket(pipeline: Any, name: str, region: str = "eu-west-1") -> None:
    pipeline.s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": region})


def test_prepare_refuses_a_source_bucket_in_another_region_saying_where_to_deploy(
    pipeline, monkeypatch
) -> None:
    """The Distributed Map's ItemReader reads only buckets in the state machine's region."""
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    other_region_bucket(pipeline, "src-eu")
    pipeline.s3.put_object(Bucket="src-eu", Key="data/a", Body=b"a")
    result = start_job({**SPEC, "source": {"bucket": "src-eu", "prefix": "data"}})
    assert result == {
        "rejected": "source.bucket: bucket 'src-eu' is in eu-west-1; the stack runs in us-east-1: "
        "deploy Ferry in eu-west-1, or give a manifest in a bucket in us-east-1"
    }
    assert DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).job("exec-1") is None


def test_prepare_refuses_a_manifest_in_another_region_but_not_its_rows_or_destination(
    pipeline, monkeypatch
) -> None:
    """Only what the ItemReader reads must be local: the workers copy across regions."""
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    other_region_bucket(pipeline, "lists-eu")
    other_region_bucket(pipeline, "src-eu")
    other_region_bucket(pipeline, "dst-eu", "ap-southeast-2")
    pipeline.s3.put_object(Bucket="lists-eu", Key="m.csv", Body=b"key\na\n")
    pipeline.s3.put_object(Bucket="src", Key="m.csv", Body=b"key\na\n")
    far = start_job(
        {"source": {"manifest": {"bucket": "lists-eu", "key": "m.csv", "format": "csv"}},
         "destination": {"bucket": "dst"}}
    )  # fmt: skip
    assert far == {
        "rejected": "source.manifest.bucket: bucket 'lists-eu' is in eu-west-1; the stack runs in "
        "us-east-1: deploy Ferry in eu-west-1, or copy the manifest to a bucket in us-east-1"
    }
    near = start_job(
        {"source": {"bucket": "src-eu", "manifest": {"bucket": "src", "key": "m.csv", "format": "csv"}},
         "destination": {"bucket": "dst-eu"}},
        name="exec-2",
    )  # fmt: skip
    assert near.get("reader") == "csv", near


@pytest.mark.parametrize(
    ("source", "destination", "options", "message"),
    [
        ({"bucket": "src", "prefix": "data"}, {"bucket": "src", "prefix": "data/copy"}, {},
         "destination: s3://src/data/copy/ is inside the source s3://src/data/"),
        ({"bucket": "src"}, {"bucket": "src", "prefix": "copy"}, {},
         "destination: s3://src/copy/ is inside the source s3://src/"),
        ({"bucket": "src", "prefix": "data"}, {"bucket": "src", "prefix": "data"}, {},
         "destination: s3://src/data/ is the source itself: nothing would change"),
        ({"bucket": "src", "prefix": "data"}, {"bucket": "src", "prefix": "data"}, {"skip_existing": False},
         "destination: s3://src/data/ is the source itself: nothing would change"),
        ({"bucket": "src", "prefix": "data/x"}, {"bucket": "src", "prefix": "data"}, {},
         "destination: s3://src/data/ contains the source s3://src/data/x/"),
    ],
)  # fmt: skip
def test_prepare_refuses_a_destination_overlapping_the_source(
    pipeline, source, destination, options, message
) -> None:
    result = start_job({"source": source, "destination": destination, "options": options})
    assert set(result) == {"rejected"}
    assert result["rejected"].startswith(message), result["rejected"]
    assert DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).job("exec-1") is None


@pytest.mark.parametrize(
    ("destination", "options"),
    [
        ({"bucket": "src", "prefix": "data"}, {"storage_class": "STANDARD_IA"}),
        ({"bucket": "src", "prefix": "data"}, {"metadata": {"owner": "a"}}),
        ({"bucket": "src", "prefix": "data"}, {"tags": {"project": "blue"}}),
        ({"bucket": "src", "prefix": "data/copy"}, {"exclude": ["copy/*"]}),
        ({"bucket": "dst", "prefix": "data"}, {}),
        ({"bucket": "src", "prefix": "database"}, {}),
    ],
)
def test_prepare_accepts_an_in_place_rewrite_and_disjoint_prefixes(pipeline, destination, options) -> None:
    fill(pipeline.s3, 1)  # a source with nothing under its prefix is refused
    job = start_job(
        {"source": {"bucket": "src", "prefix": "data"}, "destination": destination, "options": options}
    )
    assert job.get("reader") == "listing", job


def test_a_manifest_row_onto_itself_is_skipped_unless_a_change_is_asked(pipeline) -> None:
    """A manifest names keys explicitly (no runaway): a row whose target is its own source is
    settled as skipped when nothing would change, and rewritten when an attribute is asked."""
    pipeline.s3.put_object(Bucket="src", Key="a.txt", Body=b"a")
    pipeline.s3.put_object(Bucket="src", Key="m.csv", Body=b"key\na.txt\n")
    manifest = {"bucket": "src", "key": "m.csv", "format": "csv"}
    same = start_job(
        {"source": {"bucket": "src", "manifest": manifest}, "destination": {"bucket": "src"},
         "options": {"skip_existing": False}}
    )  # fmt: skip
    out = copy_batch.handler({"job": same, "items": [{"key": "a.txt"}], "pass": 1}, FakeLambdaContext())
    assert (out["counts"]["skipped"], out["counts"]["failed"], out["counts"]["copied"]) == (1, 0, 0)

    change = start_job(
        {"source": {"bucket": "src", "manifest": manifest}, "destination": {"bucket": "src"},
         "options": {"metadata": {"owner": "b"}}},
        name="exec-2",
    )  # fmt: skip
    out = copy_batch.handler({"job": change, "items": [{"key": "a.txt"}], "pass": 1}, FakeLambdaContext())
    assert out["counts"]["copied"] == 1, out
    got = pipeline.s3.get_object(Bucket="src", Key="a.txt")
    assert got["Metadata"] == {"owner": "b"} and got["Body"].read() == b"a"


def aws_listing_items(s3: Any, bucket: str, prefix: str = "") -> list[dict[str, Any]]:
    """Items exactly as AWS's listObjectsV2 ItemReader gives them (Step Functions developer
    guide, input-output-itemreader.html): `Etag` spelled so, quotes kept, LastModified in
    epoch SECONDS, Size a number."""
    response = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return [
        {
            "Etag": o["ETag"],
            "Key": o["Key"],
            "LastModified": int(o["LastModified"].timestamp()),
            "Size": o["Size"],
            "StorageClass": o.get("StorageClass", "STANDARD"),
        }
        for o in response.get("Contents", [])
    ]


def count_s3_requests(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every S3 request the workers send, from a botocore `before-call` hook on
    each client the engine and the batch handler make."""
    from ferry.engine.strategies import copier as engine_copier
    from ferry.pipeline import batches, services

    calls: list[str] = []

    def counted(original: Any) -> Any:
        def make(*args: Any, **kwargs: Any) -> Any:
            client = original(*args, **kwargs)
            client.meta.events.register(
                "before-parameter-build.s3", lambda model, **_: calls.append(model.name)
            )
            return client

        return make

    monkeypatch.setattr(engine_copier, "make_client", counted(engine_copier.make_client))
    monkeypatch.setattr(batches, "make_client", counted(batches.make_client))
    monkeypatch.setattr(services, "make_client", counted(services.make_client))  # the clients a worker keeps
    return calls


def test_size_mtime_skips_settle_from_aws_listing_items_without_a_head(pipeline, monkeypatch) -> None:
    fill(pipeline.s3, 10)  # 8 or more: the destination is listed, not HEAD per key
    # Earlier copies: the same sizes, written later, other bytes (so only size-mtime can skip them).
    for n in range(10):
        body = pipeline.s3.get_object(Bucket="src", Key=f"data/{n:03}.txt")["Body"].read()
        pipeline.s3.put_object(Bucket="dst", Key=f"copy/{n:03}.txt", Body=body.upper())
    job = start_job({**SPEC, "options": {"compare": "size-mtime"}})
    items = aws_listing_items(pipeline.s3, "src", "data/")
    assert isinstance(items[0]["LastModified"], int) and items[0]["Etag"].startswith('"')
    calls = count_s3_requests(monkeypatch)

    result = copy_batch.handler({"job": job, "items": items, "pass": 1}, FakeLambdaContext())

    assert result["counts"]["skipped"] == 10, result
    assert result["counts"]["copied"] == 0
    assert "HeadObject" not in calls, calls  # settled from the item and the destination listing
    assert not {"GetObject", "CopyObject", "PutObject"} & set(calls), calls
    assert calls.count("ListObjectsV2") >= 1
    for n in range(10):
        got = pipeline.s3.get_object(Bucket="dst", Key=f"copy/{n:03}.txt")["Body"].read()
        assert got == f"object {n}".encode().upper() * (n + 1)  # untouched
