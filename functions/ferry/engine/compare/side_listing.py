"""A listing of each side, walked side by side: what `ferry sync` and `ferry check` compare.

A side is anything that lists its objects as `Entry`s in key order, each with its key
relative to the side's root: an S3 prefix (S3Side, here) or a local folder (local_side.py).
Two such listings, walked together by relative key, say for every key whether the source,
the destination or both hold it, holding no more than one entry of each side in memory.

A local folder may hold what no object is (a symbolic link not followed, a special file) or
a folder it cannot read: such an entry carries its `problem`. A folder that cannot be read is
listed once, under its key ending in '/', and it covers its whole subtree: a key the other side
lists under it is paired with it (neither side can say it lacks that key), so nothing is
decided, copied or deleted from a listing that could not see.

The walk relies on both listings coming in the same order, the order S3 lists keys in
(UTF-8 byte order, which is Python's order of `str`). A listing out of that order cannot be
walked side by side: it is refused (ListingOutOfOrder), and nothing is decided from it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ferry.errors import ConfigError
from ferry.filters import Filters, is_ferrys_own, marks_prefixes
from ferry.jobspec import as_folder
from ferry.s3.listing import list_objects


class ListingOutOfOrder(ConfigError):
    """A side listed a key after a greater one: its listing cannot be walked with the other."""


class Keyed(Protocol):
    """Anything a side lists under a key relative to its root."""

    @property
    def relative_key(self) -> str: ...


A = TypeVar("A", bound=Keyed)
B = TypeVar("B", bound=Keyed)


@dataclass(frozen=True)
class Entry:
    """One object of a side as its listing shows it."""

    relative_key: str
    key: str  # the object's own key (or path) on its side
    size: int | None
    etag: str | None  # without quotes
    last_modified: dt.datetime | None = None
    mtime_ns: int | None = None  # a local file's, to the nanosecond: unchanged since listed?
    problem: str | None = None  # why it is no object to compare or copy (a local side's entries)
    chosen: bool = False  # the problem is a choice (a link not followed), not something to fix

    @property
    def covers(self) -> bool:
        """A folder that could not be read: it stands for every key under it."""
        return self.problem is not None and (self.relative_key == "" or self.relative_key.endswith("/"))


class Side(Protocol):
    """One end of a comparison: its entries in key order, and how to name one."""

    name: str
    filters: Filters

    @property
    def bucket(self) -> str | None: ...

    def url(self, key: str) -> str: ...

    def entries(self) -> Iterator[Entry]: ...

    def all_entries(self) -> Iterator[Entry]: ...


@dataclass(frozen=True)
class S3Side:
    """An S3 prefix as one side: its listing, filtered, without Ferry's own upload marks."""

    client: Any
    bucket: str
    prefix: str  # a folder ('' for the whole bucket), as_folder'ed
    name: str  # "source" or "destination", for errors
    filters: Filters = Filters()
    marks: tuple[str, ...] = ()  # Ferry's own folders (filters.marks_prefixes): never objects

    @classmethod
    def of(
        cls,
        client: Any,
        bucket: str,
        prefix: str,
        name: str,
        filters: Filters | None = None,
        marks_prefix: str | None = None,
    ) -> S3Side:
        return cls(
            client, bucket, as_folder(prefix), name, filters or Filters(), marks_prefixes(marks_prefix)
        )

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    @property
    def folder(self) -> str:
        """Where the side is, as a user would name it."""
        return f"s3://{self.bucket}/{self.prefix}"

    def entries(self) -> Iterator[Entry]:
        """Every object the filters take, in key order."""
        for entry in self.all_entries():
            if admits(self.filters, entry):
                yield entry

    def all_entries(self) -> Iterator[Entry]:
        """Every object under the prefix but Ferry's marks, before any filter."""
        for obj in list_objects(self.client, self.bucket, self.prefix, side=self.name):
            if is_ferrys_own(obj.key, self.marks):
                continue
            yield Entry(obj.key[len(self.prefix) :], obj.key, obj.size, obj.etag, obj.last_modified)

    def head(self, entry: Entry) -> dict[str, Any]:
        """The object's HEAD, with its stored checksum where the server keeps one."""
        return self.client.head_object(Bucket=self.bucket, Key=entry.key, ChecksumMode="ENABLED")  # type: ignore[no-any-return]


def admits(filters: Filters, entry: Entry) -> bool:
    """The filters on one entry; a folder that could not be read always passes (what it
    holds is unknown, so no filter can leave it out)."""
    return entry.covers or filters.admits(entry.relative_key, entry.size, entry.last_modified)


def side_by_side(source: Iterable[A], destination: Iterable[B]) -> Iterator[tuple[str, A | None, B | None]]:
    """(relative key, source entry or None, destination entry or None) for every key either
    side lists, in key order. Entries are anything with a `relative_key`: objects, or a key's
    versions. A key under a folder one side could not read (an Entry that `covers`) is paired
    with that folder's entry instead of None."""
    left, right = _in_order(source, "source"), _in_order(destination, "destination")
    a, b = next(left, None), next(right, None)
    blind_a: A | None = None  # the last folder each side could not read
    blind_b: B | None = None
    while a is not None or b is not None:
        if b is None or (a is not None and a.relative_key < b.relative_key):
            assert a is not None
            yield a.relative_key, a, _under(blind_b, a.relative_key)
            blind_a = a if _covers(a) else blind_a
            a = next(left, None)
        elif a is None or b.relative_key < a.relative_key:
            yield b.relative_key, _under(blind_a, b.relative_key), b
            blind_b = b if _covers(b) else blind_b
            b = next(right, None)
        else:
            yield a.relative_key, a, b
            a, b = next(left, None), next(right, None)


def _covers(entry: Keyed) -> bool:
    return bool(getattr(entry, "covers", False))


def _under(blind: A | None, key: str) -> A | None:
    """The unreadable folder `key` lies under, if any."""
    if blind is not None and key.startswith(blind.relative_key) and key != blind.relative_key:
        return blind
    return None


def _in_order(entries: Iterable[A], side: str) -> Iterator[A]:
    previous: str | None = None
    for entry in entries:
        if previous is not None and entry.relative_key <= previous:
            raise ListingOutOfOrder(
                f"the {side} listed {entry.relative_key!r} after {previous!r}: its listing is not in "
                "S3's key order, so the two sides cannot be compared key by key; nothing was decided"
            )
        previous = entry.relative_key
        yield entry
