"""The progress bar `ferry copy` and `ferry run` show on a terminal: objects done out of those
listed, bytes copied, the rate, and an ETA once the listing is complete (before that the
total is unknown and the bar says so). Drawn by rich, on stderr, only when stderr is a
terminal: logs and pipes get nothing extra. Removed when done (the summary follows).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any, TypeVar

from ferry.models import CopyResult, Status

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress as RichProgress

T = TypeVar("T")


class Progress:
    """Objects and bytes done, fed by `add` (one call per settled object) and `listed` (how
    many objects are known, and whether that is all of them). Thread-safe; does nothing when
    disabled, so callers need no `if`."""

    def __init__(
        self, stream: IO[str] | None = None, *, enabled: bool | None = None, console: Console | None = None
    ) -> None:
        if console is not None:
            self.enabled = enabled is None or enabled
        else:
            self.enabled = bool(stream is not None and stream.isatty()) if enabled is None else enabled
        self._lock = threading.Lock()
        self._bar: RichProgress | None = None
        self._task: Any = None
        if self.enabled:
            from ferry.cli import progress_bar  # rich only where a bar is drawn

            self._bar = progress_bar.make_bar(console or progress_bar.console_for(stream))
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
