"""One batch of a pipeline job: copy what fits before the deadline, hand back the rest, and
record every settled object in the ledger exactly once.

The child workflow calls `copy_batch` (Lambda) in passes: each pass records the objects it
settled (copied, skipped, failed, pending a restore) under its own batch key and returns the
ones it handed over at its deadline (`remaining`) and the ones too large for Lambda (`large`,
one Fargate task each, see `copy_large_object`). A batch's last Lambda pass (`max_passes`)
hands what it could not finish to the Fargate task too, so the pass loop, and with it the
child execution's history, has a bound, and nothing is failed for reaching it. `record_failure` records a pass, or a large
object, that failed for good, so nothing listed is ever lost from the counts.

An item is an object, or in an all_versions job a key copied with its whole history: only how
an item is planned and copied differs (`ItemCopy`: `ObjectCopy`, `HistoryCopy`, chosen once
from the spec); the passes, the hand-over and the recording are one path for both.

A pass that settles its whole batch ends the child workflow: the Map's child start and
CopyBatch are its only state transitions. A pass that leaves work (`hands_work_over`) is the
rare case: the CopyBatch Lambda raises `FerryHandOver` after recording the pass, the child's
Catch sends the pass's own input to `resume_hand_over`, which rebuilds the pass's result
from the hand-over its ledger marker holds, and the pass loop goes round as before.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from botocore.exceptions import BotoCoreError, ClientError

from ferry.counts import plural
from ferry.engine.run.deadlines import deadline_in
from ferry.engine.strategies.copier import Copier
from ferry.errors import FerryError
from ferry.jobspec import JobSpec
from ferry.limits import MiB
from ferry.models import CopyPolicy, CopyResult, Endpoint, Status
from ferry.pipeline.items import ItemOutcome, Planned, plan_item
from ferry.pipeline.ledger.contract import BatchCounts
from ferry.pipeline.ledger.dynamodb import DynamoCopyRecords
from ferry.pipeline.passes import job_spec, large_key, notify, pass_event, pass_result
from ferry.pipeline.recording import batch_id_for, record, settled_result
from ferry.pipeline.replication.deletes import record_copies
from ferry.pipeline.replication.event_keys import EVENT_KEY_FIELD, KEY_FORMS_FIELD, listed
from ferry.pipeline.replication.lag import EVENT_TIME_FIELD, replication_lags
from ferry.pipeline.services import Services
from ferry.s3.clients import make_client

log = logging.getLogger(__name__)


def job_copier(
    services: Services,
    policy: CopyPolicy,
    source: Endpoint | None = None,
    destination: Endpoint | None = None,
    *,
    job_id: str | None = None,
    time_limited: bool = True,
) -> Copier:
    """A Copier for one job: its uploads' marks name `job_id`, so the job's Finalize can
    tell the uploads a crash left for it from any other job's (abandoned_uploads.py).

    `time_limited=False` for the Fargate task: it has no timeout, its passes only mark where
    to checkpoint, so an object whose longest request outlasts a pass (a 5 GiB part at the
    cautious rate) must start anyway; a Lambda pass must not start one its timeout would cut."""
    checkpoints = services.ledger.checkpoints(ttl_days=services.settings.checkpoint_ttl_days)
    source, destination = source or services.source, destination or services.destination
    return Copier(
        source,
        destination,
        policy,
        job_id=job_id,
        source_client=services.client(source),
        dest_client=services.client(destination),
        memory_limit=services.settings.memory_limit,
        checkpoints=checkpoints,
        # The workers hold only kms:Decrypt on source keys: a source key is reused only
        # where the stack lets them encrypt with it too.
        reusable_kms_keys=services.settings.destination_kms_key_arns,
        single_request_rate=services.settings.copy_object_mib_per_second * MiB if time_limited else None,
        on_part=services.on_part,
    )


# Where the child's Catch puts a FerryHandOver error in the pass's input (its ResultPath):
# its presence tells the CopyBatch Lambda to resume from the ledger instead of copying.
HAND_OVER_FIELD = "handed_over"
# EMF metric (Ferry namespace, Powertools' service dimension): one per FerryHandOver raised.
# Lambda counts each in the CopyBatch function's Errors metric; this tells the two apart.
HAND_OVER_METRIC = "PassesHandedOver"


class FerryHandOver(Exception):
    """A pass recorded its settled objects and left work for another pass or for Fargate.
    Raised by the CopyBatch Lambda so the child workflow's normal path (a batch finished in
    one pass) can end at CopyBatch: Lambda reports a Python exception's class name as the
    errorType, which is the error name the child's Catch matches (`ErrorEquals:
    ["FerryHandOver"]`). The message stays short: the Catch puts the error beside the batch's
    items in a state payload capped at 256 KiB; what was handed over is in the ledger."""


def hands_work_over(result: Mapping[str, Any]) -> bool:
    """Whether a pass's result leaves objects for another pass or for Fargate."""
    return bool(result.get("remaining") or result.get("large"))


def hand_over_message(result: Mapping[str, Any]) -> str:
    return (
        f"pass {result['pass']} of batch {result['batch_id']} handed over "
        f"{plural(len(result['remaining']), 'object')} to its next pass and {len(result['large'])} to Fargate"
    )


def resume_hand_over(event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """The result of the pass whose input `event` is, as the ledger recorded it: the pass raised
    FerryHandOver after recording, so its return value never reached the state machine. Reads
    the pass's marker (consistently) and rebuilds what `copy_batch` returned from the marker's
    counts and hand-over positions, the same way a retried pass does. A pure read: retrying it
    changes nothing. No marker means the pass never recorded, which FerryHandOver cannot
    follow; raising then fails the child, and Finalize records its unrecorded objects as
    failed (`recording.record_lost_batch`)."""
    event = pass_event(event)
    spec, items, pass_no, batch_id = _pass_of(event, services)
    marker = services.ledger.batch(spec.job_id, f"{batch_id}-p{pass_no}")
    if marker is None:
        raise RuntimeError(f"pass {pass_no} of batch {batch_id} handed over but has no record in the ledger")
    handover = marker.get("handover") or {}
    return pass_result(
        event,
        batch_id,
        BatchCounts.from_dict(marker.get("counts") or {}),
        remaining=[items[i] for i in handover.get("remaining", [])],
        large=[items[i] for i in handover.get("large", [])],
    )


def _pass_of(event: Mapping[str, Any], services: Services) -> tuple[JobSpec, list[Any], int, str]:
    """(job spec, items, pass number, batch id) of one pass's input: a batch is named by its
    items when the Map gave it no id, so every pass and its resume name it alike."""
    spec = job_spec(services, event["job"]["job_id"])
    items: list[Any] = list(event.get("items") or [])
    return spec, items, int(event.get("pass", 1)), event.get("batch_id") or batch_id_for(spec.job_id, items)


@dataclass(frozen=True)
class ItemCopy(ABC):
    """How a job's items are planned and copied: objects (`ObjectCopy`), or in an all_versions
    job keys whose whole history is copied (`HistoryCopy`). Chosen once from the spec
    (`item_copy`); the rest of a pass (what is settled without a copy, what goes to Fargate,
    the deadline's hand-over, the recording) is the same for both: `copy_batch`,
    `copy_large_object`."""

    services: Services
    spec: JobSpec
    # Whether a pass's settled items are counted apart from its results (BatchCounts.items):
    # a key's one item settles its versions' many results.
    items_are_keys: ClassVar[bool] = False

    def plan(self, items: list[Any]) -> list[Planned]:
        """The pass's items planned, in their order."""
        return [plan_item(item, self.spec) for item in items]

    @abstractmethod
    def copy(self, planned: list[Planned], deadline: float) -> list[ItemOutcome]:
        """Copy the planned items until the deadline; outcomes in the planned order."""

    @abstractmethod
    def copy_to_the_end(
        self, plan: Planned, keep_going: Callable[[], bool], pass_seconds: float
    ) -> list[CopyResult] | None:
        """The Fargate task's copy of one item, in passes of `pass_seconds` that each end at a
        checkpoint; None when `keep_going` says stop first (the task's retry resumes it)."""


class ObjectCopy(ItemCopy):
    """Each item is one object: sized by a HEAD where its row gives no size (the size says
    Lambda or Fargate), copied by one Copier per way of reaching its source."""

    def plan(self, items: list[Any]) -> list[Planned]:
        return _with_sizes(super().plan(items), self.services)

    def copy(self, planned: list[Planned], deadline: float) -> list[ItemOutcome]:
        services, spec = self.services, self.spec
        results = _copy_in_lambda(services, spec, planned, deadline)
        results = _vanished_since_event(services, planned, results)
        _record_copies(services, spec, [(p.item, r) for p, r in zip(planned, results, strict=True)])
        return [ItemOutcome([result], handed_over=result.handed_over) for result in results]

    def copy_to_the_end(
        self, plan: Planned, keep_going: Callable[[], bool], pass_seconds: float
    ) -> list[CopyResult] | None:
        services, spec = self.services, self.spec
        source = services.endpoint("source", plan.obj.bucket, plan.obj.key)  # type: ignore[union-attr]
        destination = services.endpoint("destination", spec.destination_bucket, spec.destination_prefix)
        with job_copier(
            services, spec.options.policy, source, destination, job_id=spec.job_id, time_limited=False
        ) as copier:
            while True:
                result = copier.copy(plan.obj, plan.target, deadline=deadline_in(pass_seconds))  # type: ignore[arg-type]
                if not result.handed_over:
                    break
                if not keep_going():
                    return None
        result = _vanished_since_event(services, [plan], [result])[0]
        _record_copies(services, spec, [(plan.item, result)])
        return [result]


class HistoryCopy(ItemCopy):
    """Each item is a key whose whole history one worker copies, in order (see
    pipeline/history_keys.py): handed over whole when the deadline comes first, sent whole to
    the Fargate task when its history's bytes are over the Lambda threshold.

    The version engine is imported at the copy, not with this module: only all_versions jobs
    copy histories, and every CopyBatch cold start and Fargate task would otherwise pay for it."""

    items_are_keys = True

    def copy(self, planned: list[Planned], deadline: float) -> list[ItemOutcome]:
        from ferry.pipeline.history_copy import copy_key_histories

        with history_copier(self.services, self.spec) as copier:
            return copy_key_histories(
                copier,
                planned,
                deadline=deadline,
                dry_run=self.spec.options.policy.dry_run,
                on_result=self.services.on_result,
            )

    def copy_to_the_end(
        self, plan: Planned, keep_going: Callable[[], bool], pass_seconds: float
    ) -> list[CopyResult] | None:
        from ferry.pipeline.history_copy import copy_history_to_the_end

        with history_copier(self.services, self.spec, time_limited=False) as copier:
            return copy_history_to_the_end(
                copier,
                plan,
                pass_seconds=pass_seconds,
                keep_going=keep_going,
                dry_run=self.spec.options.policy.dry_run,
            )


def item_copy(services: Services, spec: JobSpec) -> ItemCopy:
    """How the job's items are planned and copied: key histories for an all_versions job."""
    return HistoryCopy(services, spec) if spec.reader == "versions" else ObjectCopy(services, spec)


def copy_batch(event: Mapping[str, Any], services: Services, remaining_ms: int) -> dict[str, Any]:
    """One Lambda pass over a batch: its items settled without a copy (skipped, or failed at
    planning), those over the Lambda threshold sent to Fargate, the rest copied until the
    deadline; what the deadline stopped goes round again, or from the last pass to Fargate."""
    event = pass_event(event)
    spec, items, pass_no, batch_id = _pass_of(event, services)
    settings = services.settings
    deadline = deadline_in(remaining_ms / 1000 - settings.deadline_margin_seconds)
    way = item_copy(services, spec)
    planned = way.plan(items)
    settled: list[CopyResult] = [settled_result(p) for p in planned if p.skip or p.fail]
    notify(services, settled)
    settled_items = len(settled)
    to_copy = [p for p in planned if not (p.skip or p.fail)]
    large = [p for p in to_copy if (p.obj.size or 0) > settings.large_object_threshold]  # type: ignore[union-attr]
    in_lambda = [p for p in to_copy if p not in large]
    remaining: list[Any] = []
    copies: list[tuple[Any, CopyResult]] = []
    outcomes = way.copy(in_lambda, deadline) if in_lambda else []
    for plan, outcome in zip(in_lambda, outcomes, strict=True):
        if not outcome.handed_over:
            settled.extend(outcome.results)
            settled_items += 1
            copies.extend((plan.item, result) for result in outcome.results)
        elif last_lambda_pass(pass_no, settings.max_passes):
            large.append(plan)  # the Fargate task resumes it: an object from its checkpoint
        else:
            remaining.append(plan.item)
    return _finish_pass(
        event,
        services,
        spec,
        (items, pass_no, batch_id),
        settled,
        remaining,
        [p.item for p in large],
        lags=replication_lags(copies),
        keys=settled_items if way.items_are_keys else None,
    )


def last_lambda_pass(pass_no: int, max_passes: int) -> bool:
    """Whether this pass is a batch's last in Lambda: what it leaves goes to the Fargate task
    (no time limit) instead of round again, so the pass loop ends and nothing fails for it.
    The bound keeps the child's history under Step Functions' 25,000 events (settings.py,
    MAX_PASSES); a pass past it (max_passes lowered mid-job) is a last pass too."""
    return pass_no >= max_passes


def _finish_pass(
    event: Mapping[str, Any],
    services: Services,
    spec: JobSpec,
    this_pass: tuple[list[Any], int, str],
    settled: list[CopyResult],
    remaining: list[Any],
    large: list[Any],
    *,
    lags: dict[str, list[float]] | None = None,
    keys: int | None = None,
) -> dict[str, Any]:
    """Record a pass (its settled results, and what it hands over by position) and say what
    the state machine does next. `this_pass`: its items, number and batch id (_pass_of, as
    copy_batch read them); `keys`: an all_versions pass's settled keys (BatchCounts.items)."""
    items, pass_no, batch_id = this_pass
    handover = {"remaining": _positions(items, remaining), "large": _positions(items, large)}
    recorded = record(services, spec.job_id, f"{batch_id}-p{pass_no}", settled, handover=handover, items=keys)
    if not recorded.first:
        # An earlier attempt of this pass was recorded: its hand-over is the one that counts,
        # or objects it handed over would be lost and ones it settled copied twice.
        remaining = [items[i] for i in recorded.handover.get("remaining", [])]
        large_items = [items[i] for i in recorded.handover.get("large", [])]
    else:
        large_items = large
    log.info(
        "pass %d of batch %s: %d settled, %d handed over, %d for Fargate%s",
        pass_no,
        batch_id,
        recorded.counts.objects,
        len(remaining),
        len(large_items),
        "" if recorded.first else " (as recorded by an earlier attempt)",
    )
    return {
        **pass_result(event, batch_id, recorded.counts, remaining=remaining, large=large_items),
        "pass_counts": recorded.counts.to_dict() if recorded.first else BatchCounts().to_dict(),
        # Popped by the handler (EMF), never returned to the state machine; a pass an earlier
        # attempt recorded already measured its copies.
        "replication_lag": (lags or {}) if recorded.first else {},
    }


def history_copier(services: Services, spec: JobSpec, *, time_limited: bool = True) -> Copier:
    """The Copier of an all_versions job: every version is written (what the destination's
    current object is says nothing of its history: the histories are matched instead)."""
    return job_copier(
        services,
        replace(spec.options.policy, skip_existing=False),
        services.endpoint("source", str(spec.source_bucket), spec.source_prefix),
        services.endpoint("destination", spec.destination_bucket, spec.destination_prefix),
        job_id=spec.job_id,
        time_limited=time_limited,
    )


def _copy_in_lambda(
    services: Services, spec: JobSpec, planned: list[Planned], deadline: float
) -> list[CopyResult]:
    """Copy the planned objects, one Copier per way of reaching their source (a manifest's rows
    may name buckets reached differently); results come back in the planned order."""
    destination = services.endpoint("destination", spec.destination_bucket, spec.destination_prefix)
    groups: dict[Endpoint, list[int]] = {}
    for index, plan in enumerate(planned):
        obj = plan.obj
        assert obj is not None
        groups.setdefault(services.endpoint("source", obj.bucket, obj.key), []).append(index)
    results: dict[int, CopyResult] = {}
    for source, indexes in groups.items():
        with job_copier(services, spec.options.policy, source, destination, job_id=spec.job_id) as copier:
            pairs = [(planned[i].obj, planned[i].target) for i in indexes]
            for index, result in zip(
                indexes,
                copier.copy_batch(pairs, deadline=deadline, on_result=services.on_result),
                strict=True,
            ):  # type: ignore[arg-type]
                results[index] = result
    return [results[i] for i in range(len(planned))]


def _positions(items: Sequence[Any], chosen: Sequence[Any]) -> list[int]:
    """Where each chosen item stands in the pass's items (by identity: items repeat in a
    manifest), so a marker can name them in a few bytes."""
    wanted = {id(item) for item in chosen}
    return [index for index, item in enumerate(items) if id(item) in wanted]


def copy_large_object(
    job_id: str,
    batch_id: str,
    item: Mapping[str, Any],
    services: Services,
    *,
    keep_going: Callable[[], bool] = lambda: True,
    pass_seconds: float = 90.0,
) -> CopyResult | None:
    """Copy one object (in an all_versions job, one key's whole history) with no time limit, in
    passes of `pass_seconds` that each end at a checkpoint, so a stop request (Fargate Spot's
    SIGTERM) loses at most one pass. Returns its result (a history's newest version's), or None
    when stopped before the end: the task exits non-zero and its retry resumes."""
    spec = job_spec(services, job_id)
    plan = plan_item(item, spec)
    keys: int | None = None
    if plan.skip or plan.fail:
        results = [settled_result(plan)]
    else:
        way = item_copy(services, spec)
        copied = way.copy_to_the_end(plan, keep_going, pass_seconds)
        if copied is None:
            return None
        results, keys = copied, (1 if way.items_are_keys else None)
    notify(services, results)
    record(services, job_id, large_key(batch_id, item), results, items=keys)
    return results[-1]


def _vanished_since_event(
    services: Services, planned: Sequence[Planned], results: list[CopyResult]
) -> list[CopyResult]:
    """A replication row is an S3 event, and S3 delivers events late and out of order: a key
    deleted after its "Object Created" event is not a failure to copy but nothing left to
    replicate. A failed row whose key a listing shows absent is counted skipped, with that
    reason; a listing (not a HEAD) proves absence under prefix-scoped ListBucket too, where a
    HEAD of a missing key answers 403. A row whose event key has two forms (event_keys) is
    counted so only when every form is absent: the event may have named the other one."""
    settled = list(results)
    for index, (plan, result) in enumerate(zip(planned, results, strict=True)):
        obj = plan.obj
        if result.status != Status.FAILED or obj is None or not isinstance(plan.item, Mapping):
            continue
        if plan.item.get(EVENT_TIME_FIELD) is None or obj.version_id:
            continue
        forms = [obj.key, *(f for f in plan.item.get(KEY_FORMS_FIELD) or () if f != obj.key)]
        try:
            client = make_client(services.endpoint("source", obj.bucket, obj.key))
            present = [form for form in forms if listed(client, obj.bucket, form) is not None]
        except (ClientError, BotoCoreError, FerryError):
            continue  # absence not proved: the failure stands, with its own reason
        if not present:
            settled[index] = replace(
                result,
                status=Status.SKIPPED,
                reason="deleted at the source since its event: nothing to replicate"
                + (f" (absent as {' and as '.join(repr(f) for f in forms)})" if len(forms) > 1 else ""),
            )
        elif obj.key not in present:
            settled[index] = replace(
                result,
                reason=f"{result.reason}; s3://{obj.bucket}/{present[0]}, which the event's key "
                f"{plan.item.get(EVENT_KEY_FIELD)!r} may also name, exists: not counted as deleted",
            )
    return settled


def _record_copies(services: Services, spec: JobSpec, copies: list[tuple[Any, CopyResult]]) -> None:
    """A replication job with deletes on remembers what it wrote at each destination key
    (replication/deletes.py says why); every other job writes nothing more."""
    if spec.replication is None or not spec.replication.deletes:
        return
    record_copies(
        copies,
        destination_client=make_client(
            services.endpoint("destination", spec.destination_bucket, spec.destination_prefix)
        ),
        record_store=DynamoCopyRecords(services.dynamodb, services.settings.table_name),
        replication=spec.replication.name,
        job_id=spec.job_id,
    )


def _with_sizes(planned: list[Planned], services: Services) -> list[Planned]:
    """Manifest rows often carry no size; one HEAD each tells which need Fargate."""
    unknown = [i for i, p in enumerate(planned) if p.obj and p.obj.size is None and not (p.skip or p.fail)]
    if not unknown:
        return planned
    clients: dict[Endpoint, Any] = {}

    def head(plan: Planned) -> Planned:
        obj = plan.obj
        assert obj is not None
        args = {"VersionId": obj.version_id} if obj.version_id else {}
        try:
            size = clients[services.endpoint("source", obj.bucket, obj.key)].head_object(
                Bucket=obj.bucket, Key=obj.key, **args
            )["ContentLength"]
        except Exception:  # the copy itself will report why the object cannot be read
            return plan
        return replace(plan, obj=replace(obj, size=size))

    for plan in (planned[i] for i in unknown):
        source = services.endpoint("source", plan.obj.bucket, plan.obj.key)  # type: ignore[union-attr]
        if source not in clients:
            clients[source] = make_client(source)
    with ThreadPoolExecutor(16) as pool:
        for index, plan in zip(unknown, pool.map(head, [planned[i] for i in unknown]), strict=True):
            planned[index] = plan
    return planned


def large_object_recorded(services: Services, job_id: str, batch_id: str, item: Mapping[str, Any]) -> bool:
    """Whether a large object's task already settled it (a resumed run does not copy it again)."""
    return services.ledger.batch(job_id, large_key(batch_id, item)) is not None
