"""Finalize's count check: did every object the Map handed out end in the ledger?

The Map Run's own numbers come from DescribeMapRun. `executionCounts.total` is the number of
child executions the Map Run started (API reference, MapRunExecutionCounts): one per batch,
unambiguously. `itemCounts.total` is "the total number of items processed in all the child
workflow executions" (MapRunItemCounts), which, with an ItemBatcher, does not settle whether an
item is one listed object or one batch. So no job's outcome rests on that reading:

- Ferry's own records carry the check. Every batch's first pass is recorded under
  `<batch id>-p1` with the objects it settled and the positions it handed over (to a later
  pass, or to Fargate), so the objects a batch was given are known from what Ferry wrote; a
  batch that recorded nothing of its own has only its `-lost` marker (Finalize's record of a
  child the ResultWriter lists as unfinished). The objects the batches were given must equal
  the objects the ledger accounts for, and there must be a batch in the ledger for every
  child execution.
- `itemCounts.total` must equal either the ledger's objects (it counts items) or the child
  executions (it counts batches); anything else fails the job with a message naming both
  readings.

A wrong reading therefore never fails a job whose every object was copied, and a job with
objects missing fails under either reading.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ferry.counts import plural
from ferry.pipeline.ledger.contract import BatchCounts, Ledger

DOES_NOT_ADD_UP = "the counts do not add up"


@dataclass(frozen=True)
class MapRunCounts:
    """What DescribeMapRun says of the job's Map Run(s), summed."""

    item_counts_total: int  # items processed: listed objects, or batches (the docs leave it open)
    execution_counts_total: int  # child executions started: one per batch


@dataclass(frozen=True)
class BatchesRecorded:
    """What the ledger's batch markers say of the batches themselves."""

    batches: int  # distinct batches with at least one marker
    objects_given: int  # objects those batches were given, from their first pass's marker


@dataclass
class CountCheck:
    """The check's outcome: how many objects the Map read as far as it can be established,
    and every way the counts fail to add up (none: the job's counts hold every object)."""

    objects_read: int | None
    problems: list[str] = field(default_factory=list)
    details: dict[str, Any] | None = None  # the numbers behind it, for summary.json


def map_run_counts(stepfunctions: Any, map_run_arns: Iterable[str]) -> MapRunCounts | None:
    """The Map Runs' item and child-execution totals (DescribeMapRun), or None when any of
    them cannot be asked (no client, no Map Run, an error, a field missing)."""
    arns = [arn for arn in map_run_arns if arn]
    if stepfunctions is None or not arns:
        return None
    items = executions = 0
    for arn in arns:
        try:
            described = stepfunctions.describe_map_run(mapRunArn=arn)
            items += int(described["itemCounts"]["total"])
            executions += int(described["executionCounts"]["total"])
        except (ClientError, BotoCoreError, KeyError, TypeError, ValueError):
            return None
    return MapRunCounts(items, executions)


def batches_recorded(ledger: Ledger, job_id: str) -> BatchesRecorded:
    """Count the job's batches and the objects each was given, from the markers alone."""
    first_passes: dict[str, int] = {}
    lost: dict[str, int] = {}
    for marker in ledger.batches(job_id, projection="sk, counts, handover"):
        batch_id, _, kind = str(marker["sk"]).removeprefix("BATCH#").partition("-")
        if kind == "p1":
            first_passes[batch_id] = given_to_batch(marker)
        elif kind == "lost":
            lost[batch_id] = BatchCounts.from_dict(marker.get("counts") or {}).settled_items
        else:
            lost.setdefault(batch_id, 0)  # a later pass or a large object: the batch exists
    # A batch without a first pass lost every object it was given: its -lost marker holds them.
    given = sum(first_passes.values()) + sum(n for b, n in lost.items() if b not in first_passes)
    return BatchesRecorded(len(first_passes.keys() | lost.keys()), given)


def given_to_batch(first_pass: Mapping[str, Any]) -> int:
    """A batch's items from its first pass's marker: those it settled, plus those it handed
    to the next pass and to Fargate (recorded by position, each once). An item is an object,
    or in an all_versions job a key (BatchCounts.items)."""
    handover = first_pass.get("handover") or {}
    handed = sum(len(handover.get(name) or []) for name in ("remaining", "large"))
    return BatchCounts.from_dict(first_pass.get("counts") or {}).settled_items + handed


def check_listed(objects: int, listed: int | None, *, noun: str = "object") -> CountCheck:
    """`ferry run`: the items its own reader listed against the ledger's objects (`noun`: what
    an item is, "key" in an all_versions job, whose objects are versions)."""
    if listed is None or listed == objects:
        return CountCheck(listed)
    return CountCheck(
        listed,
        [f"{DOES_NOT_ADD_UP}: the Map read {plural(listed, noun)} but the ledger accounts for {objects}"],
    )


def check_map_run(
    objects: int, recorded: BatchesRecorded, counts: MapRunCounts | None, *, noun: str = "object"
) -> CountCheck:
    """The state machine's Finalize: the ledger's objects against what its batches were given,
    its batches against the child executions, and itemCounts against both of its readings.
    `objects` and `noun`: the Map's items as the ledger settled them (keys in an all_versions job)."""
    problems = []
    if recorded.objects_given != objects:
        problems.append(
            f"{DOES_NOT_ADD_UP}: the ledger's batches were given {plural(recorded.objects_given, noun)} "
            f"but account for {objects}"
        )
    if counts is None:
        return CountCheck(recorded.objects_given, problems, _details(recorded, None, None))
    executions, items = counts.execution_counts_total, counts.item_counts_total
    if recorded.batches < executions:
        problems.append(
            f"{DOES_NOT_ADD_UP}: the Map Run started {plural(executions, 'child execution')} (DescribeMapRun "
            f"executionCounts.total) but the ledger holds {plural(recorded.batches, 'batch')}: "
            f"{executions - recorded.batches} recorded none of their objects"
        )
    read_as = item_counts_reading(items, objects, executions)
    if read_as is None:
        problems.append(
            f"{DOES_NOT_ADD_UP}: DescribeMapRun itemCounts.total is {items}, neither the {objects} "
            f"{noun}s the ledger accounts for (itemCounts counting objects, as the API reference "
            f"reads) nor the {plural(executions, 'child execution')} (itemCounts counting batches)"
        )
    objects_read = recorded.objects_given if read_as == "batches" else items
    return CountCheck(objects_read, problems, _details(recorded, counts, read_as))


def item_counts_reading(items: int, objects: int, executions: int) -> str | None:
    """Which reading of itemCounts.total the numbers bear out: "items" (it equals the ledger's
    objects), "batches" (it equals the child executions), or None (neither)."""
    if items == objects:
        return "items"
    if items == executions:
        return "batches"
    return None


def _details(recorded: BatchesRecorded, counts: MapRunCounts | None, read_as: str | None) -> dict[str, Any]:
    return {
        "item_counts_total": counts.item_counts_total if counts else None,
        "execution_counts_total": counts.execution_counts_total if counts else None,
        "item_counts_read_as": read_as,
        "batches_recorded": recorded.batches,
        "objects_given_to_batches": recorded.objects_given,
    }
