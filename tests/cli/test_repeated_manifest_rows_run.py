"""`ferry run` of a manifest that names one failing key twice, against versitygw, on the SQLite
ledger and on a DynamoDB table (moto's server, which refuses duplicate keys in one
BatchWriteItem call as DynamoDB does): both ledgers count the two rows (5 objects, 3 copied,
2 failed) and keep the key as one failure, one line of failures.jsonl, as the pipeline does
in tests/pipeline/test_repeated_manifest_rows.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_run_command import assert_counts_add_up, dynamodb_table, ferry, write_spec

from conftest import S3Server
from ferry.pipeline.ledger.contract import Failure
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from ferry.pipeline.ledger.sqlite import SQLiteLedger

PRESENT = ["in/a.txt", "in/b.txt", "in/c.txt"]
MISSING = "in/gone.txt"
ROWS = ["in/a.txt", MISSING, "in/b.txt", MISSING, "in/c.txt"]


@pytest.mark.parametrize("ledger_kind", ["sqlite", "dynamodb"])
def test_a_key_listed_twice_that_fails_twice_is_counted_twice_and_reported_once(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path, ledger_kind: str, request: Any
) -> None:
    src, dst = vgw_buckets
    for key in PRESENT:
        versitygw.client.put_object(Bucket=src, Key=key, Body=key.encode())
    versitygw.client.put_object(
        Bucket=src, Key="lists/twice.csv", Body=("key\n" + "\n".join(ROWS) + "\n").encode()
    )
    spec = write_spec(
        tmp_path,
        {
            "job_id": "twice-job",
            "source": {
                "bucket": src,
                "prefix": "in/",
                "manifest": {"bucket": src, "key": "lists/twice.csv", "format": "csv"},
            },
            "destination": {"bucket": dst, "prefix": "out/"},
        },
    )
    if ledger_kind == "sqlite":
        args, ledger = ["--ledger", str(tmp_path / "l.sqlite")], lambda: SQLiteLedger(tmp_path / "l.sqlite")
    else:
        motoserver = request.getfixturevalue("motoserver")
        client, table = dynamodb_table(motoserver)
        args, ledger = (
            ["--table", table, "--table-endpoint-url", motoserver.url],
            lambda: DynamoLedger(client, table),
        )

    run = ferry(
        "run",
        spec,
        "--endpoint-url",
        versitygw.url,
        *args,
        "--report-dir",
        str(tmp_path / "reports"),
        "--json",
    )

    assert run.returncode == 2, run.stderr
    summary = json.loads(run.stdout)
    assert (summary["status"], summary["objects"], summary["copied"], summary["failed"]) == (
        "PARTIAL",
        5,
        3,
        2,
    )
    assert_counts_add_up(summary)
    (failure,) = list(ledger().failures("twice-job"))
    assert (failure.bucket, failure.key, failure.dest_key) == (src, MISSING, "out/gone.txt")
    lines = Path(summary["failures_report"]).read_text().splitlines()
    assert [Failure.from_dict(json.loads(line)) for line in lines] == [failure]
    assert sorted(versitygw.keys(dst)) == ["out/a.txt", "out/b.txt", "out/c.txt"]
