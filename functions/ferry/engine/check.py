"""Compare two sides without copying: for each key, missing on one side, different or
identical, with the evidence that decided (engine/comparison.py). What `ferry check` runs.

Keys one side lacks and sizes that differ are settled by the two listings alone; a key both
sides hold at one size costs a HEAD on each side (the checksums are not in a listing). HEADs
run a window of keys at a time on a few threads; results come back in key order.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ferry.engine.comparison import Sameness, by_size, compare_heads
from ferry.engine.side_listing import Entry, S3Side, side_by_side
from ferry.errors import FerryError, describe

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


def check_sides(source: S3Side, destination: S3Side, *, threads: int = 16) -> Iterator[KeyCheck]:
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


def _verdict(source: S3Side, destination: S3Side, key: str, a: Entry | None, b: Entry | None) -> KeyCheck:
    where = {
        "source": source.url(a.key) if a else None,
        "destination": destination.url(b.key) if b else None,
    }
    if b is None:
        return KeyCheck(key, Verdict.MISSING_ON_DESTINATION, **where)
    if a is None:
        return KeyCheck(key, Verdict.MISSING_ON_SOURCE, **where)
    sameness = by_size(a.size, b.size)
    if sameness is None:
        heads = []
        for side, entry in ((source, a), (destination, b)):
            try:
                heads.append(side.head(entry))
            except (ClientError, BotoCoreError, FerryError) as error:
                return KeyCheck(key, Verdict.UNREADABLE, None, _unreadable(error, side, entry), **where)
        sameness = compare_heads(*heads)
    return _of(key, sameness, where)


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
