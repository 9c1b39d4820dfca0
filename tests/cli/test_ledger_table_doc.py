"""The ledger table docs/commands/run.md tells users to make for `ferry run --table` against a
local DynamoDB: its create-table command, taken from the page as written and run with the AWS
CLI against moto's server, makes a table that `ferry run --table` then records a job in."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from conftest import REPO, S3Server
from ferry.pipeline.ledger.dynamodb import DynamoLedger

PAGE = REPO / "docs" / "commands" / "run.md"
DOCUMENTED_ENDPOINT = "http://127.0.0.1:8000"


def documented_commands() -> list[str]:
    """The page's `aws dynamodb create-table` and `ferry run --table` lines (continuations joined)."""
    text = PAGE.read_text().replace("\\\n", " ")
    create = re.findall(r"^aws dynamodb create-table .*$", text, flags=re.M)
    run = re.findall(r"^\.venv/bin/ferry run .*--table-endpoint-url .*$", text, flags=re.M)
    assert len(create) == 1 and len(run) == 1, f"{PAGE} shows no create-table and ferry run --table commands"
    return [create[0], run[0]]


def test_the_documented_ledger_table_takes_a_ferry_run(
    motoserver: S3Server, versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    create, run = (c.replace(DOCUMENTED_ENDPOINT, motoserver.url) for c in documented_commands())
    aws = shutil.which("aws", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    if not aws:
        pytest.fail("the AWS CLI is missing: `make test` installs it into .venv (requirements.txt)")
    table = shlex.split(create)[shlex.split(create).index("--table-name") + 1]
    dynamodb = boto3.client("dynamodb", endpoint_url=motoserver.url, region_name="us-east-1")
    if table in dynamodb.list_tables()["TableNames"]:
        dynamodb.delete_table(TableName=table)  # the session's moto server is shared
    made = subprocess.run([aws, *shlex.split(create)[1:]], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr

    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="in/a.txt", Body=b"a")
    spec = tmp_path / "job.json"
    spec.write_text(
        f'{{"job_id": "table-doc", "source": {{"bucket": "{src}", "prefix": "in/"}}, "destination": {{"bucket": "{dst}"}}}}'
    )
    argv = shlex.split(run)[2:]  # after `.venv/bin/ferry run`
    argv[argv.index("job.json")] = str(spec)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ferry.cli",
            "run",
            *argv,
            "--endpoint-url",
            versitygw.url,
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO / "functions")},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "job table-doc: SUCCEEDED" in done.stdout
    assert versitygw.keys(dst) == ["a.txt"]
    assert DynamoLedger(dynamodb, table).job("table-doc")["status"] == "SUCCEEDED"
