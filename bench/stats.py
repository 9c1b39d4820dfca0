"""Numbers from repeated runs: one run's measurement, and the median and spread of several.

Medians, not means: on a shared 2-core machine one run in five is often disturbed, and the
median ignores it while the spread (min-max) shows it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

MiB = 1024 * 1024
GiB = 1024 * MiB


@dataclass(frozen=True)
class Sample:
    """One measured run: wall seconds, client CPU seconds (user + sys), peak RSS in bytes."""

    wall: float
    cpu: float
    peak_rss: int
    ok: bool = True
    error: str | None = None


@dataclass
class Row:
    """All runs of one tool at one setting in one case, and what one run moves."""

    tool: str
    setting: str
    objects: int
    total_bytes: int
    command: str = ""
    samples: list[Sample] = field(default_factory=list)
    note: str | None = None

    @property
    def good(self) -> list[Sample]:
        return [s for s in self.samples if s.ok]

    @property
    def failures(self) -> list[Sample]:
        return [s for s in self.samples if not s.ok]

    @property
    def median_wall(self) -> float | None:
        return median([s.wall for s in self.good])

    @property
    def min_wall(self) -> float | None:
        return min((s.wall for s in self.good), default=None)

    @property
    def max_wall(self) -> float | None:
        return max((s.wall for s in self.good), default=None)

    @property
    def median_cpu(self) -> float | None:
        return median([s.cpu for s in self.good])

    @property
    def peak_rss(self) -> int | None:
        """The largest of the runs' peaks: memory a user must have, not a typical value."""
        return max((s.peak_rss for s in self.good), default=None)

    @property
    def objects_per_second(self) -> float | None:
        return rate(self.objects, self.median_wall)

    @property
    def mib_per_second(self) -> float | None:
        return rate(self.total_bytes / MiB, self.median_wall)

    @property
    def cpu_per_1000_objects(self) -> float | None:
        cpu = self.median_cpu
        return None if cpu is None or not self.objects else cpu * 1000 / self.objects

    @property
    def cpu_per_gib(self) -> float | None:
        cpu = self.median_cpu
        return None if cpu is None or not self.total_bytes else cpu * GiB / self.total_bytes


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def rate(amount: float, seconds: float | None) -> float | None:
    return amount / seconds if seconds else None


def spread_percent(row: Row) -> float | None:
    """(max - min) / median: how far apart the runs were, to judge a difference against."""
    med, lo, hi = row.median_wall, row.min_wall, row.max_wall
    if med is None or lo is None or hi is None or med == 0:
        return None
    return (hi - lo) / med * 100


def fastest(rows: list[Row]) -> Row | None:
    """The row with the lowest median time among those where every run succeeded."""
    complete = [r for r in rows if r.good and not r.failures]
    return min(complete, key=lambda r: r.median_wall or float("inf"), default=None)
