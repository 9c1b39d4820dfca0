"""The progress bar `ferry copy` and `ferry run` show on a terminal: objects done, bytes copied
(counted as each part of a multipart copy lands, so a large object moves the bar before it
completes), the rate; while the listing goes on, how many objects (and bytes) are listed so
far, with no bar and no ETA; once it is complete, the bar of the total and an ETA
(progress_bar.py draws the line, within the terminal's width). Drawn by rich, on stderr, only
when stderr is a terminal: logs and pipes get nothing extra. Removed when done (the summary
follows).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any, TypeVar

from ferry.models import CopyResult, Status, Target

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress as RichProgress

T = TypeVar("T")


class Progress:
    """Objects and bytes done, fed by `add` (one call per settled object), `part_done` (one
    call per part of a multipart copy, as it lands) and `listed` (how many objects are known,
    and whether that is all of them). Thread-safe; does nothing when disabled, so callers need
    no `if`."""

    def __init__(
        self, stream: IO[str] | None = None, *, enabled: bool | None = None, console: Console | None = None
    ) -> None:
        self._stream = stream
        if console is not None:
            self.enabled = enabled is None or enabled
        else:
            self.enabled = bool(stream is not None and stream.isatty()) if enabled is None else enabled
        self._lock = threading.Lock()
        self._bar: RichProgress | None = None
        self._task: Any = None
        self._bytes = 0
        # Bytes of objects still in flight already counted from their parts, by destination.
        self._in_parts: dict[tuple[str, str], int] = {}
        if self.enabled:
            from ferry.cli.shared import progress_bar  # rich only where a bar is drawn

            self._bar = progress_bar.make_bar(console or progress_bar.console_for(stream))
            self._task = self._bar.add_task("copying", total=None, bytes=0, listed=0, listed_bytes=0)

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def say(self, line: str) -> None:
        """One line for the reader (`-v`'s per-object lines), on the bar's stream: above the
        bar where one is drawn (rich keeps it below what is printed), else as it is."""
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)
        elif self._stream is not None:
            with self._lock:
                self._stream.write(line + "\n")

    def part_done(self, target: Target, size: int) -> None:
        """A part of the copy to `target` landed: its bytes count now."""
        if self._bar is None:
            return
        with self._lock:
            where = (target.bucket, target.key)
            self._in_parts[where] = self._in_parts.get(where, 0) + size
            self._bytes += size
            self._bar.update(self._task, bytes=self._bytes)

    def add(self, result: CopyResult) -> None:
        """One object settled (a result handed over at a deadline is not: it comes again, and
        the parts it landed stay counted). Its bytes count less those its parts already did;
        a failed copy's parts are taken back (its upload was aborted)."""
        if self._bar is None or result.handed_over:
            return
        copied = result.bytes if result.status == Status.COPIED else 0
        with self._lock:
            self._bytes += copied - self._in_parts.pop((result.dest_bucket, result.dest_key), 0)
            self._bar.update(self._task, advance=1, bytes=self._bytes)

    def listed(self, objects: int, *, complete: bool, size: int | None = None) -> None:
        """`objects` (of `size` bytes, when known) are listed so far; `complete` once the
        listing has ended (the bar and the ETA start)."""
        if self._bar is None:
            return
        with self._lock:
            fields: dict[str, Any] = {"listed": objects}
            if size is not None:
                fields["listed_bytes"] = size
            self._bar.update(self._task, total=objects if complete else None, **fields)

    def counting(self, items: Iterable[T]) -> Iterator[T]:
        """Pass items through, telling the bar how many (and how many bytes: a pair's source
        object's size) are listed so far, and when they end."""
        count = size = 0
        for item in items:
            count += 1
            size += _size_of(item)
            if self._bar is not None:
                self.listed(count, complete=False, size=size)
            yield item
        self.listed(count, complete=True, size=size)


def _size_of(item: object) -> int:
    """A listed pair's source size (0 when the item carries none)."""
    source = item[0] if isinstance(item, tuple) and item else item
    size = getattr(source, "size", None)
    return size if isinstance(size, int) else 0
