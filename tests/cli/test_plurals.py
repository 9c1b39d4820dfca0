"""Counts are said in English: `1 object`, `2 objects`, `1 batch`, never `1 objects`. One
function (ferry.counts.plural) says them; the command line's messages use it, and no f-string
of the command line or of the pipeline's messages it prints puts a count before a plural noun."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO, S3Server
from ferry.cli.commands.clean_uploads import Cleaning, _print
from ferry.cli.commands.jobs_command import report_text
from ferry.counts import plural

FERRY = str(Path(sys.executable).with_name("ferry"))
# A count put straight before a plural noun: `{n} objects`, `{len(x)} batches`.
COUNT_THEN_PLURAL = re.compile(
    r"\{[^{}]+\} (?!(?:of|in|to|from|and|for|by|on) )([a-z]+ )?(objects|batches|failures|marks|parts|passes|keys|uploads|files|rows|documents|executions)\b(?!/)"
)
SAID_TO_USERS = [
    *sorted((REPO / "functions/ferry/cli").glob("*.py")),
    REPO / "functions/ferry/pipeline/jobs.py",
    REPO / "functions/ferry/pipeline/count_check.py",
    REPO / "functions/ferry/pipeline/batches.py",
    REPO / "functions/ferry/engine/strategies/streaming.py",
    REPO / "functions/ferry/engine/strategies/server_side.py",
]


def test_plural_says_one_and_many() -> None:
    assert plural(1, "object") == "1 object"
    assert [plural(n, "object") for n in (0, 2)] == ["0 objects", "2 objects"]
    assert plural(1, "batch") == "1 batch" and plural(3, "batch") == "3 batches"
    assert plural(2, "pass") == "2 passes"
    assert plural(1_000_000, "object", thousands=True) == "1,000,000 objects"
    assert plural(2, "more failure") == "2 more failures"


def test_no_message_puts_a_count_before_a_plural_noun() -> None:
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in SAID_TO_USERS
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if COUNT_THEN_PLURAL.search(line)
    ]
    assert found == []


def test_a_copy_of_one_object_says_1_object(versitygw: S3Server, vgw_buckets: tuple[str, str]) -> None:
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="one/a.txt", Body=b"a")
    run = subprocess.run(
        [FERRY, "copy", f"s3://{src}/one/", f"s3://{dst}/", "--endpoint-url", versitygw.url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("1 object: 1 copied, 0 skipped, 0 failed, 0 pending"), run.stdout


def test_a_job_report_of_one_object_in_one_batch_says_so() -> None:
    report = {
        "summary": {"status": "SUCCEEDED", "objects": 1, "copied": 1, "batches": 1, "bytes_copied": 5},
        "report": "s3://reports/jobs/j/summary.json",
        "failures_report": "s3://reports/jobs/j/failures.jsonl",
    }
    text = report_text(report, "j", every_failure=False)
    assert "1 object: 1 copied" in text and "in 1 batch\n" in text, text


def test_clean_uploads_says_1_stale_mark() -> None:
    from datetime import timedelta

    result = Cleaning("b", "", timedelta(hours=24), dry_run=False)
    result.marks_deleted.append({"key": "k", "upload_id": "u"})
    out = io.StringIO()
    _print(result, out)
    assert "1 stale mark deleted" in out.getvalue(), out.getvalue()
