"""How a download's plan is fetched: consecutive parts in runs of one ranged GET each."""

from __future__ import annotations

import pytest

from ferry.engine.files.downloads import RANGE_BYTES, Downloader, runs_of
from ferry.engine.parts.runner import Failures
from ferry.errors import CopyFailed
from ferry.limits import MiB, Part, uniform_parts
from ferry.local.paths import LocalTarget
from ferry.local.writing import PartialFile


def spans(runs: list[list[Part]]) -> list[tuple[int, int, int]]:
    return [(run[0].start, run[-1].end, len(run)) for run in runs]


def test_a_2_gib_object_in_8_mib_parts_takes_32_gets_of_8_parts() -> None:
    runs = runs_of(uniform_parts(2048 * MiB, 8 * MiB))
    assert len(runs) == 32 and {len(run) for run in runs} == {8}
    assert spans(runs)[0] == (0, RANGE_BYTES, 8) and spans(runs)[-1] == (
        2048 * MiB - RANGE_BYTES,
        2048 * MiB,
        8,
    )


def test_a_part_already_written_ends_a_run_and_a_large_part_runs_alone() -> None:
    plan = uniform_parts(40 * MiB, 8 * MiB)  # five parts
    left = [p for p in plan if p.number != 3]  # part 3 resumed from the file
    assert spans(runs_of(left)) == [(0, 16 * MiB, 2), (24 * MiB, 40 * MiB, 2)]
    big = uniform_parts(600 * MiB, 200 * MiB)
    assert spans(runs_of(big)) == [(0, 200 * MiB, 1), (200 * MiB, 400 * MiB, 1), (400 * MiB, 600 * MiB, 1)]


def test_uneven_parts_fill_a_run_up_to_its_bytes_and_never_past() -> None:
    sizes = [30 * MiB, 30 * MiB, 5 * MiB, 1 * MiB, 64 * MiB, 1]
    plan, start = [], 0
    for number, size in enumerate(sizes, 1):
        plan.append(Part(number, start, start + size))
        start += size
    runs = runs_of(plan)
    assert spans(runs) == [
        (0, 60 * MiB, 2),
        (60 * MiB, 66 * MiB, 2),
        (66 * MiB, 130 * MiB, 1),
        (130 * MiB, 130 * MiB + 1, 1),
    ]
    assert all(run[-1].end - run[0].start <= RANGE_BYTES for run in runs if len(run) > 1)
    assert [p for run in runs for p in run] == plan


def test_at_s3s_10000_parts_every_part_is_fetched_once_in_order() -> None:
    """At the limit itself: 5 TiB in 10,000 parts of 524.3 MiB (each its own GET), and 10,000
    parts of 8 MiB (1,250 GETs of eight)."""
    from ferry.limits import MAX_PARTS, TiB

    largest = uniform_parts(5 * TiB, -(-5 * TiB // MAX_PARTS))
    runs = runs_of(largest)
    assert len(largest) == MAX_PARTS and len(runs) == MAX_PARTS and {len(run) for run in runs} == {1}
    many = uniform_parts(MAX_PARTS * 8 * MiB, 8 * MiB)
    runs = runs_of(many)
    assert len(many) == MAX_PARTS and len(runs) == 1_250 and {len(run) for run in runs} == {8}
    assert [p for run in runs for p in run] == many


class _Body:
    """A ranged GET's body of `size` bytes, read a chunk at a time; counts what was read."""

    def __init__(self, size: int) -> None:
        self.left, self.read_bytes = size, 0

    def read(self, amount: int) -> bytes:
        chunk = min(amount, self.left)
        self.left -= chunk
        self.read_bytes += chunk
        return b"\0" * chunk

    def close(self) -> None:
        pass


def test_a_run_stops_at_its_next_parts_end_once_another_run_failed(tmp_path) -> None:
    """A run is one GET of up to RANGE_BYTES (eight 8 MiB parts): once another run has failed,
    it reads on only to the end of the part it is in, not to the end of its 64 MiB, and gives
    up as a cancellation (never the reason reported for the object)."""
    run = uniform_parts(RANGE_BYTES, 8 * MiB)
    body = _Body(RANGE_BYTES)
    failures = Failures()
    done: list[int] = []

    def finished(part: Part, _value: str) -> None:
        done.append(part.number)
        if part.number == 1:  # another run fails while this one is in its first part
            failures.add(CopyFailed("another run: 403 Forbidden"))

    class Source:
        def _get(self, _info: object, asked: tuple[int, int]) -> dict[str, object]:
            return {"Body": body, "ContentRange": f"bytes {asked[0]}-{asked[1] - 1}/{RANGE_BYTES}"}

    partial = PartialFile.open(LocalTarget(str(tmp_path), "obj"), RANGE_BYTES, resume=True)
    try:
        with pytest.raises(CopyFailed) as stopped:
            Downloader._fetch_run(Source(), None, partial, run, None, failures, finished)  # type: ignore[arg-type]
    finally:
        partial.discard()

    assert done == [1]
    assert body.read_bytes == 8 * MiB
    assert getattr(stopped.value, "is_cancellation", False)
