"""`ferry run`'s report at the end of a job streams every object's row from the batch reports
to `--report` and the summary, instead of holding all of them (issue 13, Load: no per-object
state kept for the whole job). Real parts: the SQLite ledger and the local report files a job
writes; memory measured with tracemalloc for jobs 8 times apart in size."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from ferry.cli.commands.run_command import _write_report, run_report
from ferry.models import CopyResult, Status
from ferry.pipeline.ledger.contract import BatchCounts
from ferry.pipeline.ledger.sqlite import SQLiteLedger
from ferry.pipeline.local_reports import LocalReports
from ferry.pipeline.local_run import local_settings
from ferry.pipeline.services import Services

BATCH = 200


def finished_job(folder: Path, objects: int) -> Services:
    """A job of `objects` copied objects as `ferry run` leaves it: one report file and one
    ledger row per batch of 200."""
    ledger, reports = SQLiteLedger(folder / "ledger.sqlite"), LocalReports(folder)
    ledger.create_job("job", {"source": {"bucket": "src"}})
    for first in range(0, objects, BATCH):
        results = [
            CopyResult(
                f"photos/{i:07d}.jpg",
                f"copy/photos/{i:07d}.jpg",
                Status.COPIED,
                strategy="server-side",
                bytes=2048,
                checksum="CRC32:AAAAAA==",
                verified_by="checksum",
                source_bucket="src",
                dest_bucket="dst",
            )
            for i in range(first, min(first + BATCH, objects))
        ]
        key = reports.put_batch("job", f"{first:08d}", "a1", results)
        ledger.record_batch("job", f"{first:08d}", BatchCounts.of(results), attempt="a1", report_key=key)
    return Services(
        s3=None,
        dynamodb=None,
        settings=local_settings(memory_limit=2**20),
        ledger_store=ledger,
        report_store=reports,
    )


def peak_writing_report(services: Services, out: Path) -> int:
    tracemalloc.start()
    try:
        _write_report(str(out), run_report(services, "job", {"job_id": "job", "status": "SUCCEEDED"}))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


def test_the_report_of_a_job_8_times_larger_takes_the_same_memory(tmp_path: Path) -> None:
    peaks = {}
    for objects in (800, 6_400):
        folder = tmp_path / str(objects)
        services = finished_job(folder, objects)
        out = folder / "report.jsonl"
        peaks[objects] = peak_writing_report(services, out)
        lines = out.read_text().splitlines()
        assert len(lines) == objects + 1  # every object, then the summary
        summary = json.loads(lines[-1])["summary"]
        assert (summary["objects"], summary["copied"], summary["failed"]) == (objects, objects, 0)
        assert json.loads(lines[0])["key"] == "photos/0000000.jpg"
        assert json.loads(lines[-2])["key"] == f"photos/{objects - 1:07d}.jpg"
    # Held in a list, 6,400 rows take MiBs more than 800; streamed, the peaks are alike.
    assert peaks[6_400] < peaks[800] * 1.5 + 128 * 1024, peaks
