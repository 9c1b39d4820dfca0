"""Deletes, for a replication that enables them: remove a destination key only when it still
holds what Ferry copied from the source key that was deleted. Off by default (README,
"Deletes"): a delete at the source, mistaken or malicious, would otherwise propagate.

Why the destination's own state is not enough, and what proves it instead. An EventBridge
"Object Deleted" event names the key, a version id and a sequencer, never the deleted
object's ETag (the S3 user guide's ev-events.html example carries the empty object's MD5,
d41d8cd9..., the delete marker's). So the proof comes from one of two places, tried in order:

1. the copy record (`CopyRecords`, one DynamoDB item per destination key, written by the
   copy path of a replication job with deletes on: the destination's ETag and version id
   as Ferry left them). The destination's HEAD must still show that ETag (and, on a
   versioned destination, that version): then nobody wrote the key since Ferry did. Works
   for unversioned sources, which is most S3-compatible stores.
2. the source's own history, when the delete only created a delete marker: the newest
   version under it is still readable. Its HEAD is compared with the destination's HEAD by
   the rule skip-existing uses (same size and the same checksum, or an ETag that proves
   the bytes: `skip.identical_reason`). Covers objects copied before deletes were enabled.

Neither proves it: the key is kept, with the reason. Which key: an event's key may be spelled
as written or URL-encoded (event_keys). With two forms, the deletion acts only on a form
proved to be the one it names (`_exact_form`); if none is, and some form would be deleted
under its reading, the deletion fails with the reason: nothing is deleted on a guess. Before
any of that, the source key is
HEADed: if it exists (re-created after the delete, an undone delete marker, or only a
noncurrent version was deleted) nothing is deleted. A delete older than the event of the
copy the destination holds (sequencers compared right-padded with '0') is ignored.

The delete itself is the one conditional delete (ferry.s3.deletes): `DeleteObject` with
`If-Match: <the ETag just checked>`, never with a `VersionId`: a versioned destination gets a delete marker and keeps every version. S3
general purpose buckets honour If-Match on DeleteObject (user guide, conditional-deletes.html:
412 when the ETag differs, 404 when the key went meanwhile, 409 on a concurrent write);
a server that refuses the header gets the same HEAD-checked delete without it, and then a
write between our HEAD and our DELETE would be lost (a window of one round trip, said in
the outcome's note).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from ferry.counts import Counts
from ferry.engine.compare.skip import identical_reason
from ferry.engine.proofs.checksums import from_response
from ferry.engine.proofs.source import inspect
from ferry.errors import FerryError, describe, error_code, is_access_denied
from ferry.listed_items import expand
from ferry.models import Compare, CopyResult, SourceObject, Status, Target
from ferry.pipeline.ledger.copy_records import CopyRecord, CopyRecords
from ferry.pipeline.replication.event_keys import EVENT_KEY_FIELD, key_forms
from ferry.s3.deletes import CONDITION_FAILED, delete_if_match
from ferry.s3.listing import listed_entry

log = logging.getLogger(__name__)

DELETE_MARKER_CREATED = "Delete Marker Created"
PERMANENTLY_DELETED = "Permanently Deleted"
OBJECT_DELETED = "Object Deleted"
LIFECYCLE_EXPIRATION = "Lifecycle Expiration"
_ABSENT_CODES = {"404", "NoSuchKey", "NotFound", "NoSuchVersion"}
_UNSUPPORTED_CODES = {"NotImplemented", "501", "InvalidArgument", "InvalidRequest"}


class DeleteStatus(StrEnum):
    DELETED = "deleted"
    KEPT = "kept"
    FAILED = "failed"


# -- what the starter hands over --------------------------------------------------------------


@dataclass(frozen=True)
class Deletion:
    """One "Object Deleted" event for a source key, spelled as the event spells it (event_keys).
    `version_id` is the delete marker's (Delete Marker Created) or the deleted version's
    (Permanently Deleted, versioned bucket)."""

    bucket: str
    key: str
    sequencer: str | None = None
    version_id: str | None = None
    deletion_type: str = PERMANENTLY_DELETED
    time: str | None = None
    reason: str | None = None  # "DeleteObject", "DeleteObjects" or "Lifecycle Expiration"

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> Deletion:
        """From an EventBridge S3 event (user guide, ev-events.html, "Object deleted"). The key
        is kept as delivered: which key it names is decided in apply_deletes."""
        if event.get("detail-type") != OBJECT_DELETED:
            raise FerryError(f"not an Object Deleted event: detail-type {event.get('detail-type')!r}")
        detail = event.get("detail") or {}
        obj = detail.get("object") or {}
        bucket = (detail.get("bucket") or {}).get("name")
        if not bucket or not obj.get("key"):
            raise FerryError("Object Deleted event without detail.bucket.name or detail.object.key")
        return cls(
            bucket=bucket,
            key=str(obj["key"]),
            sequencer=obj.get("sequencer"),
            version_id=obj.get("version-id"),
            deletion_type=detail.get("deletion-type") or PERMANENTLY_DELETED,
            time=event.get("time"),
            reason=detail.get("reason"),
        )


class Side(Protocol):
    bucket: str
    prefix: str


class Replication(Protocol):
    """What `apply_deletes` needs of a replication (settings' Replication has these)."""

    name: str
    deletes: bool
    source: Side
    destination: Side


@dataclass(frozen=True)
class Route:
    """A replication's name, its two locations and its deletes switch (for callers and tests
    without the settings object)."""

    name: str
    source: Any
    destination: Any
    deletes: bool = False


# -- what comes back --------------------------------------------------------------------------


@dataclass
class DeleteOutcome:
    """What happened to one deletion: deleted, kept (with why) or failed (with why)."""

    source_bucket: str
    source_key: str
    dest_bucket: str | None
    dest_key: str | None
    status: DeleteStatus
    reason: str | None = None
    proof: str | None = None  # what proved the destination held Ferry's copy
    note: str | None = None
    sequencer: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {
            "bucket": self.source_bucket,
            "key": self.source_key,
            "dest_bucket": self.dest_bucket,
            "dest_key": self.dest_key,
            "status": str(self.status),
            "reason": self.reason,
            "proof": self.proof,
            "note": self.note,
            "sequencer": self.sequencer,
        }
        return {k: v for k, v in data.items() if v is not None}


@dataclass
class DeleteCounts(Counts):
    """Counts in the vocabulary of every other count (counts.py), plus `deleted`: each
    deletion in exactly one of deleted, skipped (kept, with a reason) or failed."""

    deleted: int = 0

    def add(self, outcome: DeleteOutcome) -> None:
        if outcome.status == DeleteStatus.DELETED:
            self.deleted += 1
        elif outcome.status == DeleteStatus.KEPT:
            self.skipped += 1
        else:
            self.failed += 1

    @property
    def total(self) -> int:
        return super().total + self.deleted

    def counts(self) -> dict[str, int]:
        return {**super().counts(), "deleted": self.deleted}

    @classmethod
    def of(cls, outcomes: Iterable[DeleteOutcome]) -> DeleteCounts:
        counts = cls()
        for outcome in outcomes:
            counts.add(outcome)
        return counts


# -- sequencers -------------------------------------------------------------------------------


def sequencer_newer(a: str | None, b: str | None) -> bool:
    """True when sequencer `a` is later than `b`. S3 sequencers are hex strings of varying
    length: right-pad the shorter with '0', then compare (aws-limits.md; user guide,
    notification-content-structure.html). Unknown sequencers are never newer."""
    if not a or not b:
        return False
    width = max(len(a), len(b))
    return a.upper().ljust(width, "0") > b.upper().ljust(width, "0")


def latest_per_key(deletions: Sequence[Deletion]) -> tuple[list[Deletion], list[Deletion]]:
    """(the newest deletion of each key, the others): a redelivered or older event for a key
    adds nothing to its newest one."""
    newest: dict[tuple[str, str], Deletion] = {}
    for deletion in deletions:
        key = (deletion.bucket, deletion.key)
        current = newest.get(key)
        if current is None or sequencer_newer(deletion.sequencer, current.sequencer):
            newest[key] = deletion
    chosen = {id(d) for d in newest.values()}
    return [d for d in deletions if id(d) in chosen], [d for d in deletions if id(d) not in chosen]


# -- the work ---------------------------------------------------------------------------------


def apply_deletes(
    deletions: Sequence[Deletion],
    *,
    source_client: Any,
    destination_client: Any,
    record_store: CopyRecords,
    replication: Replication,
) -> list[DeleteOutcome]:
    """Delete the destination copy of each deleted source key that provably still holds
    Ferry's copy; one outcome per deletion, in order (`DeleteCounts.of` sums them).

    Never raises for one key's fault: an S3 or DynamoDB error fails that deletion, with the
    reason, and the others go on. Deletes are sent without a VersionId."""
    outcomes: dict[int, DeleteOutcome] = {}
    newest, superseded = latest_per_key(deletions)
    for deletion in superseded:
        outcomes[id(deletion)] = _outcome(
            deletion,
            _target(deletion, replication),
            DeleteStatus.KEPT,
            "a newer event for this key came in the same batch",
        )
    for event in newest:
        deletion, target = event, _target(event, replication)
        try:
            deletion, target, undecided = _exact_form(
                event, replication, source_client, destination_client, record_store
            )
            outcome = undecided or _apply_one(
                deletion, target, source_client, destination_client, record_store, replication
            )
        except (ClientError, BotoCoreError, FerryError) as error:
            outcome = _outcome(deletion, target, DeleteStatus.FAILED, _reason(error, deletion, target))
        except Exception as error:  # nothing lost: an unexpected fault fails this deletion only
            log.exception(
                "unexpected %s deleting for s3://%s/%s", type(error).__name__, deletion.bucket, deletion.key
            )
            outcome = _outcome(
                deletion,
                target,
                DeleteStatus.FAILED,
                f"not deleted: unexpected {type(error).__name__}: {error}",
            )
        log.info(
            "delete s3://%s/%s: %s%s",
            deletion.bucket,
            deletion.key,
            outcome.status,
            f" ({outcome.reason})" if outcome.reason else "",
        )
        outcomes[id(event)] = outcome
    return [outcomes[id(d)] for d in deletions]


def _apply_one(
    deletion: Deletion,
    target: Target | None,
    source_client: Any,
    destination_client: Any,
    records: CopyRecords,
    replication: Replication,
) -> DeleteOutcome:
    def kept(reason: str) -> DeleteOutcome:
        return _outcome(deletion, target, DeleteStatus.KEPT, reason)

    if not replication.deletes:
        return kept(f'deletes are off for replication {replication.name!r} (set "deletes": true)')
    if target is None:
        return kept(f"s3://{deletion.bucket}/{deletion.key} is outside replication {replication.name!r}")
    if deletion.reason == LIFECYCLE_EXPIRATION:
        return kept(
            "the source's lifecycle rule expired it: expirations are not replicated (as in S3 "
            "Replication); give the destination its own lifecycle rule"
        )
    if _head(source_client, deletion.bucket, deletion.key, "source") is not None:
        return kept("the source key exists again (re-created, or only an older version was deleted)")
    head = _head(destination_client, target.bucket, target.key, "destination")
    if head is None:
        return kept("the destination is already absent")
    etag = head.get("ETag", "").strip('"')
    record = records.get(target.bucket, target.key)
    proof, why_not = _proved_by_record(record, head, deletion)
    if proof is None and why_not is None:  # no record: the source's history may prove it
        proof, why_not = _proved_by_source_version(deletion, target, source_client, destination_client)
    if proof is None:
        return kept(why_not or "cannot prove the destination holds Ferry's copy")
    note = _conditional_delete(destination_client, target, etag)
    if note == "changed":
        return kept("the destination changed between the check and the delete (If-Match failed)")
    if note == "gone":
        return kept("the destination is already absent")
    if record is not None:
        records.forget(record)
    return _outcome(deletion, target, DeleteStatus.DELETED, None, proof=proof, note=note)


def _exact_form(
    deletion: Deletion,
    replication: Replication,
    source_client: Any,
    destination_client: Any,
    records: CopyRecords,
) -> tuple[Deletion, Target | None, DeleteOutcome | None]:
    """The deletion on the one key it names, or an outcome saying why no key is chosen.

    One form under the source prefix: that one. Two: a form is proved the event's by
    - the delete marker's version id, found among that form's delete markers at the source
      (a versioned source), or
    - the copy record at that form's destination, written for a create event that spelled
      the key exactly as this deletion does (S3 spells one key one way in its events,
      whichever way that is).
    Exactly one proved form: the deletion acts on it. Otherwise, if some form is absent at
    the source while its destination exists (a delete under that reading could remove it),
    the deletion FAILS with the reason: a guess could delete the wrong copy. If no form is,
    nothing would be deleted under any reading: kept."""
    if replication.deletes and deletion.bucket == replication.source.bucket:
        forms = key_forms(deletion.key, replication.source.prefix or "")
    else:
        forms = ()
    if len(forms) < 2:
        exact = replace(deletion, key=forms[0]) if forms else deletion
        return exact, _target(exact, replication), None
    proved = [form for form in forms if _proves(form, deletion, replication, source_client, records)]
    if len(proved) == 1:
        exact = replace(deletion, key=proved[0])
        return exact, _target(exact, replication), None
    could_act = []
    for form in forms:
        target = _target(replace(deletion, key=form), replication)
        if (
            target is not None
            and _head(source_client, deletion.bucket, form, "source") is None
            and _head(destination_client, target.bucket, target.key, "destination") is not None
        ):
            could_act.append(f"s3://{target.bucket}/{target.key}")
    target = _target(replace(deletion, key=forms[0]), replication)
    spelled = f"the event's key {deletion.key!r} may name {' or '.join(repr(f) for f in forms)}"
    if not could_act:
        reason = f"{spelled}; under either reading the source or no destination exists: nothing to delete"
        return deletion, target, _outcome(deletion, target, DeleteStatus.KEPT, reason)
    reason = (
        f"not deleted: {spelled} (EventBridge does not document whether it URL-encodes keys), "
        f"and neither a delete marker nor a copy record proves which; {' and '.join(could_act)} "
        "would be deleted under its reading: delete it yourself if it should go, then delete this "
        "message from the dead-letter queue"
    )
    return deletion, target, _outcome(deletion, target, DeleteStatus.FAILED, reason)


def _proves(
    form: str, deletion: Deletion, replication: Replication, source_client: Any, records: CopyRecords
) -> bool:
    """Does the source or the copy record show that `deletion` names `form` (_exact_form)?"""
    if (
        deletion.deletion_type == DELETE_MARKER_CREATED
        and deletion.version_id
        and _has_delete_marker(source_client, deletion.bucket, form, deletion.version_id)
    ):
        return True
    target = _target(replace(deletion, key=form), replication)
    record = records.get(target.bucket, target.key) if target else None
    return record is not None and record.event_key == deletion.key


def _has_delete_marker(client: Any, bucket: str, key: str, version_id: str) -> bool:
    try:
        page = client.list_object_versions(Bucket=bucket, Prefix=key, MaxKeys=100)
    except ClientError as error:
        if error_code(error) in _UNSUPPORTED_CODES:  # an unversioned store without the API
            return False
        raise
    return any(
        m.get("Key") == key and m.get("VersionId") == version_id for m in page.get("DeleteMarkers", [])
    )


def _proved_by_record(
    record: CopyRecord | None, head: Mapping[str, Any], deletion: Deletion
) -> tuple[str | None, str | None]:
    """(proof, None) when the destination is still what the record says Ferry wrote; (None,
    why) when it is not; (None, None) when there is no record."""
    if record is None:
        return None, None
    if sequencer_newer(record.sequencer, deletion.sequencer):
        return None, (
            f"the destination holds a copy of a newer source object (copied for sequencer "
            f"{record.sequencer}, the delete's is {deletion.sequencer})"
        )
    etag = head.get("ETag", "").strip('"')
    version = head.get("VersionId")
    if etag != record.dest_etag or int(head.get("ContentLength", -1)) != record.size:
        return None, (
            f"the destination was overwritten since Ferry copied it (ETag {etag}, Ferry wrote "
            f"{record.dest_etag}): someone else's object is kept"
        )
    if record.dest_version_id and version and version != record.dest_version_id:
        return None, (
            f"the destination's current version {version} is not the one Ferry wrote "
            f"({record.dest_version_id}): someone else's object is kept"
        )
    return f"copy record (ETag {etag})", None


def _proved_by_source_version(
    deletion: Deletion, target: Target, source_client: Any, destination_client: Any
) -> tuple[str | None, str | None]:
    """A delete marker hides the source's last version: if the destination is identical to
    it, the destination holds what the deleted source held."""
    cannot = "cannot prove the destination holds Ferry's copy (no copy record"
    if deletion.deletion_type != DELETE_MARKER_CREATED:
        return None, f"{cannot}, and the source object was permanently deleted)"
    version_id = _newest_version(source_client, deletion.bucket, deletion.key)
    if version_id is None:
        return None, f"{cannot}, and no version of the source key is left)"
    info = inspect(source_client, SourceObject(deletion.bucket, deletion.key, version_id=version_id))
    same = identical_reason(destination_client, info, target, Compare.CHECKSUM)
    if same is None:
        return None, (f"{cannot}; the destination differs from the source's last version {version_id})")
    return f"source version {version_id}: {same}", None


def _newest_version(client: Any, bucket: str, key: str) -> str | None:
    """The newest version of `key` that is not a delete marker (what the marker hides)."""
    paginator = client.get_paginator("list_object_versions")
    newest: tuple[Any, str] | None = None
    for page in paginator.paginate(Bucket=bucket, Prefix=key):
        for version in page.get("Versions", []):
            if version["Key"] != key:
                continue
            stamp = version.get("LastModified")
            if newest is None or (stamp is not None and stamp > newest[0]):
                newest = (stamp, version["VersionId"])
        keys = [v["Key"] for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
        if keys and max(keys) > key:  # listed in key order: past this key, nothing more of it
            break
    return newest[1] if newest else None


def _conditional_delete(client: Any, target: Target, etag: str) -> str | None:
    """The one conditional delete (ferry.s3.deletes). Returns None, "changed" (412), "gone"
    (404), or a note when the server refused the condition and the delete went without it."""
    try:
        _, refused = delete_if_match(client, target.bucket, target.key, etag)
    except ClientError as error:
        code = error_code(error)
        if code in CONDITION_FAILED:
            return "changed"
        if code in _ABSENT_CODES:
            return "gone"
        raise
    if not refused:
        return None
    return (
        "the server refused If-Match on DeleteObject: deleted after a HEAD, so a write in "
        "between the two would have been lost"
    )


def _head(client: Any, bucket: str, key: str, side: str) -> dict[str, Any] | None:
    """The key's HEAD, or None when it is absent (a 404, or a 403 that a listing explains)."""
    try:
        return client.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")  # type: ignore[no-any-return]
    except ClientError as error:
        if error_code(error) in _ABSENT_CODES:
            return None
        if is_access_denied(error) and _listed_absent(client, bucket, key):
            return None
        raise FerryError(
            describe(error, side=side, action="s3:GetObject (HEAD)", bucket=bucket, key=key)
        ) from error


def _listed_absent(client: Any, bucket: str, key: str) -> bool:
    """After a 403 HEAD: does a listing with the key as its prefix show the key absent
    (listing.listed_entry says why a listing can when a HEAD cannot)?"""
    try:
        return listed_entry(client, bucket, key) is None
    except (ClientError, BotoCoreError):
        return False


def _target(deletion: Deletion, replication: Replication) -> Target | None:
    source, destination = replication.source, replication.destination
    prefix = source.prefix or ""
    if deletion.bucket != source.bucket or not deletion.key.startswith(prefix):
        return None
    return Target(destination.bucket, (destination.prefix or "") + deletion.key[len(prefix) :])


def _outcome(
    deletion: Deletion,
    target: Target | None,
    status: DeleteStatus,
    reason: str | None,
    *,
    proof: str | None = None,
    note: str | None = None,
) -> DeleteOutcome:
    return DeleteOutcome(
        source_bucket=deletion.bucket,
        source_key=deletion.key,
        dest_bucket=target.bucket if target else None,
        dest_key=target.key if target else None,
        status=status,
        reason=reason,
        proof=proof,
        note=note,
        sequencer=deletion.sequencer,
    )


def _reason(error: BaseException, deletion: Deletion, target: Target | None) -> str:
    """One sentence naming the key and the server's answer; nothing was deleted."""
    where = f"s3://{target.bucket}/{target.key}" if target else f"s3://{deletion.bucket}/{deletion.key}"
    if isinstance(error, FerryError):
        return f"not deleted: {error}"
    if isinstance(error, ClientError):
        message = error.response.get("Error", {}).get("Message", "")
        return f"not deleted: {error_code(error)} checking or deleting {where}" + (
            f": {message}" if message else ""
        )
    return f"not deleted: {type(error).__name__} checking or deleting {where}: {error}"


# -- the copy side ----------------------------------------------------------------------------


def record_copies(
    copies: Iterable[tuple[Mapping[str, Any], CopyResult]],
    *,
    destination_client: Any,
    record_store: CopyRecords,
    replication: str,
    job_id: str,
) -> int:
    """Write a copy record for each object this replication job copied (status copied), so a
    later delete can prove the destination still holds Ferry's copy. Returns how many were
    written. A copy whose destination cannot be read back as Ferry wrote it gets no record
    (a later delete of it is then kept: safe, never wrong)."""
    written = 0
    for item, result in copies:
        if result.status != Status.COPIED or not result.dest_bucket:
            continue
        record = _record_of(item, result, destination_client, replication, job_id)
        if record is None:
            continue
        try:
            record_store.put(record)
        except (ClientError, BotoCoreError) as error:  # the copy stands; its delete will be kept
            log.warning("no copy record for s3://%s/%s: %s", record.dest_bucket, record.dest_key, error)
            continue
        written += 1
    return written


def _record_of(
    item: Mapping[str, Any], result: CopyResult, client: Any, replication: str, job_id: str
) -> CopyRecord | None:
    """HEAD the version Ferry wrote (by version id where the destination keeps versions, so
    a later writer cannot be mistaken for Ferry). Without a version id, the size and the
    checksum Ferry verified must match, or no record is written."""
    args = {"VersionId": result.version_id} if result.version_id and result.version_id != "null" else {}
    try:
        head = client.head_object(
            Bucket=result.dest_bucket, Key=result.dest_key, ChecksumMode="ENABLED", **args
        )
    except (ClientError, BotoCoreError) as error:
        log.warning("no copy record for s3://%s/%s: %s", result.dest_bucket, result.dest_key, error)
        return None
    checksum = from_response(head)
    if int(head.get("ContentLength", -1)) != result.bytes or (
        result.checksum and checksum is not None and str(checksum) != result.checksum
    ):
        log.warning(
            "no copy record for s3://%s/%s: it changed right after the copy",
            result.dest_bucket,
            result.dest_key,
        )
        return None
    fields = expand(item)  # a listed item carries its ETag as "e" (ferry.listed_items)
    etag = fields.get("etag") or fields.get("Etag") or fields.get("ETag")
    return CopyRecord(
        dest_bucket=result.dest_bucket or "",
        dest_key=result.dest_key,
        dest_etag=head.get("ETag", "").strip('"'),
        size=result.bytes,
        source_bucket=result.source_bucket or "",
        source_key=result.source_key,
        dest_version_id=head.get("VersionId") if args else None,
        source_etag=str(etag).strip('"') if etag else None,
        sequencer=item.get("sequencer"),
        replication=replication,
        job_id=job_id,
        event_key=item.get(EVENT_KEY_FIELD),
    )
