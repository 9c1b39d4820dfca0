"""What the destination already holds, for many keys at once: one listing instead of a HEAD each.

Skip-existing needs to know, for every target, whether it exists and what it is. A HEAD per
key costs a request per object; a listing of the key range a window of targets spans answers
up to 1,000 keys per request. A listing gives size, ETag and modification time, not checksum
values: it settles "absent", "different size" and "same ETag"; only a same-size object with
another ETag still needs its HEAD (to compare checksums).

Keys beyond what a few pages covered (a destination crowded with other keys), a listing
that is refused, or one that fails, all leave the targets `unknown`: they get their HEAD as
before. Nothing is decided from a listing that did not cover the key.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ferry.errors import error_code, is_access_denied
from ferry.models import Target

log = logging.getLogger(__name__)

MIN_WINDOW = 8  # fewer targets than this: one HEAD each costs no more than a listing
PAGE_SIZE = 1000  # S3's most keys per ListObjectsV2 page


@dataclass(frozen=True)
class Listed:
    """One destination object as a listing shows it."""

    size: int
    etag: str  # without quotes
    last_modified: Any


ABSENT = "absent"  # the listing covered the key and it is not there


class DestinationIndex:
    """Listings of the destination, asked for once per window of targets, shared by a run.

    A target maps to a `Listed`, to `ABSENT`, or is left out (not known: HEAD it). After a
    bucket's listing is refused once, or comes back out of order, it is not listed again.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self._refused: set[str] = set()  # buckets whose listing was refused, or is unordered

    def window(self, targets: Sequence[Target]) -> dict[Target, Listed | str]:
        """What the destination holds for these targets, as far as listings cover them."""
        if len(targets) < MIN_WINDOW:
            return {}
        known: dict[Target, Listed | str] = {}
        by_bucket: dict[str, list[str]] = defaultdict(list)
        for target in targets:
            by_bucket[target.bucket].append(target.key)
        for bucket, keys in by_bucket.items():
            if len(keys) < MIN_WINDOW or bucket in self._refused or bucket.endswith("--x-s3"):
                continue  # directory buckets list in no particular order
            try:
                found, covered_to = self._list_range(bucket, sorted(set(keys)))
            except Exception as error:
                self._give_up(bucket, error)
                continue
            for key in keys:
                if covered_to is None or key <= covered_to:
                    known[Target(bucket, key)] = found.get(key, ABSENT)
        return known

    def _list_range(self, bucket: str, keys: list[str]) -> tuple[dict[str, Listed], str | None]:
        """List from the first key to the last; returns what was found and how far the listing
        reached (None: past the end of the range; "": nowhere to rely on)."""
        first, last = keys[0], keys[-1]
        prefix = os.path.commonprefix([first, last])
        args: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": _first_page(len(keys))}
        start_after = _just_before(first)
        if start_after is not None and start_after > prefix:
            args["StartAfter"] = start_after
        # Keys asked for, at most: whole pages for twice the window (two at least), however
        # short the first page is.
        budget = max(2, 2 * len(keys) // PAGE_SIZE + 1) * PAGE_SIZE
        found: dict[str, Listed] = {}
        reached = ""  # the greatest key listed so far
        while budget > 0:
            page = self.client.list_objects_v2(**args)
            budget -= args["MaxKeys"]
            for item in page.get("Contents", []):
                key = item["Key"]
                if key <= reached:
                    self._refused.add(bucket)
                    log.warning("the destination s3://%s lists keys out of order: HEAD per key", bucket)
                    return {}, ""
                reached = key
                found[key] = Listed(
                    size=int(item.get("Size", 0)),
                    etag=item.get("ETag", "").strip('"'),
                    last_modified=item.get("LastModified"),
                )
            if not page.get("IsTruncated") or reached >= last:
                return found, None
            token = page.get("NextContinuationToken")
            if not token:
                return found, reached
            args["ContinuationToken"] = token
            args["MaxKeys"] = PAGE_SIZE
            args.pop("StartAfter", None)
        return found, reached

    def _give_up(self, bucket: str, error: BaseException) -> None:
        if is_access_denied(error):
            self._refused.add(bucket)
            log.info(
                "cannot list the destination s3://%s (%s): skip-existing asks a HEAD per key",
                bucket,
                error_code(error),
            )
        else:
            log.warning("listing the destination s3://%s failed (%s): HEAD per key instead", bucket, error)


def _first_page(targets: int) -> int:
    """The first page's size: room for the targets and as many other keys among them, up to
    S3's page. A short window (a command's first, or a batch's last) would otherwise read up
    to 1,000 keys past its own, which the next window lists again: on a re-run into a full
    destination, 900 of a first window's 1,000."""
    return min(PAGE_SIZE, 2 * targets)


def _just_before(key: str) -> str | None:
    """A string S3 sorts immediately before `key` (code-point order is UTF-8 byte order), so
    a listing that starts after it starts at `key`. None when there is no such string."""
    if not key:
        return None
    last = ord(key[-1])
    if last == 0:
        return key[:-1] or None
    previous = last - 1
    if 0xD800 <= previous <= 0xDFFF:  # surrogates are not characters: step over them
        previous = 0xD7FF
    return key[:-1] + chr(previous) + "\U0010ffff"


def windows(items: Iterable[Any], size: int) -> Iterable[list[Any]]:
    """Consecutive lists of up to `size` items, read lazily."""
    window: list[Any] = []
    for item in items:
        window.append(item)
        if len(window) >= size:
            yield window
            window = []
    if window:
        yield window
