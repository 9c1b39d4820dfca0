"""How a batch's results are recorded: the report first, then the counts once (whichever
attempt creates the pass's marker), then the failures; and, for Finalize, the objects of a batch
that ended without recording them (`record_lost_batch`).

Kept apart from the copy path (`batches`), which records each pass through it, so that Finalize
records a lost batch without importing the copy engine.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ferry.jobspec import JobSpec
from ferry.models import CopyResult, SourceObject, Status, Target
from ferry.pipeline.items import Planned, plan_item
from ferry.pipeline.ledger.contract import BatchCounts, Failure, Recorded
from ferry.pipeline.services import Services
from ferry.reports.report_stats import ReportStats


def batch_id_for(job_id: str, items: Sequence[Any]) -> str:
    """The same items of the same job always make the same id, so a retried or redriven
    batch is recognised in the ledger and never counted twice."""
    text = json.dumps([job_id, items], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def record_lost_batch(
    services: Services, spec: JobSpec, items: Sequence[Any], reason: str
) -> Recorded | None:
    """A child execution that ended without recording all its items (it failed outside its
    Catch, timed out, was aborted, or never started): record each item no pass recorded as
    failed with `reason`, so the job's counts still hold every listed object and a retry over
    `failures.jsonl` picks them up. Idempotent: a second call finds them recorded."""
    batch_id = batch_id_for(spec.job_id, list(items))
    rows = _recorded_rows(services, spec.job_id, batch_id)
    if spec.reader == "versions":  # a key's versions are recorded together, by one pass, or not at all
        recorded = Counter(dict.fromkeys({(row.get("source_bucket"), row["key"], None) for row in rows}, 1))
    else:
        recorded = Counter(_identity_of_row(row) for row in rows)
    results = []
    for plan in (plan_item(item, spec) for item in items):
        identity = (
            (plan.obj.bucket, plan.obj.key, plan.obj.version_id) if plan.obj else (None, plan.key, None)
        )
        if recorded[identity] > 0:
            recorded[identity] -= 1
            continue
        results.append(
            settled_result(plan) if plan.skip or plan.fail else result_of(plan, Status.FAILED, reason)
        )
    if not results:
        return None
    return record(services, spec.job_id, f"{batch_id}-lost", results)


def _recorded_rows(services: Services, job_id: str, batch_id: str) -> Iterator[dict[str, Any]]:
    """Every object result recorded for the batch: its passes, its large objects, its losses."""
    for marker in services.ledger.batches(job_id, f"{batch_id}-"):
        if marker.get("report_key"):
            yield from services.reports.rows(marker["report_key"])


def _identity_of_row(row: Mapping[str, Any]) -> tuple[str | None, str, str | None]:
    return (row.get("source_bucket"), row["key"], row.get("version_id"))


def record(
    services: Services,
    job_id: str,
    batch_key: str,
    results: list[CopyResult],
    *,
    handover: Mapping[str, list[int]] | None = None,
    items: int | None = None,
) -> Recorded:
    """Report, then count once, then the failure items (also after a crash between the two).
    `items`: the Map items the results settle, where that is not one per result (an
    all_versions job's keys: BatchCounts.items)."""
    ledger, reports = services.ledger, services.reports
    counts = BatchCounts.of(results)
    counts.items = items
    attempt = uuid.uuid4().hex[:12]
    report_key = reports.put_batch(job_id, batch_key, attempt, results) if results else None
    stats = ReportStats()
    for result in results:
        stats.add(result)
    recorded = ledger.record_batch(
        job_id,
        batch_key,
        counts,
        attempt=attempt,
        report_key=report_key,
        handover=handover,
        stats=stats.to_marker(),
    )
    if not recorded.first and report_key:
        reports.delete(report_key)  # this attempt's results do not count; keep one report per batch
    if recorded.counts.failed:
        marker = ledger.batch(job_id, batch_key) or {}
        if not marker.get("failures_recorded"):
            if recorded.first:
                failures = [Failure.of(r, batch_key) for r in results if r.status == Status.FAILED]
            else:
                failures = (
                    list(reports.failed_in(recorded.report_key, batch_key)) if recorded.report_key else []
                )
            ledger.put_failures(job_id, failures)
            ledger.failures_recorded(job_id, batch_key)
    return recorded


def settled_result(plan: Planned) -> CopyResult:
    """The result of an item settled without a copy: failed with its planning problem, or
    skipped with why."""
    if plan.fail:
        return result_of(plan, Status.FAILED, plan.fail)
    return result_of(plan, Status.SKIPPED, plan.skip)


def result_of(plan: Planned, status: Status, reason: str | None) -> CopyResult:
    """A result for a planned item that no copy produced (it failed or was skipped)."""
    obj: SourceObject | None = plan.obj
    target: Target | None = plan.target
    return CopyResult(
        source_key=obj.key if obj else plan.key,
        dest_key=target.key if target else "",
        status=status,
        reason=reason,
        source_bucket=obj.bucket if obj else None,
        dest_bucket=target.bucket if target else None,
        version_id=obj.version_id if obj else None,
    )
