"""The progress bar `ferry copy` and `ferry run` share: drawn on a terminal only, with objects
and bytes done and an ETA once the listing is complete; nothing at all in a pipe or a log."""

from __future__ import annotations

import io
import re
import time

from rich.console import Console

from ferry.cli.progress import Progress
from ferry.models import CopyResult, Status


def result(status: Status, size: int = 0, handed_over: bool = False) -> CopyResult:
    return CopyResult("k", "k", status, bytes=size, handed_over=handed_over)


def plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def test_a_stream_that_is_not_a_terminal_gets_nothing() -> None:
    stream = io.StringIO()  # isatty() is False: a pipe, a file, a log
    with Progress(stream) as progress:
        progress.listed(3, complete=True)
        for _ in range(3):
            progress.add(result(Status.COPIED, 1024))
    assert not progress.enabled
    assert stream.getvalue() == ""


def test_a_terminal_shows_objects_done_of_those_listed_bytes_and_an_eta_once_listed() -> None:
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, width=140)
    with Progress(console=console) as progress:
        progress.add(result(Status.COPIED, 3 * 1024 * 1024))
        progress.add(result(Status.SKIPPED))
        progress.add(result(Status.PENDING, handed_over=True))  # comes again: not done
        progress._bar.refresh()  # type: ignore[union-attr]
        before = plain(stream.getvalue())
        progress.listed(4, complete=True)
        progress.add(result(Status.FAILED))
        time.sleep(0.05)
        progress._bar.refresh()  # type: ignore[union-attr]
    after = plain(stream.getvalue())
    assert "2/? objects" in before and "ETA: listing..." in before
    assert "3.0 MiB" in before
    assert "3/4 objects" in after and "ETA " in after
