"""What a report's charts need, counted as results arrive, in fixed-size counters.

A job may copy a billion objects, so nothing here keeps one entry per object: sizes go into
log2 buckets (at most ~45 of them up to 5 TiB), completions into at most `MAX_BUCKETS` time
buckets whose width doubles when the job outlasts them. `ferry copy` feeds one `ReportStats`
and one `Timeline` directly; each pipeline batch stores its `ReportStats` on its ledger marker
(`to_marker`, a few hundred bytes) and Finalize merges the markers (`from_marker`, `merge`)
and adds each marker's counts to a `Timeline` at the time it was recorded.

The report dict's fields these produce (see ferry.reports.report_html for the whole input):
    "bytes":    {"copied": n, "skipped": n, "failed": n, "pending": n}   object sizes per outcome
    "sizes":    [{"min": lo, "max": hi, "objects": n}, ...]               copied + skipped, by size
    "strategies", "verified_by": {name: objects}                          copied objects only
    "timeline": {"start": ISO 8601, "bucket_seconds": w, "objects": [..], "bytes": [..]}
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ferry.models import CopyResult, Status

MAX_BUCKETS = 120
OUTCOMES = ("copied", "skipped", "failed", "pending")
ZERO_BYTES = -1  # the size bucket of empty objects; bucket e >= 0 holds sizes 2**e .. 2**(e+1)-1


def size_bucket(size: int) -> int:
    return size.bit_length() - 1 if size > 0 else ZERO_BYTES


def bucket_range(bucket: int) -> tuple[int, int]:
    """The smallest and largest size (bytes, inclusive) in a size bucket."""
    return (0, 0) if bucket == ZERO_BYTES else (2**bucket, 2 ** (bucket + 1) - 1)


@dataclass
class ReportStats:
    """Bytes per outcome, a size histogram and how copied objects were copied and verified."""

    bytes: Counter[str] = field(default_factory=Counter)
    sizes: Counter[int] = field(default_factory=Counter)
    strategies: Counter[str] = field(default_factory=Counter)
    verified_by: Counter[str] = field(default_factory=Counter)

    def add(self, result: CopyResult) -> None:
        outcome = str(result.status)
        self.bytes[outcome if outcome in OUTCOMES else "pending"] += result.bytes
        if result.status in (Status.COPIED, Status.SKIPPED):
            # A failed or pending object's size is often unknown (0): it would distort the chart.
            self.sizes[size_bucket(result.bytes)] += 1
        if result.status == Status.COPIED:
            self.strategies[result.strategy or "unknown"] += 1
            self.verified_by[result.verified_by or "unverified"] += 1

    def merge(self, other: ReportStats) -> ReportStats:
        for mine, theirs in (
            (self.bytes, other.bytes),
            (self.sizes, other.sizes),
            (self.strategies, other.strategies),
            (self.verified_by, other.verified_by),
        ):
            mine.update(theirs)
        return self

    def size_histogram(self) -> list[dict[str, int]]:
        """Every bucket from the smallest to the largest seen, empty ones too (a continuous axis)."""
        if not self.sizes:
            return []
        low, high = min(self.sizes), max(self.sizes)
        return [
            {"min": bucket_range(b)[0], "max": bucket_range(b)[1], "objects": self.sizes.get(b, 0)}
            for b in range(low, high + 1)
        ]

    def to_dict(self) -> dict[str, Any]:
        """The report's fields (see the module docstring)."""
        return {
            "bytes": {outcome: self.bytes.get(outcome, 0) for outcome in OUTCOMES},
            "sizes": self.size_histogram(),
            "strategies": dict(self.strategies),
            "verified_by": dict(self.verified_by),
        }

    def to_marker(self) -> dict[str, Any]:
        """Compact and DynamoDB-safe (string keys, whole numbers, no empty maps' noise)."""
        return {
            "bytes": {k: v for k, v in self.bytes.items() if v},
            "sizes": {str(k): v for k, v in self.sizes.items() if v},
            "strategies": dict(self.strategies),
            "verified_by": dict(self.verified_by),
        }

    @classmethod
    def from_marker(cls, data: Mapping[str, Any] | None) -> ReportStats:
        data = data or {}

        def counter(name: str) -> Counter[str]:
            return Counter({str(k): int(v) for k, v in (data.get(name) or {}).items()})

        return cls(
            bytes=counter("bytes"),
            sizes=Counter({int(k): v for k, v in counter("sizes").items()}),
            strategies=counter("strategies"),
            verified_by=counter("verified_by"),
        )


@dataclass
class Timeline:
    """Objects finished and bytes copied per time bucket since `start` (seconds since the epoch).

    Buckets start one second wide; when a time falls past `MAX_BUCKETS` buckets, the width
    doubles and neighbouring buckets merge, so a week-long job still needs 120 pairs of ints."""

    start: float = field(default_factory=time.time)
    width: int = 1
    objects: list[int] = field(default_factory=list)
    bytes: list[int] = field(default_factory=list)

    def add(self, at: float, objects: int = 1, nbytes: int = 0) -> None:
        index = self._index(at)
        self.objects[index] += objects
        self.bytes[index] += nbytes

    def extend_to(self, at: float) -> None:
        """Show the quiet time up to `at` (the end of the job) as empty buckets."""
        self._index(at)

    def _index(self, at: float) -> int:
        offset = max(0.0, at - self.start)
        while int(offset // self.width) >= MAX_BUCKETS:
            self._coarsen()
        index = int(offset // self.width)
        if index >= len(self.objects):
            grow = index + 1 - len(self.objects)
            self.objects += [0] * grow
            self.bytes += [0] * grow
        return index

    def _coarsen(self) -> None:
        self.width *= 2
        self.objects = _pairs_summed(self.objects)
        self.bytes = _pairs_summed(self.bytes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": iso_time(self.start),
            "bucket_seconds": self.width,
            "objects": list(self.objects),
            "bytes": list(self.bytes),
        }


def _pairs_summed(values: list[int]) -> list[int]:
    return [sum(values[i : i + 2]) for i in range(0, len(values), 2)]


def iso_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso_time(text: str) -> float:
    """Seconds since the epoch of an ISO 8601 UTC time as the ledger writes them."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
