"""The rich columns of `ferry copy`'s progress bar, apart from the bar's logic (progress.py):
imported only when a bar is drawn, so a run without a terminal never loads rich (a twentieth
of `ferry copy`'s start-up)."""

from __future__ import annotations

from typing import Any

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


def console_for(stream: Any) -> Console:
    return Console(file=stream, stderr=stream is None)


def make_bar(console: Console) -> RichProgress:
    return RichProgress(
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
