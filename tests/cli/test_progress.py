"""The progress bar `ferry copy` and `ferry run` share: drawn on a terminal only, with objects
and bytes done and an ETA once the listing is complete; nothing at all in a pipe or a log.
Bytes are counted as each part of a multipart copy lands, not only when a whole object has."""

from __future__ import annotations

import io
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from conftest import S3Server
from ferry.cli.main import main
from ferry.cli.shared import progress as progress_module
from ferry.cli.shared.progress import Progress
from ferry.models import CopyResult, SourceObject, Status, Target

MiB = 1024 * 1024


def result(status: Status, size: int = 0, handed_over: bool = False) -> CopyResult:
    return CopyResult("k", "k", status, bytes=size, handed_over=handed_over, dest_bucket="b")


def bytes_shown(progress: Progress) -> int:
    return int(progress._bar.tasks[0].fields["bytes"])  # type: ignore[union-attr]


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
    assert "2 done of 2 listed so far" in before and "listing" in before and "ETA" not in before
    assert "3.0 MiB" in before
    assert "3/4 objects" in after and "ETA " in after


def test_parts_count_as_they_land_and_the_object_adds_only_the_rest() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=140)
    with Progress(console=console) as progress:
        progress.part_done(Target("b", "k"), 5 * MiB)
        progress.part_done(Target("b", "k"), 5 * MiB)
        assert bytes_shown(progress) == 10 * MiB
        progress.add(result(Status.PENDING, 12 * MiB, handed_over=True))  # its parts stay counted
        assert bytes_shown(progress) == 10 * MiB
        progress.add(result(Status.COPIED, 12 * MiB))
        assert bytes_shown(progress) == 12 * MiB
        progress.part_done(Target("b", "gone"), 5 * MiB)
        progress.add(CopyResult("gone", "gone", Status.FAILED, bytes=20 * MiB, dest_bucket="b"))
        assert bytes_shown(progress) == 12 * MiB  # a failed copy's parts are taken back


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def watch(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """What the bar showed after each part and each object, in order: parts end on several
    threads, so each call and the reading after it are taken together, or a thread could
    read after another's part and append after it."""
    seen: list[tuple[str, int]] = []
    part_done, add = progress_module.Progress.part_done, progress_module.Progress.add
    together = threading.Lock()

    def watched_part(self: Progress, *args: Any) -> None:
        with together:
            part_done(self, *args)
            seen.append(("part", bytes_shown(self)))

    def watched_add(self: Progress, *args: Any) -> None:
        with together:
            add(self, *args)
            seen.append(("object", bytes_shown(self)))

    monkeypatch.setattr(progress_module.Progress, "part_done", watched_part)
    monkeypatch.setattr(progress_module.Progress, "add", watched_add)
    return seen


def assert_bytes_grew_part_by_part(seen: list[tuple[str, int]]) -> None:
    """Four parts of a 16 MiB object in 5 MiB parts, each counted before the object settled."""
    parts = [shown for kind, shown in seen if kind == "part"]
    assert [kind for kind, _ in seen] == ["part"] * 4 + ["object"], seen
    assert parts == sorted(parts) and 0 < parts[0] < 16 * MiB, seen
    assert seen[-1] == ("object", 16 * MiB)


def test_a_multipart_copy_shows_bytes_before_the_object_completes(
    versitygw: S3Server, vgw_buckets: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ferry copy` on a terminal, streaming a 16 MiB object in 5 MiB parts: the bar's byte
    count grows with each part, before the object's result arrives."""
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="big.bin", Body=b"x" * (16 * MiB))
    seen = watch(monkeypatch)
    argv = ["copy", f"s3://{src}/big.bin", f"s3://{dst}/big.bin", "--endpoint-url", versitygw.url]
    argv += ["--mode", "stream", "--part-size", "5MiB", "--multipart-threshold", "5MiB"]
    err = Terminal()
    assert main(argv, io.StringIO(), err) == 0, err.getvalue()
    assert versitygw.keys(dst) == ["big.bin"]
    assert_bytes_grew_part_by_part(seen)


def test_a_pipeline_job_run_here_shows_bytes_before_the_object_completes(
    versitygw: S3Server, vgw_buckets: tuple[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`ferry run` on a terminal: the batch workers' copies feed the same bar, part by part."""
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="in/big.bin", Body=b"x" * (16 * MiB))
    options = {"mode": "stream", "part_size": "5MiB", "multipart_threshold": "5MiB"}
    spec = {"source": {"bucket": src, "prefix": "in/"}, "destination": {"bucket": dst}, "options": options}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec))
    seen = watch(monkeypatch)
    argv = ["run", str(path), "--endpoint-url", versitygw.url, "--ledger", str(tmp_path / "l.sqlite")]
    err = Terminal()
    assert main(argv, io.StringIO(), err) == 0, err.getvalue()
    assert versitygw.keys(dst) == ["big.bin"]
    assert_bytes_grew_part_by_part(seen)


def frames(text: str) -> list[str]:
    """The lines rich drew (each refresh rewrites the line: cursor moves and erases split them)."""
    return [line for line in re.split(r"\r|\n|\x1b\[[0-9;?]*[A-Za-z]", text) if line.strip()]


def test_while_listing_the_line_says_done_and_listed_so_far_with_no_bar_and_no_eta_and_fits_80() -> None:
    """Before the listing ends the total is unknown: say how many objects (and bytes) are done
    and listed so far, draw no bar (a bar of an unknown total looks full) and no ETA; once it
    ends, the bar and the ETA. At 80 columns, with the largest numbers, the line never wraps."""
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, width=80)
    with Progress(console=console) as progress:
        pairs = [(SourceObject("b", f"k{i}", size=512 * 1024**3), Target("d", f"k{i}")) for i in range(3)]
        listed = progress.counting(iter(pairs))
        for _ in range(2):
            next(listed)
        progress._bar.update(progress._task, completed=1_234_566)  # type: ignore[union-attr]
        progress.part_done(Target("d", "k0"), 1023 * 1024**3)
        progress._bar.refresh()  # type: ignore[union-attr]
        during = plain(stream.getvalue())
        stream.truncate(0)
        stream.seek(0)
        for _ in listed:
            pass
        progress.listed(1_234_567, complete=True)
        progress._bar.refresh()  # type: ignore[union-attr]
        after = plain(stream.getvalue())
    drawn = frames(during)
    assert drawn and all(len(line) <= 80 for line in drawn), drawn
    assert "listed so far" in during and "1,234,566" in during, during
    assert "ETA" not in during and "━" not in during and "?" not in during, during
    assert "1.0 TiB" in during, during  # the bytes listed so far: 2 objects of 512 GiB
    drawn = frames(after)
    assert drawn and all(len(line) <= 80 for line in drawn), drawn
    assert "━" in after and "ETA" in after and "1,234,566/1,234,567 objects" in after, after
