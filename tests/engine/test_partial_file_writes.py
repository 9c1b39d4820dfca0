"""A download's temporary file takes one write at a time, whatever the parts in flight."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from ferry.local import writing
from ferry.local.paths import LocalTarget
from ferry.local.writing import PartialFile


def test_parts_written_at_once_reach_the_file_one_write_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel lets one buffered write into a file at a time and writers queued on it spin
    (a fifth of a 2 GiB download's CPU on ext4 with 16 parts at once): the parts' writes queue
    in the process instead, asleep. Eight threads write their parts at once; no two writes are
    ever in the kernel together, and every byte lands where it belongs."""
    inside, most = 0, 0
    count = threading.Lock()
    real_pwrite = os.pwrite

    def watched_pwrite(fd: int, data: memoryview, offset: int) -> int:
        nonlocal inside, most
        with count:
            inside += 1
            most = max(most, inside)
        time.sleep(0.002)  # long enough for the other threads to arrive
        try:
            return real_pwrite(fd, data, offset)
        finally:
            with count:
                inside -= 1

    monkeypatch.setattr(writing.os, "pwrite", watched_pwrite)
    part, parts = 64 * 1024, 8
    partial = PartialFile.open(LocalTarget(str(tmp_path), "obj"), part * parts, resume=True)
    chunks = [bytes([n]) * part for n in range(parts)]

    def write(n: int) -> None:
        for at in range(0, part, 16 * 1024):
            partial.write_at(n * part + at, chunks[n][at : at + 16 * 1024])

    threads = [threading.Thread(target=write, args=(n,)) for n in range(parts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    partial.finish(None)

    assert most == 1
    assert (tmp_path / "obj").read_bytes() == b"".join(chunks)
