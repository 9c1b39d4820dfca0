"""Copy a key's whole history: every version oldest first, each delete marker reproduced by a
DeleteObject at its place, so the destination's history holds the same contents in the same
order. What `ferry copy --all-versions` does for each key.

Version ids cannot be kept: S3 gives every version written its own. What is already there is
therefore found by content, not by id: the destination's history, oldest first, is matched
to the source's position by position (a delete marker to a delete marker; a version to a
version holding the same bytes, by the evidence engine/compare/comparison.py names: a comparable
checksum, or an MD5 ETag). The source's history from the first position the destination
lacks is copied; the destination's own versions are never touched. A destination history
that is not the start of the source's (another writer's version at some position, or more
versions than the source has) cannot be brought into the same order: the key fails with the
position and the reason, and nothing of it is written. Where the destination holds every
source version and more above them, the source's newest version is the one that fails: the
destination's current object is not the source's.

The destination needs nothing kept between runs (no ledger, no report): its history is the
record. Each result maps the source version to the destination version holding it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ferry.engine.compare.comparison import Sameness, compare_heads
from ferry.engine.proofs import checksums
from ferry.engine.proofs.checksums import Checksum, from_response
from ferry.engine.run.outcome import WOULD_COPY, WOULD_MARK
from ferry.engine.strategies.copier import Copier
from ferry.engine.strategies.streaming import READ_ERRORS
from ferry.errors import describe
from ferry.models import CopyResult, SourceObject, Status, Target
from ferry.s3.version_listing import History, Version

KEYS_AT_ONCE = 16  # keys whose histories are copied side by side (each one's in order)
READ_CHUNK = 1024 * 1024  # bytes of a source version read at a time to prove its copy
UNPROVED = "unproved"  # Sameness.evidence where nothing on either side could decide
DELETE_MARKER = "delete-marker"  # the strategy (and proof) named for a reproduced delete marker


@dataclass(frozen=True)
class Match:
    """How much of the source's history the destination already holds, position by position:
    `held` pairs (source version, destination version); `diverged` says why the rest cannot be
    added in order, or is None."""

    held: list[tuple[Version, Version]]
    diverged: str | None = None


def match_histories(
    source: History, destination: History, heads: Callable[[Version, Version], Sameness]
) -> Match:
    """The longest start of the source's history that the destination's history is."""
    held: list[tuple[Version, Version]] = []
    for position, theirs in enumerate(destination.versions, start=1):
        if position > len(source.versions):
            return Match(
                held,
                f"the destination holds {len(destination.versions)} versions, more than the source's {len(source.versions)}",
            )
        ours = source.versions[position - 1]
        if ours.delete_marker != theirs.delete_marker:
            what = "a delete marker" if theirs.delete_marker else f"version {theirs.version_id}"
            return Match(
                held, f"the destination's version {position} is {what}, where the source has {_kind(ours)}"
            )
        verdict = None if ours.delete_marker else heads(ours, theirs)
        if verdict is not None and not verdict.same:
            holds = "cannot be proved to hold" if verdict.evidence == UNPROVED else "does not hold"
            return Match(
                held,
                f"the destination's version {position} ({theirs.version_id}) {holds} the source's "
                f"version {ours.version_id} ({verdict.detail})",
            )
        held.append((ours, theirs))
    return Match(held)


def same_bytes(
    source_client: Any, dest_client: Any, source_bucket: str, dest_bucket: str
) -> Callable[[Version, Version], Sameness]:
    """The rule a version is matched by: sizes equal and an equal MD5 ETag from the listings,
    or else the two HEADs' strongest shared evidence (a size alone proves nothing here), or
    else the destination's own checksum over the source version's bytes."""

    def same(ours: Version, theirs: Version) -> Sameness:
        if ours.size != theirs.size:
            return Sameness(False, "size", f"sizes {ours.size} and {theirs.size}")
        if ours.etag and ours.etag == theirs.etag:
            return Sameness(True, "etag", f"ETag {ours.etag} on both")
        head = dict(VersionId=ours.version_id, ChecksumMode="ENABLED")
        a = source_client.head_object(Bucket=source_bucket, Key=ours.key, **head)
        b = dest_client.head_object(
            Bucket=dest_bucket, Key=theirs.key, VersionId=theirs.version_id, ChecksumMode="ENABLED"
        )
        verdict = compare_heads(a, b)
        if verdict.evidence != "size":
            return verdict
        return _proved_by_reading(source_client, source_bucket, ours, from_response(b))

    return same


def _proved_by_reading(client: Any, bucket: str, ours: Version, theirs: Checksum | None) -> Sameness:
    """Neither HEAD carries evidence the other's can be compared with: typically an SSE-KMS
    or SSE-C version written before S3 stored checksums (its ETag is no MD5 of its bytes),
    whose copy carries the checksum Ferry had S3 store. That checksum is computed over the
    source version's bytes, read once, a chunk at a time: the copy then proves itself as it
    proved itself when it was written. A destination version with no full-object checksum
    (another writer's, or a composite one) leaves nothing to prove it by."""
    if theirs is None or not theirs.is_full_object:
        return Sameness(
            False,
            UNPROVED,
            "same size, but neither side carries a checksum or MD5 ETag the other can be compared with",
        )
    running = checksums.Running(theirs.algorithm)
    body = client.get_object(Bucket=bucket, Key=ours.key, VersionId=ours.version_id)["Body"]
    try:
        for chunk in iter(lambda: body.read(READ_CHUNK), b""):
            running.update(chunk)
    finally:
        body.close()
    value, name = running.value(), theirs.algorithm.lower()
    if value == theirs.value:
        return Sameness(True, "checksum", f"{name} {value} over the source's bytes and on the copy")
    return Sameness(False, "checksum", f"{name} {value} over the source's bytes, {theirs.value} on the copy")


def copy_history(
    copier: Copier,
    source: History,
    source_bucket: str,
    target: Target,
    destination: History,
    *,
    dry_run: bool,
    deadline: float | None = None,
) -> Iterator[CopyResult]:
    """One result per source version (and delete marker), oldest first. With `deadline` (a
    pipeline pass's), a version whose copy reaches it is handed over (`handed_over`) from its
    checkpoint, and every newer version with it."""
    ctx = copier.ctx
    try:
        match = match_histories(
            source, destination, same_bytes(ctx.source_client, ctx.dest_client, source_bucket, target.bucket)
        )
    except (ClientError, BotoCoreError, *READ_ERRORS) as error:  # a HEAD, or a version read to prove its copy
        reason = f"cannot compare the histories: {describe(error, side='source', action='s3:GetObjectVersion', bucket=source_bucket, key=source.key)}"
        yield from _all_failed(source.versions, source_bucket, target, reason)
        return
    rest = source.versions[len(match.held) :]
    on_top = bool(match.diverged) and not rest  # every version held, and more above them
    for position, (ours, theirs) in enumerate(match.held, start=1):
        if on_top and position == len(match.held):
            yield _failed_under_newer(ours, theirs, str(match.diverged), source_bucket, target)
            return
        yield _result(
            ours,
            source_bucket,
            target,
            Status.SKIPPED,
            f"already there as version {theirs.version_id}",
            theirs.version_id,
        )
    if match.diverged:
        reason = f"not copied: {match.diverged}; versions cannot be put in the source's order after it"
        yield from _all_failed(rest, source_bucket, target, reason)
        return
    for index, version in enumerate(rest):
        result = _one(copier, version, source_bucket, target, dry_run, deadline)
        yield result
        if not _lets_newer_follow(result, dry_run):
            yield from _held_back(rest[index + 1 :], version, result, source_bucket, target)
            return


def _failed_under_newer(
    ours: Version, theirs: Version, why: str, source_bucket: str, target: Target
) -> CopyResult:
    """The source's newest version, held in the destination's history with more above it: the
    destination's current object is not the source's (as `ferry check` finds), and nothing
    written on top would put the history back in the source's order. It fails, so the key
    does, rather than reading as already there."""
    reason = (
        f"not copied: held as version {theirs.version_id}, but {why}: the destination's newer "
        "versions are not the source's, and nothing written on top would put its history in the "
        "source's order"
    )
    return _result(ours, source_bucket, target, Status.FAILED, reason, theirs.version_id)


def _lets_newer_follow(result: CopyResult, dry_run: bool) -> bool:
    """A newer version may be written only once this one is: a version left behind (failed,
    archived and needing a restore, restoring, handed over at a deadline) would otherwise
    find newer versions above it in the destination's history, out of the source's order
    for good. A dry run writes nothing: a version it would copy (or mark) lets the next follow,
    one it would have to restore first does not."""
    if result.status == Status.COPIED:
        return True
    return (
        dry_run
        and result.status == Status.PENDING
        and str(result.reason).startswith((WOULD_COPY, WOULD_MARK))
    )


def _held_back(
    versions: Sequence[Version], older: Version, blocking: CopyResult, source_bucket: str, target: Target
) -> Iterator[CopyResult]:
    """The newer versions behind one not copied: in its state (failed, skipped or pending,
    and handed over with it), each saying which older version holds it back and why."""
    if blocking.status == Status.FAILED:
        reason = f"not copied: the older version {older.version_id} failed first; run again"
    else:
        why = blocking.reason or str(blocking.status)
        reason = f"held back: the older version {older.version_id} is not copied yet ({why}); run again then"
    for version in versions:
        result = _result(version, source_bucket, target, blocking.status, reason)
        result.handed_over = blocking.handed_over
        yield result


def _one(
    copier: Copier,
    version: Version,
    source_bucket: str,
    target: Target,
    dry_run: bool,
    deadline: float | None,
) -> CopyResult:
    if version.delete_marker:
        if dry_run:
            return _result(version, source_bucket, target, Status.PENDING, WOULD_MARK)
        return _delete_marker(copier.ctx.dest_client, version, source_bucket, target)
    obj = SourceObject(
        bucket=source_bucket,
        key=version.key,
        version_id=version.version_id,
        size=version.size,
        etag=version.etag,
        storage_class=version.storage_class,
        last_modified=version.last_modified,
    )
    result = copier.copy(obj, target, deadline=deadline)
    result.source_version_id = version.version_id
    return result


def _delete_marker(client: Any, version: Version, source_bucket: str, target: Target) -> CopyResult:
    """A DeleteObject without a VersionId: on a versioned bucket, a delete marker on top."""
    try:
        answer = client.delete_object(Bucket=target.bucket, Key=target.key)
    except (ClientError, BotoCoreError) as error:
        why = describe(
            error, side="destination", action="s3:DeleteObject", bucket=target.bucket, key=target.key
        )
        return _result(version, source_bucket, target, Status.FAILED, f"delete marker not added: {why}")
    if not answer.get("DeleteMarker"):
        return _result(
            version,
            source_bucket,
            target,
            Status.FAILED,
            "the destination added no delete marker: is versioning still enabled?",
        )
    result = _result(version, source_bucket, target, Status.COPIED, None, answer.get("VersionId"))
    result.strategy = result.verified_by = DELETE_MARKER
    return result


def _all_failed(
    versions: Sequence[Version], source_bucket: str, target: Target, reason: str
) -> Iterator[CopyResult]:
    for version in versions:
        yield _result(version, source_bucket, target, Status.FAILED, reason)


def _result(
    version: Version,
    source_bucket: str,
    target: Target,
    status: Status,
    reason: str | None,
    dest_version: str | None = None,
) -> CopyResult:
    return CopyResult(
        source_key=version.key,
        dest_key=target.key,
        status=status,
        reason=reason,
        strategy=DELETE_MARKER if version.delete_marker else None,
        version_id=dest_version,
        source_bucket=source_bucket,
        dest_bucket=target.bucket,
        source_version_id=version.version_id,
        bytes=(version.size or 0) if status == Status.SKIPPED else 0,
    )


def _kind(version: Version) -> str:
    return "a delete marker" if version.delete_marker else f"version {version.version_id}"
