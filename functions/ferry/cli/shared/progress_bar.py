"""The line `ferry copy`'s progress bar draws, apart from the bar's logic (progress.py):
imported only when a bar is drawn, so a run without a terminal never loads rich (a twentieth
of `ferry copy`'s start-up).

Until the listing ends the total is unknown, and the line says only what is known: objects
done and listed so far (and the bytes listed, when the listing gives sizes), bytes copied,
the rate, the time: no bar (a bar of an unknown total is drawn full) and no ETA. Once the
listing ends: the bar, done of the total, and the ETA. The line is cut to the terminal's
width, least useful part first, so it never wraps (a wrapped line is redrawn as a new one at
every refresh)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rich.console import Console
from rich.progress import Progress as RichProgress
from rich.progress import ProgressColumn, Task
from rich.text import Text

from ferry.counts import plural
from ferry.limits import format_size

BAR_WIDTH = 20


class _Line(ProgressColumn):
    """The whole line, made to fit the console's width."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console

    def render(self, task: Task) -> Text:
        line = progress_line(
            done=int(task.completed),
            total=None if task.total is None else int(task.total),
            listed=int(task.fields.get("listed", 0)),
            listed_bytes=int(task.fields.get("listed_bytes", 0)),
            copied=int(task.fields.get("bytes", 0)),
            elapsed=task.elapsed or 0.0,
            width=max(20, self.console.width - 1),
        )
        return Text(line, no_wrap=True, overflow="crop", style="progress.data.speed")


def _clock(seconds: float) -> str:
    return str(dt.timedelta(seconds=int(seconds)))


def progress_line(
    *, done: int, total: int | None, listed: int, listed_bytes: int, copied: int, elapsed: float, width: int
) -> str:
    """`━━━━━━╺━━━━ 2,911/4,000 objects · 1.2 GiB · 12.0 MiB/s · 0:01:42 · ETA 0:00:37`, or
    while listing `2,911 done of 3,000 listed so far (1.3 GiB) · 1.2 GiB · ... · listing`;
    parts are dropped from the least useful until the line fits `width`."""
    rate = copied / elapsed if elapsed > 0 else 0.0
    speed, clock = (f"{format_size(rate)}/s", 4), (_clock(elapsed), 5)
    if total is None:
        sizes = f" ({format_size(listed_bytes)})" if listed_bytes else ""
        head = f"{done:,} done of {max(listed, done):,} listed so far{sizes}"
        parts = [(head, 0), (format_size(copied), 1), speed, clock, ("listing", 2)]
    else:
        per_object = elapsed / done if done else 0.0
        eta = f"ETA {_clock(per_object * max(0, total - done))}" if done else "ETA -:--:--"
        filled = round(BAR_WIDTH * min(done, total) / total) if total else BAR_WIDTH
        bar = "━" * filled + " " * (BAR_WIDTH - filled)
        # The bar goes after the time, before the rate: the counts beside it say the same.
        parts = [
            (bar, 3),
            (f"{done:,}/{plural(total, 'object', thousands=True)}", 0),
            (format_size(copied), 1),
            speed,
            clock,
            (eta, 2),
        ]
    while True:
        text = " · ".join(part for part, _ in parts).replace("━ · ", "━ ").replace("  · ", "  ")
        if len(text) <= width or len(parts) == 1:
            return text[:width]
        parts.remove(max(parts, key=lambda part: part[1]))


def console_for(stream: Any) -> Console:
    return Console(file=stream, stderr=stream is None)


def make_bar(console: Console) -> RichProgress:
    return RichProgress(
        _Line(console),
        console=console,
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
    )
