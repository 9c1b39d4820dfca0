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


@pytest.mark.parametrize("left_behind", [None, 3 * 1024, 96 * 1024], ids=["new", "shorter", "longer"])
def test_a_downloads_file_is_sized_without_being_truncated_to_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, left_behind: int | None
) -> None:
    """ext4 takes a file truncated to zero for one being replaced in place and, on close, writes
    every byte of it out before close returns (auto_da_alloc): 0.6 s of a 2 GiB download, spent
    waiting on the disk after the last byte came. The temporary file, new or a crashed run's of
    another size, is sized in one step and never passes through zero."""
    size = 64 * 1024
    target = LocalTarget(str(tmp_path), "obj")
    if left_behind is not None:
        temp = tmp_path / writing.side_name("obj", writing.PARTIAL_SUFFIX, 255)
        temp.write_bytes(b"\x07" * left_behind)
    sizes: list[int] = []
    real_ftruncate = os.ftruncate

    def watched_ftruncate(fd: int, length: int) -> None:
        sizes.append(length)
        real_ftruncate(fd, length)

    monkeypatch.setattr(writing.os, "ftruncate", watched_ftruncate)
    partial = PartialFile.open(target, size, resume=True)
    try:
        assert os.fstat(partial.fd).st_size == size
    finally:
        partial.discard()
    assert 0 not in sizes


def test_a_chunk_reaches_the_file_in_writes_of_at_most_write_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page cache takes a folio as large as each write. On a virtual machine that hands free
    memory back to its host (virtio-balloon free page reporting), folios of 1 MiB come from
    blocks the host took back, and their first touch costs the host's fault per 4 KiB page:
    2 GiB written 1 MiB at a time took 1.2-4.2 s of system CPU, 256 KiB at a time 0.44-0.61 s.
    The engine's 1 MiB chunks reach the file in writes of WRITE_BYTES, byte for byte, a
    short write (which pwrite may make) carried on from where it stopped."""
    limit = 256 * 1024
    lengths: list[int] = []
    real_pwrite = os.pwrite

    def watched_pwrite(fd: int, data: memoryview, offset: int) -> int:
        lengths.append(len(data))
        short = len(data) == limit and len(lengths) == 2  # one short write
        return real_pwrite(fd, data[: len(data) - 1000] if short else data, offset)

    monkeypatch.setattr(writing.os, "pwrite", watched_pwrite)
    chunk = os.urandom(1024 * 1024)
    size = 3 * len(chunk) + 12345
    partial = PartialFile.open(LocalTarget(str(tmp_path), "obj"), size, resume=True)
    for at in range(0, size, len(chunk)):
        partial.write_at(at, chunk[: size - at])
    partial.finish(None)

    assert max(lengths) == limit
    assert sum(lengths) == size + 1000  # the short write's last 1,000 bytes were written again
    assert (tmp_path / "obj").read_bytes() == (chunk * 4)[:size]


def test_a_name_whose_side_names_are_too_long_gets_hashed_side_names_that_a_resume_finds(
    tmp_path: Path,
) -> None:
    """A 250-byte name fits the file system's 255; `.NAME.ferry-partial` does not, so the
    temporary file and its record take names made from the name's hash, and a second opening
    (a resume) finds the same two."""
    name = "n" * 250
    target = LocalTarget(str(tmp_path), name)
    first = PartialFile.open(target, 10, resume=True)
    first.write_at(0, b"01234")
    first.start_record({"header": 1}, [{"part": 1}])
    first.keep()
    hashed = {p.name for p in tmp_path.iterdir()}
    assert hashed == {
        writing.side_name(name, s, 255) for s in (writing.PARTIAL_SUFFIX, writing.RECORD_SUFFIX)
    }
    assert all(n.startswith(".ferry-") for n in hashed)

    again = PartialFile.open(target, 10, resume=True)
    assert again.load_record() == ({"header": 1}, [{"part": 1}])
    again.write_at(5, b"56789")
    again.finish(None)
    assert {p.name for p in tmp_path.iterdir()} == {name}
    assert (tmp_path / name).read_bytes() == b"0123456789"


def _folder_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []
    real_open = os.open

    def watched_open(path: str, flags: int, *args: object, **kwargs: object) -> int:
        if flags & os.O_DIRECTORY:
            opened.append(path)
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(writing.os, "open", watched_open)
    return opened


def test_a_file_directly_in_the_destination_is_looked_for_without_opening_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The destination folder is opened once per downloaded file (for the temporary file and
    the rename), not a second time to look for a file already there: two system calls per
    file, each a hand-over of the interpreter's lock between the threads of a download."""
    (tmp_path / "there").write_bytes(b"12345")
    opened = _folder_opens(monkeypatch)
    assert writing.open_existing(LocalTarget(str(tmp_path), "missing")) is None
    reader = writing.open_existing(LocalTarget(str(tmp_path), "there"))
    assert reader is not None and reader.size == 5
    reader.close()
    assert opened == []


@pytest.mark.parametrize("what", ["folder", "link", "fifo"])
def test_what_stands_directly_in_the_destination_under_the_files_name_is_refused(
    tmp_path: Path, what: str
) -> None:
    name = tmp_path / "obj"
    if what == "folder":
        name.mkdir()
    elif what == "link":
        (tmp_path / "elsewhere").write_bytes(b"x")
        name.symlink_to(tmp_path / "elsewhere")
    else:
        os.mkfifo(name)
    with pytest.raises(writing.CopyFailed, match=f"{name} is .*: it is not replaced by a file"):
        writing.open_existing(LocalTarget(str(tmp_path), "obj"))


def test_a_destination_that_is_a_file_is_named_when_looking_for_a_file_in_it(tmp_path: Path) -> None:
    (tmp_path / "plain").write_bytes(b"x")
    with pytest.raises(writing.CopyFailed, match="the destination .*plain is a file, not a folder"):
        writing.open_existing(LocalTarget(str(tmp_path / "plain"), "obj"))
    assert writing.open_existing(LocalTarget(str(tmp_path / "absent"), "obj")) is None


def test_a_file_in_a_folder_below_the_destination_is_still_reached_folder_by_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below the destination, folders are opened one at a time and never through a link."""
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "obj").write_bytes(b"abc")
    opened = _folder_opens(monkeypatch)
    reader = writing.open_existing(LocalTarget(str(tmp_path), "inner/obj"))
    assert reader is not None and reader.size == 3
    reader.close()
    assert opened == [str(tmp_path), "inner"]


def test_a_file_in_a_destination_whose_path_and_name_pass_path_max_is_still_found(tmp_path: Path) -> None:
    """The folder-relative lookup worked however long the destination's path: a folder near
    PATH_MAX (4,096 bytes on Linux) with a long name in it is still looked in, not refused."""
    root = str(tmp_path)
    while len(root) < 3900:
        root = os.path.join(root, "d" * min(200, 3900 - len(root)))
    os.makedirs(root)
    name = "n" * 250
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o666, dir_fd=folder)
        os.write(fd, b"12345")
        os.close(fd)
    finally:
        os.close(folder)
    assert len(os.fsencode(os.path.join(root, name))) > 4096
    reader = writing.open_existing(LocalTarget(root, name))
    assert reader is not None and reader.size == 5
    reader.close()
    assert writing.open_existing(LocalTarget(root, "m" * 250)) is None
