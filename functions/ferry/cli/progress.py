"""The progress bar `ferry copy` and `ferry run` show on a terminal: objects done out of those
listed, bytes copied, the rate, and an ETA once the listing is complete (before that the
total is unknown and the bar says so). Drawn by rich, on stderr, only when stderr is a
terminal: logs and pipes get nothing extra. Removed when done (the summary follows).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import IO, Any, TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichProgress
from rich.text import Text

from ferry.limits import format_size
from ferry.models import CopyResult, Status

T = TypeVar("T")


class _BytesColumn(ProgressColumn):
    """Bytes copied so far and their rate, from the task's `bytes` field."""

    def render(self, task: Task) -> Text:
        copied = int(task.fields.get("bytes", 0))
        elapsed = task.elapsed or 0.0
        rate = copied / elapsed if elapsed > 0 else 0.0
        return Text(f"{format_size(copied)} ({format_size(rate)}/s)", style="progress.data.speed")


class _EtaColumn(TimeRemainingColumn):
    """An ETA only once the listing is complete: until then the total is not known."""

    def render(self, task: Task) -> Text:
        if task.total is None:
            return Text("ETA: listing...", style="progress.remaining")
        return Text.assemble("ETA ", super().render(task))


class Progress:
    """Objects and bytes done, fed by `add` (one call per settled object) and `listed` (how
    many objects are known, and whether that is all of them). Thread-safe; does nothing when
    disabled, so callers need no `if`."""

    def __init__(
        self, stream: IO[str] | None = None, *, enabled: bool | None = None, console: Console | None = None
    ) -> None:
        if console is None:
            wanted = bool(stream is not None and stream.isatty()) if enabled is None else enabled
            console = Console(file=stream, stderr=stream is None) if wanted else None
        self.enabled = console is not None and (enabled is None or enabled)
        self._lock = threading.Lock()
        self._bar: RichProgress | None = None
        self._task: Any = None
        if self.enabled:
            self._bar = RichProgress(
                BarColumn(bar_width=20),  # the whole line fits 80 columns
                MofNCompleteColumn(),
                TextColumn("objects"),
                _BytesColumn(),
                TimeElapsedColumn(),
                _EtaColumn(),
                console=console,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._task = self._bar.add_task("copying", total=None, bytes=0)

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def add(self, result: CopyResult) -> None:
        """One object settled (a result handed over at a deadline is not: it comes again)."""
        if self._bar is None or result.handed_over:
            return
        copied = result.bytes if result.status == Status.COPIED else 0
        with self._lock:
            task = self._bar.tasks[0]
            self._bar.update(self._task, advance=1, bytes=int(task.fields.get("bytes", 0)) + copied)

    def listed(self, objects: int, *, complete: bool) -> None:
        """`objects` are known so far; `complete` once the listing has ended (the ETA starts)."""
        if self._bar is None:
            return
        with self._lock:
            self._bar.update(self._task, total=objects if complete else None)

    def counting(self, items: Iterable[T]) -> Iterator[T]:
        """Pass items through, telling the bar how many are known and when they end."""
        count = 0
        for item in items:
            count += 1
            yield item
        self.listed(count, complete=True)
