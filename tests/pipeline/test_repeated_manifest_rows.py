"""A manifest that names one key twice, both rows failing alike, through the whole pipeline in
moto (whose BatchWriteItem refuses duplicate keys in one call, as DynamoDB does): both rows
are counted (two objects listed, two failed), the failed key is one item of the ledger and
one line of failures.jsonl, and the job ends PARTIAL with its report, not with its failures
lost. tests/cli/test_repeated_manifest_rows_run.py runs the same manifest through `ferry run`
on both ledgers and expects the same counts and the same failures.jsonl."""

from __future__ import annotations

import json
from typing import Any

from test_parent_workflow import Parent, parent  # noqa: F401 - parent: the fixture

from conftest import PIPELINE_REPORTS, PIPELINE_TABLE
from ferry.pipeline.ledger.contract import Failure
from ferry.pipeline.ledger.dynamodb import DynamoLedger

PRESENT = ["in/a.txt", "in/b.txt", "in/c.txt"]
MISSING = "in/gone.txt"
ROWS = ["in/a.txt", MISSING, "in/b.txt", MISSING, "in/c.txt"]  # the missing key listed twice


def failures_file(s3: Any, job_id: str) -> list[dict[str, Any]]:
    body = s3.get_object(Bucket=PIPELINE_REPORTS, Key=f"jobs/{job_id}/failures.jsonl")["Body"].read()
    return [json.loads(line) for line in body.decode().splitlines() if line.strip()]


def test_a_key_listed_twice_that_fails_twice_is_counted_twice_and_reported_once(
    parent: Parent,  # noqa: F811 - the imported fixture
) -> None:
    s3 = parent.pipeline.s3
    for key in PRESENT:
        s3.put_object(Bucket="src", Key=key, Body=key.encode())
    s3.put_object(Bucket="src", Key="lists/twice.csv", Body=("key\n" + "\n".join(ROWS) + "\n").encode())
    spec = {
        "source": {
            "bucket": "src",
            "prefix": "in/",
            "manifest": {"bucket": "src", "key": "lists/twice.csv", "format": "csv"},
        },
        "destination": {"bucket": "dst", "prefix": "out/"},
    }

    described = parent.run(spec, "twice-job")

    assert described["status"] == "FAILED" and described["error"] == "FerryJobIncomplete", described
    assert "2 of 5 objects failed" in described["cause"], described["cause"]
    # The batch was copied and recorded by CopyBatch itself: never by RecordFailedBatch's retries.
    assert parent.harness.lambdas.called("record-failure") == []
    report = parent.report("twice-job")
    assert (report["status"], report["objects"], report["copied"], report["failed"]) == ("PARTIAL", 5, 3, 2)
    assert report["copied"] + report["skipped"] + report["failed"] + report["pending"] == report["objects"]
    job = parent.ledger_job("twice-job")
    assert (job["status"], job["objects"], job["failed"]) == ("PARTIAL", 5, 2)
    (failure,) = list(DynamoLedger(parent.pipeline.dynamodb, PIPELINE_TABLE).failures("twice-job"))
    assert (failure.bucket, failure.key, failure.dest_key) == ("src", MISSING, "out/gone.txt")
    (line,) = failures_file(s3, "twice-job")
    assert Failure.from_dict(line) == failure
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="dst")["Contents"]) == [
        "out/a.txt",
        "out/b.txt",
        "out/c.txt",
    ]
