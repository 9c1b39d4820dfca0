"""What `ferry sync --delete` removes from the destination, and how: the objects the source
no longer has, found by walking the two listings side by side (engine/compare/side_listing.py), and
deleted one at a time with the care replicated deletes take (pipeline/replication/deletes.py).

- Only keys the destination's own listing showed under its prefix, minus Ferry's upload marks,
  are candidates; each is checked against the prefix and the marks again right before its
  delete, so no key outside them is ever sent.
- Each delete is the one conditional delete (ferry.s3.deletes) on the ETag the listing showed:
  an object rewritten since the listing is kept (412), and on a versioned bucket the delete
  leaves a delete marker over the versions, which stay. A server that refuses the condition
  gets the delete without it, said in the result's note (a write between the listing and the
  delete would then be lost). Some servers accept the header and ignore it (MinIO): there the
  listing's word is all there is.
- A source that lists no object at all is no reason to empty the destination: find_extras
  says so, and the caller refuses (a mistyped SRC lists nothing).
- Either side may be a local folder (local_side.py). What a local source names but does not
  copy (a symbolic link not followed, a special file) still holds its name: the destination's
  object under it is kept. A key under a source folder that could not be read is never an
  extra. At a local destination only regular files are candidates, and they are deleted by
  local_prune.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ferry.engine.compare.side_listing import Entry, Side, admits, side_by_side
from ferry.errors import describe, error_code
from ferry.filters import is_ferrys_own
from ferry.s3.deletes import CONDITION_FAILED, delete_if_match

_ABSENT = {"404", "NoSuchKey", "NotFound"}


@dataclass(frozen=True)
class Extra:
    """A destination object the source does not have, as the destination's listing showed it
    (`bucket` None for a file in a local folder, `key` then its path)."""

    bucket: str | None
    key: str
    etag: str | None
    size: int | None
    relative_key: str = ""
    mtime_ns: int | None = None

    @property
    def url(self) -> str:
        return self.key if self.bucket is None else f"s3://{self.bucket}/{self.key}"


@dataclass
class Extras:
    """The walk's findings: the objects to delete, and how many objects the source listed
    at all (before the filters)."""

    extras: list[Extra] = field(default_factory=list)
    source_objects: int = 0


@dataclass
class DeleteResult:
    """What happened to one extra: deleted, skipped (kept, with why), failed or pending."""

    bucket: str | None
    key: str
    status: str
    reason: str | None = None
    delete_marker_version_id: str | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {
            "action": "delete",
            "key": self.key,
            "dest_bucket": self.bucket,
            "status": self.status,
            "reason": self.reason,
            "delete_marker_version_id": self.delete_marker_version_id,
            "note": self.note,
        }
        return {k: v for k, v in data.items() if v is not None}


def find_extras(source: Side, destination: Side) -> Extras:
    """Every destination object (the filters taking it) whose relative key the source lacks.
    A listing that fails or comes out of order raises: nothing is to be deleted then."""
    found = Extras()

    def counted() -> Iterator[Entry]:
        for entry in source.all_entries():
            found.source_objects += 1
            if admits(source.filters, entry):
                yield entry

    for _, ours, theirs in side_by_side(counted(), destination.entries()):
        if ours is None and theirs is not None and theirs.problem is None:
            found.extras.append(
                Extra(
                    destination.bucket,
                    theirs.key,
                    theirs.etag,
                    theirs.size,
                    relative_key=theirs.relative_key,
                    mtime_ns=theirs.mtime_ns,
                )
            )
    return found


def delete_extras(
    client: Any, extras: Sequence[Extra], *, prefix: str, marks: Sequence[str], threads: int = 16
) -> list[DeleteResult]:
    """Delete each extra (see the module's rules); one result each, in order. Never raises for
    one object's fault."""
    if not extras:
        return []
    with ThreadPoolExecutor(min(threads, len(extras)), thread_name_prefix="ferry-delete") as pool:
        return list(pool.map(lambda extra: delete_extra(client, extra, prefix, marks), extras))


def delete_extra(client: Any, extra: Extra, prefix: str, marks: Sequence[str]) -> DeleteResult:
    """One conditional delete, inside the prefix and outside the marks, or a reason why not."""
    assert extra.bucket is not None, "a local file is deleted by local_prune"
    if not extra.key.startswith(prefix) or is_ferrys_own(extra.key, marks):
        return DeleteResult(
            extra.bucket, extra.key, "failed", f"not deleted: outside {prefix!r} or among Ferry's marks"
        )
    try:
        response, refused = delete_if_match(client, extra.bucket, extra.key, extra.etag or None)
    except ClientError as error:
        code = error_code(error)
        if code in CONDITION_FAILED:
            return DeleteResult(extra.bucket, extra.key, "skipped", "changed since it was listed: kept")
        if code in _ABSENT:
            return DeleteResult(extra.bucket, extra.key, "skipped", "already gone")
        return DeleteResult(extra.bucket, extra.key, "failed", "not deleted: " + _why(error, extra))
    except BotoCoreError as error:
        return DeleteResult(extra.bucket, extra.key, "failed", f"not deleted: {error}")
    note = (
        "the server refused If-Match on DeleteObject: deleted without it, so a write since the "
        "listing would have been lost"
        if refused
        else None
    )
    marker = response.get("VersionId") if response.get("DeleteMarker") else None
    return DeleteResult(extra.bucket, extra.key, "deleted", delete_marker_version_id=marker, note=note)


def _why(error: ClientError, extra: Extra) -> str:
    return describe(error, side="destination", action="s3:DeleteObject", bucket=extra.bucket, key=extra.key)
