"""A pipeline job's charts, summed by Finalize from the batch markers: each marker carries its
counts, the time it was recorded and its `batch_stats` (ferry.reports.report_stats.ReportStats), so
the job's size histogram, strategy and verification counts and throughput over time need no
per-object record and no read of the per-batch reports.

Sizes stay small on purpose: a marker's stats are a few hundred bytes (DynamoDB counts a map
as its elements plus 3 bytes, an empty one included: "DynamoDB item sizes and formats",
docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html), and
the fields this adds to the summary (at most 120 time buckets and ~45 size buckets) add a
few KiB to Finalize's output, far under Step Functions' 256 KiB per state."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Any, Protocol

from ferry.pipeline.ledger.contract import COUNTERS, Failure
from ferry.reports.report_html import FAILURES_SHOWN
from ferry.reports.report_stats import ReportStats, Timeline, iso_time, parse_iso_time

MARKER_FIELDS = "recorded_at, batch_stats, counts"


class MarkerSource(Protocol):
    """What this needs of a ledger (the DynamoDB one, or any other that keeps markers)."""

    def batches(
        self, job_id: str, prefix: str = "", *, projection: str | None = None
    ) -> Iterable[dict[str, Any]]: ...

    def failures(self, job_id: str) -> Iterable[Failure]: ...


def job_stats(
    ledger: MarkerSource, job_id: str, started_at: str | None, now: float | None = None
) -> dict[str, Any]:
    """The report fields of ferry.reports.report_stats for the whole job, plus `finished_at` and
    `seconds` (whole: the summary is stored in DynamoDB, which takes no floats)."""
    finished = time.time() if now is None else now
    start = parse_iso_time(started_at) if started_at else finished
    stats, timeline = ReportStats(), Timeline(start=start)
    for marker in ledger.batches(job_id, projection=MARKER_FIELDS):
        stats.merge(ReportStats.from_marker(marker.get("batch_stats")))
        counts: Mapping[str, Any] = marker.get("counts") or {}
        if marker.get("recorded_at"):
            objects = sum(int(counts.get(name, 0)) for name in COUNTERS)
            timeline.add(parse_iso_time(marker["recorded_at"]), objects, int(counts.get("bytes_copied", 0)))
    timeline.extend_to(finished)
    return {
        **stats.to_dict(),
        "timeline": timeline.to_dict(),
        "finished_at": iso_time(finished),
        "seconds": max(round(finished - start), 0),
    }


def first_failures(ledger: MarkerSource, job_id: str, limit: int = FAILURES_SHOWN) -> list[dict[str, Any]]:
    """The failures the HTML report lists (failures.jsonl has them all)."""
    return [failure.to_dict() for failure in islice(ledger.failures(job_id), limit)]
