"""A listing of each side, walked side by side: what `ferry sync` and `ferry check` compare.

A side is anything that lists its objects as `Entry`s in key order, each with its key
relative to the side's root (an S3 prefix today; a local folder can be another side). Two
such listings, walked together by relative key, say for every key whether the source, the
destination or both hold it, holding no more than one entry of each side in memory.

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

    def entries(self) -> Iterator[Entry]:
        """Every object the filters take, in key order."""
        for entry in self.all_entries():
            if self.filters.admits(entry.relative_key, entry.size, entry.last_modified):
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


def side_by_side(source: Iterable[A], destination: Iterable[B]) -> Iterator[tuple[str, A | None, B | None]]:
    """(relative key, source entry or None, destination entry or None) for every key either
    side lists, in key order. Entries are anything with a `relative_key`: objects, or a key's
    versions."""
    left, right = _in_order(source, "source"), _in_order(destination, "destination")
    a, b = next(left, None), next(right, None)
    while a is not None or b is not None:
        if b is None or (a is not None and a.relative_key < b.relative_key):
            yield a.relative_key, a, None  # type: ignore[union-attr]
            a = next(left, None)
        elif a is None or b.relative_key < a.relative_key:
            yield b.relative_key, None, b
            b = next(right, None)
        else:
            yield a.relative_key, a, b
            a, b = next(left, None), next(right, None)


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
