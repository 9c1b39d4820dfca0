"""`make load`'s arithmetic, apart from the servers and processes so a fast test can check it:
what a sampled run looked like (RSS and objects done, once a second), objects/s per minute,
how steady that was, and RSS at fixed shares of the job.

Progress is read from outside the process, from what Ferry writes anyway: the lines of
`ferry copy --report FILE` and the batch rows of `ferry run`'s SQLite ledger. Nothing is
added to Ferry to be measured.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Point:
    """One sample: seconds since the process started, its RSS and peak RSS, objects done."""

    t: float
    rss: int
    hwm: int
    done: int


@dataclass
class Trace:
    """A sampled run: every second's point, and the peak RSS measured by the kernel at the end
    (GNU time's %M) when available, else the largest VmHWM sampled."""

    points: list[Point] = field(default_factory=list)
    final_peak: int = 0

    @property
    def peak_rss(self) -> int:
        sampled = max((p.hwm for p in self.points), default=0)
        return max(self.final_peak, sampled)


def proc_memory(pid: int) -> tuple[int, int] | None:
    """(VmRSS, VmHWM) of a live process in bytes, from /proc; None once it has gone. VmHWM is
    the peak of the process's own memory since its exec, not its parent's."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0]) * 1024
    if "VmRSS" not in values:
        return None  # a zombie has no memory left to show
    return values["VmRSS"], values.get("VmHWM", values["VmRSS"])


def child_pid(pid: int) -> int | None:
    """The first child of `pid` (the tool GNU time started), if it has one yet."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


class ReportLines:
    """Objects settled so far by `ferry copy --report FILE`: the report's complete lines,
    counted as the file grows (only the offset is kept, so it costs nothing per object).
    The summary line at the end is not an object and is left out."""

    def __init__(self, path: Path) -> None:
        self.path, self._offset, self._lines, self._summary = path, 0, 0, False

    def __call__(self) -> int:
        try:
            with open(self.path, "rb") as file:
                file.seek(self._offset)
                chunk = file.read()
        except OSError:
            return self._lines
        end = chunk.rfind(b"\n") + 1  # a half-written last line waits for the next call
        whole = chunk[:end]
        self._lines += whole.count(b"\n")
        if b'{"summary":' in whole:
            self._summary = True
        self._offset += end
        return self._lines - (1 if self._summary else 0)


def ledger_done(path: Path, job_id: str) -> int:
    """Objects settled so far by `ferry run` (copied, skipped or failed), summed over the
    job's batch rows in its SQLite ledger, read with a read-only connection of our own."""
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            row = db.execute(
                "SELECT COALESCE(SUM(json_extract(counts, '$.copied') + json_extract(counts, '$.skipped')"
                " + json_extract(counts, '$.failed')), 0) FROM batches WHERE job_id = ?",
                (job_id,),
            ).fetchone()
    except sqlite3.Error:
        return -1  # the caller keeps the last value it had
    return int(row[0] or 0)


@dataclass(frozen=True)
class Minute:
    """Objects settled in one period of the run (the last one may be shorter)."""

    start: float
    seconds: float
    objects: int

    @property
    def rate(self) -> float:
        return self.objects / self.seconds if self.seconds > 0 else 0.0


def per_minute(points: list[Point], period: float = 60.0) -> list[Minute]:
    """The run cut into `period`s from the process's start (the last one ends with the run).
    The count at each boundary is the last sample at or before it."""
    minutes: list[Minute] = []
    if not points:
        return minutes
    end, start, before, index = points[-1].t, 0.0, 0, 0
    while start < end:
        stop = min(start + period, end)
        while index + 1 < len(points) and points[index + 1].t <= stop:
            index += 1
        done = points[index].done
        minutes.append(Minute(start, stop - start, done - before))
        start, before = stop, done
    return minutes


def steadiness(minutes: list[Minute], period: float = 60.0) -> float | None:
    """Slowest over fastest full minute (1.0 = perfectly steady). The last, partial minute is
    left out: it ends when the objects do, not when the minute does. None with fewer than two
    full minutes."""
    rates = [m.rate for m in minutes if m.seconds >= period - 1e-6]
    if len(rates) < 2 or max(rates) <= 0:
        return None
    return min(rates) / max(rates)


def rss_at(points: list[Point], total: int, fraction: float) -> int | None:
    """RSS at the first sample where `fraction` of the `total` objects were done."""
    goal = total * fraction
    for point in points:
        if point.done >= goal and point.rss:
            return point.rss
    return None


def mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**20:.0f} MiB"
