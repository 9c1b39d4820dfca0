"""The replication starter: one drained SQS batch of S3 "Object Created" events -> one job.

S3 sends each event to EventBridge at least once and in no particular order; a rule routes a
replication's events to its queue; Lambda hands the starter up to `batch_size` messages at a
time. For each batch the starter
1. reads every message as an EventBridge S3 event (`parse_records`: a message that is not one
   for this replication fails alone, with its reason in the log, reported as a batch item
   failure as Powertools' BatchProcessor reports one, and SQS moves it to the dead-letter
   queue after maxReceiveCount receives; it is kept there, not dropped);
2. keeps, per key as the event spells it, the event with the greatest `sequencer` (duplicates
   and stale deliveries go);
3. with the replication's deletes on, also reads "Object Deleted" events: where a key's
   newest event in the batch is a delete, it goes to deletes.apply_deletes (through
   starter_deletes.run_deletes) instead of the job; a FAILED deletion's message is
   reported as a batch item failure;
4. resolves each created key with two possible spellings against the source (event_keys:
   whether EventBridge URL-encodes keys is not documented), in parallel and within the
   invocation's time (starter_lookups): a key not looked up in time has its messages reported
   as batch item failures, delivered again later, the rest of the batch done now;
5. writes ONE JSON Lines manifest of the created keys into the report bucket and starts ONE
   parent execution with it, named from those messages' ids, so a redelivered batch starts
   nothing twice.

Its time: the Lambda context's remaining time, of which RESERVE_SECONDS are kept for the
manifest, StartExecution and the answer; the look-ups get the rest (after the deletions, which
replication.config bounds on their own). Nothing a batch holds is dropped: every message is
in the job, acted on as a deletion, or reported as a batch item failure with its reason logged.

Rows name the key without a version id: the job copies the source's current object. Events
of one key can sit in different batches whose jobs finish in any order; copying "the latest"
converges on the source's newest object whatever the order, where copying each event's
version could leave an older version at the destination. The row's ETag and size let the copy
start without a HEAD; a key overwritten meanwhile fails the copy's If-Match and is decided
again from a HEAD (the engine's rule for a source changed since it was listed).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import ClientError

from ferry.filters import is_ferrys_own
from ferry.jobspec import check_job_id
from ferry.pipeline.replication.config import MANIFEST_NAME, Replication
from ferry.pipeline.replication.deletes import OBJECT_DELETED, Deletion, sequencer_newer
from ferry.pipeline.replication.event_keys import (
    EVENT_KEY_FIELD,
    KEY_FORMS_FIELD,
    UndecidedKey,
    key_forms,
    resolve_created,
)
from ferry.pipeline.replication.lag import EVENT_TIME_FIELD, REPLICATION_FIELD, parse_event_time
from ferry.pipeline.replication.starter_deletes import DeleteServices, run_deletes
from ferry.pipeline.replication.starter_lookups import run_lookups

log = logging.getLogger(__name__)

OBJECT_CREATED = "Object Created"
_HEX = re.compile(r"^[0-9A-Fa-f]+$")
# What an invocation keeps after its look-ups: the manifest's PutObject and StartExecution
# (each with its client's retries, seconds at worst) and the answer to Lambda.
RESERVE_SECONDS = 20.0


class NotAnEvent(ValueError):
    """A message that is not an S3 Object Created (or, with deletes on, Object Deleted) event
    for this replication."""


@dataclass(frozen=True)
class ObjectEvent:
    """What the starter keeps of one event: enough to copy the key and measure the lag.

    `key` is the key as the event spells it (events are grouped by it: two spellings are two
    keys); `key_forms` what it may stand for under the source prefix (event_keys.key_forms);
    `resolved` the form the source showed it names, once resolve() has looked."""

    message_id: str
    bucket: str
    key: str
    sequencer: str
    time: str
    size: int | None = None
    etag: str | None = None
    deletion: Deletion | None = None  # an "Object Deleted" event (replications with deletes on)
    key_forms: tuple[str, ...] = ()
    resolved: str | None = None

    @property
    def source_key(self) -> str:
        return self.resolved or (self.key_forms[0] if self.key_forms else self.key)

    def resolve(self, source_client: Callable[[], Any]) -> ObjectEvent:
        """This create with its key resolved against the source (a request per form, only
        for keys with two forms); UndecidedKey when the source cannot tell."""
        if self.deletion is not None or len(self.key_forms) < 2:
            return self
        found = resolve_created(source_client(), self.bucket, self.key, self.key_forms, self.etag, self.size)
        if found.entry is None:
            return replace(self, resolved=found.key)
        size = found.entry.get("Size")
        return replace(
            self,
            resolved=found.key,
            etag=str(found.entry.get("ETag") or "").strip('"') or self.etag,
            size=size if isinstance(size, int) else self.size,
        )

    def row(self, replication: str) -> dict[str, Any]:
        """A manifest row as ferry.pipeline.items reads it (plus what the lag needs, and for a
        key with two forms, both and the event's spelling)."""
        row: dict[str, Any] = {"bucket": self.bucket, "key": self.source_key}
        if len(self.key_forms) > 1:
            row[KEY_FORMS_FIELD] = list(self.key_forms)
            row[EVENT_KEY_FIELD] = self.key
        if self.size is not None:
            row["size"] = self.size
        if self.etag:
            row["etag"] = self.etag
        row.update({REPLICATION_FIELD: replication, EVENT_TIME_FIELD: self.time, "sequencer": self.sequencer})
        return row


@dataclass(frozen=True)
class Started:
    """What one batch did: its job (and execution name), its manifest, how many keys."""

    job_id: str
    manifest_key: str
    keys: int
    events: int
    already_started: bool


def parse_event(body: str, replication: Replication, message_id: str = "") -> ObjectEvent:
    """One SQS message body as the EventBridge S3 event it must be (shape: S3 user guide,
    "EventBridge event message structure", ev-events.html). The key is kept as the event spells
    it, with the forms it may stand for (event_keys: no decoding is assumed); the event is
    outside the replication only when no form is under the source prefix."""
    try:
        data = json.loads(body)
    except ValueError as error:
        raise NotAnEvent(f"the message body is not JSON ({error})") from error
    if not isinstance(data, dict) or data.get("source") != "aws.s3":
        raise NotAnEvent("the message is not an S3 event sent through EventBridge (source is not aws.s3)")
    detail_type = data.get("detail-type")
    deleted = detail_type == OBJECT_DELETED and replication.deletes
    if detail_type != OBJECT_CREATED and not deleted:
        raise NotAnEvent(
            f"detail-type {detail_type!r} is not {OBJECT_CREATED!r}"
            + (
                ' (deletes are off for this replication: "deletes": true)'
                if detail_type == OBJECT_DELETED
                else ""
            )
        )
    try:
        bucket, obj = data["detail"]["bucket"]["name"], data["detail"]["object"]
        key, sequencer = str(obj["key"]), str(obj["sequencer"])
        size, etag = obj.get("size"), obj.get("etag") or ""  # an Object Deleted event has neither
    except (KeyError, TypeError, AttributeError) as error:
        raise NotAnEvent(f"the S3 event lacks {error}") from error
    forms = key_forms(key, replication.source.prefix)
    if bucket != replication.source.bucket or not forms:
        raise NotAnEvent(
            f"s3://{bucket}/{key} is outside this replication's source "
            f"s3://{replication.source.bucket}/{replication.source.prefix}"
        )
    if not _HEX.match(sequencer):
        raise NotAnEvent(f"sequencer {sequencer!r} is not a hexadecimal string")
    if parse_event_time(data.get("time")) is None:
        raise NotAnEvent(f"time {data.get('time')!r} is not an ISO 8601 time")
    if deleted:
        # An Object Deleted event carries the delete marker's ETag, not the object's (deletes.py):
        # none is kept.
        return ObjectEvent(
            message_id,
            bucket,
            key,
            sequencer,
            str(data["time"]),
            deletion=Deletion.from_event(data),
            key_forms=forms,
        )
    return ObjectEvent(
        message_id=message_id,
        bucket=bucket,
        key=key,
        sequencer=sequencer,
        time=str(data["time"]),
        size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        etag=etag.strip('"') or None,
        key_forms=forms,
    )


def latest_per_key(events: Iterable[ObjectEvent]) -> list[ObjectEvent]:
    """The newest event of each key (greatest sequencer, compared as deletes.sequencer_newer
    does: hex strings right-padded, never read as numbers); a duplicate delivery (the same
    sequencer again) or a stale one (an older sequencer) is dropped, whichever its kind: a
    create older than a delete of the key is dropped, and so is a delete older than a create.
    Sorted by key, so one batch always makes the same manifest."""
    newest: dict[tuple[str, str], ObjectEvent] = {}
    for event in events:
        current = newest.get((event.bucket, event.key))
        if current is None or sequencer_newer(event.sequencer, current.sequencer):
            newest[(event.bucket, event.key)] = event
    return sorted(newest.values(), key=lambda e: (e.bucket, e.key))


def job_id_for(replication: Replication, message_ids: Iterable[str]) -> str:
    """The job id and execution name of a batch: the replication's name and a hash of the
    batch's sorted message ids. A redelivered batch (the same messages) gets the same name, and
    Step Functions starts a STANDARD execution name only once in 90 days."""
    digest = hashlib.sha256("\n".join(sorted(message_ids)).encode()).hexdigest()[:32]
    return check_job_id(f"{replication.name}-{digest}")  # a name of 1-40 makes 34-73 characters


def manifest_key(job_id: str) -> str:
    return f"jobs/{job_id}/{MANIFEST_NAME}"


def start_batch(
    events: Sequence[ObjectEvent],
    replication: Replication,
    *,
    s3: Any,
    stepfunctions: Any,
    report_bucket: str,
    state_machine_arn: str,
) -> Started:
    """Write the batch's manifest and start its one execution (or find it started)."""
    latest = latest_per_key(events)
    job_id = job_id_for(replication, (e.message_id for e in events))
    key = manifest_key(job_id)
    body = "".join(json.dumps(e.row(replication.name), ensure_ascii=False) + "\n" for e in latest)
    s3.put_object(Bucket=report_bucket, Key=key, Body=body.encode(), ContentType="application/x-ndjson")
    spec = replication.job_spec(job_id, report_bucket, key)
    already = False
    try:
        stepfunctions.start_execution(
            stateMachineArn=state_machine_arn, name=job_id, input=json.dumps(spec, sort_keys=True)
        )
    except ClientError as error:
        # The same name and input while the first run is open answers success; once it has
        # closed, ExecutionAlreadyExists (StartExecution API reference). Either way this batch
        # has its execution.
        if error.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
            raise
        already = True
    return Started(job_id, key, len(latest), len(events), already)


def handle_batch(
    event: Mapping[str, Any],
    replication: Replication,
    *,
    s3: Any,
    stepfunctions: Any,
    report_bucket: str,
    state_machine_arn: str,
    deletes: Callable[[], DeleteServices] | None = None,
    source: Callable[[], Any] | None = None,
    remaining_seconds: Callable[[], float] | None = None,
) -> dict[str, Any]:
    """The starter's work for one Lambda invocation; returns the partial batch response
    (`batchItemFailures`: the messages that were not S3 events for this replication, those of
    deletions that failed, and those of created keys not resolved: undecided, or not looked up
    within the invocation's time).

    Per key only the batch's newest event acts: creates go to the batch's one job, deletions
    (replications with deletes on; `deletes` makes their clients, only when there are some) to
    `apply_deletes` (starter_deletes.run_deletes). `source` makes a client for the
    replication's source, only when a created key has two forms to resolve (event_keys); a
    create the source cannot resolve fails alone, with the reason, and reaches the dead-letter
    queue like a message that is not an event. `remaining_seconds` is the invocation's time
    left (the Lambda context's); None sets no limit.

    A failure to write the manifest or to start the execution raises: the whole batch then
    returns to the queue and is tried again (the same messages make the same execution name).
    """
    records = list(event.get("Records") or [])

    def parse(record: Mapping[str, Any]) -> ObjectEvent:
        try:
            return parse_event(record["body"], replication, record["messageId"])
        except NotAnEvent as error:
            log.warning(
                "message %s is not an S3 Object Created event for replication %s: %s; it returns to "
                "the queue and goes to the dead-letter queue after maxReceiveCount receives",
                record["messageId"],
                replication.name,
                error,
            )
            raise

    events, failed = parse_records(records, parse)
    parsed = _without_marks(events, replication)
    newest = latest_per_key(parsed)
    _log_superseded(parsed, newest, replication)
    deletions = [(e.message_id, e.deletion) for e in newest if e.deletion is not None]
    if deletions:
        if deletes is None:  # a starter wired without its delete clients: never silent
            raise RuntimeError(
                f"replication {replication.name}: deletes are on but the starter has no delete clients"
            )
        failed += run_deletes(deletions, replication, deletes)
    # Every created key goes to the job, even one a newer delete of the batch follows: that
    # delete may have removed only an older version (or be a kept lifecycle expiry), and a
    # key truly gone is counted skipped by the copy (batches._vanished_since_event).
    creates, unresolved = resolve_creates(
        [e for e in parsed if e.deletion is None],
        replication,
        source,
        seconds_left=_less_reserve(remaining_seconds),
        receives=_receive_counts(records),
    )
    failed += unresolved
    if creates:
        started = start_batch(
            creates,
            replication,
            s3=s3,
            stepfunctions=stepfunctions,
            report_bucket=report_bucket,
            state_machine_arn=state_machine_arn,
        )
        log.info(
            "replication %s: %d events, %d keys -> job %s (%s)",
            replication.name,
            started.events,
            started.keys,
            started.job_id,
            "already started by an earlier delivery" if started.already_started else "started",
        )
    return {"batchItemFailures": [{"itemIdentifier": m} for m in failed]}


def parse_records(
    records: Sequence[Mapping[str, Any]], parse: Callable[[Mapping[str, Any]], ObjectEvent]
) -> tuple[list[ObjectEvent], list[str]]:
    """Each SQS record read alone: (the events read, the message ids of the records that were
    not), in the records' order. A record that fails, whatever the error, fails alone and is
    reported as a batch item failure by its message id, as Powertools' BatchProcessor reports
    one (its import, with asyncio's, cost the starter's init more than Ferry's own modules)."""
    events, failed = [], []
    for record in records:
        try:
            events.append(parse(record))
        except NotAnEvent:
            failed.append(str(record["messageId"]))  # `parse` said why
        except Exception:
            log.exception("message %s could not be read; it returns to the queue", record.get("messageId"))
            failed.append(str(record["messageId"]))
    return events, failed


def _less_reserve(remaining_seconds: Callable[[], float] | None) -> Callable[[], float] | None:
    """The seconds left for look-ups: the invocation's, less RESERVE_SECONDS."""
    if remaining_seconds is None:
        return None
    return lambda: remaining_seconds() - RESERVE_SECONDS


def _receive_counts(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many times SQS has delivered each message (ApproximateReceiveCount), by its id."""
    counts = {}
    for record in records:
        try:
            counts[str(record.get("messageId"))] = int(
                (record.get("attributes") or {}).get("ApproximateReceiveCount", 1)
            )
        except (TypeError, ValueError):
            counts[str(record.get("messageId"))] = 1
    return counts


def resolve_creates(
    creates: Sequence[ObjectEvent],
    replication: Replication,
    source: Callable[[], Any] | None,
    *,
    seconds_left: Callable[[], float] | None,
    receives: Mapping[str, int],
) -> tuple[list[ObjectEvent], list[str]]:
    """The creates with each key of two forms resolved against the source, and the message ids
    of those that were not: undecided or unreadable (logged with the reason; they reach the
    dead-letter queue after maxReceiveCount receives), or not looked up in `seconds_left()`
    (starter_lookups; logged once, delivered again). One look-up per key as the events spell
    it, with its newest event's ETag and size; keys delivered most often go first."""
    groups: dict[tuple[str, str], list[ObjectEvent]] = {}
    for event in creates:
        if len(event.key_forms) > 1:
            groups.setdefault((event.bucket, event.key), []).append(event)
    if not groups:
        return list(creates), []
    newest = {key: latest_per_key(events)[0] for key, events in groups.items()}
    order = sorted(groups, key=lambda k: -max(receives.get(e.message_id, 1) for e in groups[k]))
    try:
        client = _source(source, replication)
    except Exception as error:  # noqa: BLE001 - every key fails with it, each message reported
        run_failed: dict[tuple[str, str], BaseException] = dict.fromkeys(order, error)
        resolved: dict[tuple[str, str], ObjectEvent] = {}
        deferred: list[tuple[str, str]] = []
    else:
        run = run_lookups(order, lambda key: newest[key].resolve(lambda: client), seconds_left=seconds_left)
        resolved, run_failed, deferred = run.done, run.failed, run.deferred
    failed = [
        m for key, error in run_failed.items() for m in _log_unresolved(groups[key], replication, error)
    ]
    if deferred:
        failed += _log_deferred([e for key in deferred for e in groups[key]], len(deferred), replication)
    kept = []
    for event in creates:
        key = (event.bucket, event.key)
        if key not in groups:
            kept.append(event)
        elif key in resolved:
            found = resolved[key]
            kept.append(found if event is newest[key] else replace(event, resolved=found.resolved))
    return kept, failed


def _source(source: Callable[[], Any] | None, replication: Replication) -> Any:
    if source is None:  # a starter wired without its source client: never silent
        raise RuntimeError(f"replication {replication.name}: no source client to resolve event keys")
    return source()


def _log_unresolved(
    events: Sequence[ObjectEvent], replication: Replication, error: BaseException
) -> list[str]:
    """One line per message whose key could not be resolved; their ids."""
    for event in events:
        log.error(
            "message %s: replication %s: %s; it returns to the queue and goes to the dead-letter "
            "queue after maxReceiveCount receives",
            event.message_id,
            replication.name,
            error if isinstance(error, UndecidedKey) else f"{type(error).__name__}: {error}",
        )
    return [e.message_id for e in events]


def _log_deferred(events: Sequence[ObjectEvent], keys: int, replication: Replication) -> list[str]:
    """One line for the keys not looked up in this invocation's time; their messages' ids."""
    log.warning(
        "replication %s: %d keys with two spellings (%d messages) were not looked up within this "
        "invocation's time: their messages return to the queue and are read again after its "
        "visibility timeout, before newer ones",
        replication.name,
        keys,
        len(events),
    )
    return [e.message_id for e in events]


def _without_marks(events: Sequence[ObjectEvent], replication: Replication) -> list[ObjectEvent]:
    """The events but those of Ferry's own upload marks (a source that is itself a Ferry
    destination writes and deletes them): no object to copy or delete. Each one left out is
    logged, and its message is done with (not returned to the queue)."""
    marks, kept = replication.marks, []
    for event in events:
        if any(is_ferrys_own(form, marks) for form in (event.key_forms or (event.key,))):
            log.info(
                "replication %s: event left out: %s",
                replication.name,
                json.dumps(
                    {
                        "bucket": event.bucket,
                        "key": event.key,
                        "message_id": event.message_id,
                        "status": "left out",
                        "reason": "one of Ferry's own upload marks: never copied or deleted as an object",
                    },
                    sort_keys=True,
                ),
            )
            continue
        kept.append(event)
    return kept


def _log_superseded(
    events: Sequence[ObjectEvent], newest: Sequence[ObjectEvent], replication: Replication
) -> None:
    """One line per deletion that a newer event of its key replaced in this batch (a create
    older than a delete drops silently into the job's skip-existing, a delete older than a
    create must say why nothing was deleted)."""
    acting = {id(e) for e in newest}
    for event in events:
        if event.deletion is not None and id(event) not in acting:
            log.info(
                "replication %s: delete kept: %s",
                replication.name,
                json.dumps(
                    {
                        "bucket": event.bucket,
                        "key": event.key,
                        "sequencer": event.sequencer,
                        "message_id": event.message_id,
                        "status": "kept",
                        "reason": "a newer event for this key came in the same batch",
                    },
                    sort_keys=True,
                ),
            )
