"""A pass as the state machine hands it over and takes it back: its input in one shape, the
job's spec, what it returns, and the recording of a pass (or a large object) that failed
for good (RecordFailure).

Kept apart from the copy path (`batches`), which uses all of it, so that the RecordFailure
Lambda records a failed pass without loading the copy engine: Lambda bills its init phase.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ferry.jobspec import JobSpec, parse_job_spec
from ferry.models import CopyResult, Status
from ferry.pipeline.items import plan_item
from ferry.pipeline.ledger.contract import BatchCounts
from ferry.pipeline.recording import batch_id_for, record, result_of, settled_result
from ferry.pipeline.services import Services


def pass_event(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """A pass's event in one shape. The Distributed Map starts the child workflow with
    `{"Items": [...], "BatchInput": {"job": ...}}` and CopyBatch takes that as it comes (a Pass
    state reshaping it cost one more state transition per batch); later passes, and the Catch
    of a first pass, give `{"job", "items", "pass", ...}`. Anything else in the event (the
    Catch's `error`) is kept."""
    if "Items" not in event or "items" in event:
        return event
    rest = {k: v for k, v in event.items() if k not in ("Items", "BatchInput")}
    return {**rest, "job": event["BatchInput"]["job"], "items": event["Items"], "pass": 1}


def pass_result(
    event: Mapping[str, Any],
    batch_id: str,
    recorded: BatchCounts,
    *,
    remaining: list[Any],
    large: list[Any],
) -> dict[str, Any]:
    """What a pass hands the state machine: the batch's counts so far, what goes round again
    and what goes to Fargate (the earlier passes' large objects too)."""
    pass_no = int(event.get("pass", 1))
    return {
        "job": event["job"],
        "batch_id": batch_id,
        "pass": pass_no,
        "next_pass": pass_no + 1,
        "counts": sum_counts(event.get("counts"), recorded),
        "remaining": remaining,
        "large": list(event.get("large") or []) + large,
    }


def notify(services: Services, results: Sequence[CopyResult]) -> None:
    """Results settled without the copier (which calls the hook itself), for `ferry run`'s
    progress; no hook on AWS."""
    if services.on_result:
        for result in results:
            services.on_result(result)


def record_failure(event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """A pass (or one large object) failed for good: record its objects as failed, with the
    error, unless that pass had already been recorded before it failed; then the pass's
    recorded hand-over still goes on (see below)."""
    event = pass_event(event)
    job = event["job"]
    spec = job_spec(services, job["job_id"])
    error = event.get("error") or {}
    reason = error_reason(error)
    if "large_item" in event:
        items, batch_key = [event["large_item"]], large_key(event["batch_id"], event["large_item"])
    else:
        items = list(event.get("items") or [])
        batch_id = event.get("batch_id") or batch_id_for(spec.job_id, items)
        batch_key = f"{batch_id}-p{int(event.get('pass', 1))}"
    results = []
    for plan in (plan_item(item, spec) for item in items):
        if plan.skip or plan.fail:
            results.append(settled_result(plan))
        else:
            results.append(result_of(plan, Status.FAILED, reason))
    notify(services, results)
    recorded = record(services, spec.job_id, batch_key, results)
    # A pass recorded before it failed keeps its hand-over: what it handed over goes round again
    # (NextPass) or to Fargate, as after a retried pass, instead of vanishing from the counts.
    handover = {} if recorded.first or "large_item" in event else recorded.handover
    return {
        **pass_result(
            event,
            event.get("batch_id") or batch_key.rsplit("-p", 1)[0],
            recorded.counts,
            remaining=[items[i] for i in handover.get("remaining", [])],
            large=[items[i] for i in handover.get("large", [])],
        ),
        "pass_counts": recorded.counts.to_dict() if recorded.first else BatchCounts().to_dict(),
    }


def job_spec(services: Services, job_id: str) -> JobSpec:
    """The job's spec, read from the ledger once per process and job. The state machine carries
    only the job id (and small limits) from batch to batch, so no state's payload grows with the
    spec: every state stays under Step Functions' 256 KiB whatever the job says. A spec never
    changes once Prepare wrote it, so a Lambda container running pass after pass of one job
    reads it once (a GetItem per pass saved)."""
    spec = services._specs.get(job_id)
    if spec is None:
        job = services.ledger.job(job_id)
        if job is None:
            raise RuntimeError(f"job {job_id!r} has no record in the ledger")
        spec = services._specs[job_id] = parse_job_spec(job["spec"])
    return spec


def large_key(batch_id: str, item: Mapping[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(item, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"{batch_id}-large-{digest}"


def error_reason(error: Mapping[str, Any]) -> str:
    name = error.get("Error") or "error"
    cause = error.get("Cause") or ""
    try:  # Lambda errors arrive as a JSON document in Cause
        details = json.loads(cause)
        cause = details.get("errorMessage") or cause
    except (TypeError, ValueError):
        pass
    return f"batch failed after retries: {name}: {str(cause)[:500]}"


def sum_counts(previous: Mapping[str, int] | None, counts: BatchCounts) -> dict[str, int]:
    total = counts.to_dict()
    for name, value in (previous or {}).items():
        total[name] = total.get(name, 0) + int(value)
    return total
