"""Compare two sides without copying: for each key, missing on one side, different or
identical, with the evidence that decided (engine/compare/comparison.py). What `ferry check` runs.

Keys one side lacks and sizes that differ are settled by the two listings alone; a key both
sides hold at one size costs a HEAD on each side (the checksums are not in a listing). HEADs
run a window of keys at a time on a few threads; results come back in key order.

One side may be a local folder (local_side.py): a file is then compared with the object's
HEAD by computing the object's own evidence over the file (local_comparison.py). An entry a
local side lists but cannot compare (a link not followed, a special file) is missing on the
other side if the other lacks it, else `unreadable` with its reason; one it could not read
(a file or folder without permission, a name that is not UTF-8) is `unreadable` either way.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ferry.engine.compare.comparison import Sameness, by_size, compare_heads
from ferry.engine.compare.local_comparison import compare_file
from ferry.engine.compare.local_side import LocalSide
from ferry.engine.compare.side_listing import Entry, S3Side, Side, side_by_side
from ferry.errors import FerryError, describe
from ferry.models import SourceObject

WINDOW = 256  # keys read ahead from the two listings and compared at once


class Verdict(StrEnum):
    IDENTICAL = "identical"
    DIFFERENT = "different"
    MISSING_ON_DESTINATION = "missing-on-destination"
    MISSING_ON_SOURCE = "missing-on-source"
    UNREADABLE = "unreadable"  # a HEAD failed: neither same nor different is known


@dataclass(frozen=True)
class KeyCheck:
    """One key's verdict."""

    relative_key: str
    verdict: Verdict
    evidence: str | None = None  # checksum, etag, size; None for a missing key
    detail: str | None = None
    source: str | None = None  # s3://bucket/key of each side that has it
    destination: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {
            "key": self.relative_key,
            "status": str(self.verdict),
            "evidence": self.evidence,
            "detail": self.detail,
            "source": self.source,
            "destination": self.destination,
        }
        return {k: v for k, v in data.items() if v is not None}


def check_sides(source: Side, destination: Side, *, threads: int = 16) -> Iterator[KeyCheck]:
    """Every key either side lists (after the filters), in key order, with its verdict."""
    walk = side_by_side(source.entries(), destination.entries())
    with ThreadPoolExecutor(threads, thread_name_prefix="ferry-check") as pool:
        while True:
            window = list(itertools.islice(walk, WINDOW))
            if not window:
                return
            yield from pool.map(lambda row: _verdict(source, destination, *row), window)


def check_objects(source: S3Side, a: Entry | None, destination: S3Side, b: Entry | None) -> KeyCheck:
    """One object against one (SRC naming an object): each entry as its HEAD showed it, or
    None where that side lacks it."""
    key = (a or b).relative_key if (a or b) else ""
    return _verdict(source, destination, key, a, b)


def _verdict(source: Side, destination: Side, key: str, a: Entry | None, b: Entry | None) -> KeyCheck:
    where = {
        "source": source.url(a.key) if a else None,
        "destination": destination.url(b.key) if b else None,
    }
    problem = _problem(source, a, destination, b)
    if problem is not None:
        return KeyCheck(key, Verdict.UNREADABLE, None, problem, **where)
    if b is None:
        return KeyCheck(key, Verdict.MISSING_ON_DESTINATION, None, a.problem if a else None, **where)
    if a is None:
        return KeyCheck(key, Verdict.MISSING_ON_SOURCE, None, b.problem, **where)
    sameness = by_size(a.size, b.size)
    if sameness is None:
        try:
            sameness = _compare(source, a, destination, b)
        except _Unreadable as unreadable:
            return KeyCheck(key, Verdict.UNREADABLE, None, str(unreadable), **where)
    return _of(key, sameness, where)


def _problem(source: Side, a: Entry | None, destination: Side, b: Entry | None) -> str | None:
    """Why a key cannot be compared: a side could not read it, or holds it as something no
    object is while the other side holds it too."""
    for side, entry, other in ((source, a, b), (destination, b, a)):
        if entry is not None and entry.problem is not None and (other is not None or not entry.chosen):
            return f"the {side.name}'s {entry.key}: {entry.problem}"
    return None


class _Unreadable(Exception):
    """A side's HEAD, or a local file's read, failed: the key's bytes are not known."""


def _compare(source: Side, a: Entry, destination: Side, b: Entry) -> Sameness:
    if isinstance(source, S3Side) and isinstance(destination, S3Side):
        return compare_heads(_head(source, a), _head(destination, b))
    if isinstance(source, S3Side) and isinstance(destination, LocalSide):
        return _with_file(source, a, destination, b, object_is_source=True)
    if isinstance(source, LocalSide) and isinstance(destination, S3Side):
        return _with_file(destination, b, source, a, object_is_source=False)
    raise TypeError("check compares an S3 prefix with an S3 prefix or a local folder")


def _with_file(s3: S3Side, obj: Entry, local: LocalSide, file: Entry, *, object_is_source: bool) -> Sameness:
    head = _head(s3, obj)
    try:
        return compare_file(
            s3.client,
            SourceObject(s3.bucket, obj.key),
            head,
            file.key,
            object_is_source=object_is_source,
            follow_symlinks=local.follow_symlinks,
        )
    except OSError as error:
        raise _Unreadable(f"cannot read the {local.name}'s {file.key}: {error.strerror or error}") from error
    except (ClientError, BotoCoreError, FerryError) as error:
        raise _Unreadable(f"the {local.name}'s {file.key}: {error}") from error


def _head(side: S3Side, entry: Entry) -> dict[str, Any]:
    try:
        return side.head(entry)
    except (ClientError, BotoCoreError, FerryError) as error:
        raise _Unreadable(_unreadable(error, side, entry)) from error


def _of(key: str, sameness: Sameness, where: dict[str, str | None]) -> KeyCheck:
    verdict = Verdict.IDENTICAL if sameness.same else Verdict.DIFFERENT
    return KeyCheck(key, verdict, sameness.evidence, sameness.detail, **where)


def _unreadable(error: BaseException, side: S3Side, entry: Entry) -> str:
    """Which side's HEAD failed and why, in the words a copy's failure uses."""
    if isinstance(error, ClientError):
        return describe(
            error, side=side.name, action="s3:GetObject (HEAD)", bucket=side.bucket, key=entry.key
        )
    return f"HEAD of {side.url(entry.key)} failed: {error}"
