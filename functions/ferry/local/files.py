"""The files a folder holds, as an upload lists them: in the order S3 lists their keys.

Every entry under the folder comes back once: a regular file with its size and modification
time, or an entry that is not copied with the reason (a symbolic link when links are not
followed, a FIFO or socket, a folder that cannot be read, a name that is not UTF-8). Folders
themselves are not entries: S3 has no empty folders, so none is created there.

Keys are in S3's order (UTF-8 bytes; a folder's files sort as `name/...`), so the windows of
keys the engine lists at the destination are contiguous ranges. Only one folder's names are
held at a time.
"""

from __future__ import annotations

import datetime as dt
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ferry.filters import Filters
from ferry.local.writing import is_partial_name
from ferry.models import SYMLINK_SKIPPED, Status


@dataclass(frozen=True)
class LocalFile:
    """One entry of a local source: `key` is its path relative to the source, `/`-separated.

    `problem` says why it is not copied, and `problem_status` whether that counts as skipped
    (a choice: a symbolic link not followed) or failed (something to fix)."""

    path: str
    key: str
    size: int = 0
    mtime_ns: int = 0
    problem: str | None = None
    problem_status: Status = Status.FAILED
    named: bool = False  # named on the command line: read through a link, as `cp` does

    @property
    def modified(self) -> dt.datetime | None:
        """The modification time, as the age filters judge it (None for an entry not read)."""
        if self.problem is not None:
            return None
        return dt.datetime.fromtimestamp(self.mtime_ns / 1e9, dt.UTC)


_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def one_file(path: str, name: str) -> LocalFile:
    """The single file a copy names (a link the user names is followed, as `cp` does)."""
    info = os.stat(path)
    return LocalFile(path, name, info.st_size, info.st_mtime_ns, named=True)


def admits_file(filters: Filters, file: LocalFile) -> bool:
    """The filters on a file as on an object: its relative path, size and modification time.
    An entry that is not read (a link not followed, an unreadable folder) has neither size nor
    time, and passes those filters: it is still accounted for. A folder that cannot be read
    (its key ends in '/') always passes: what it holds is unknown, so no filter can leave it out."""
    if file.problem is not None:
        return file.key.endswith("/") or file.key == "" or filters.admits_key(file.key)
    return filters.admits(file.key, file.size, file.modified)


def local_files(root: str, filters: Filters, *, follow_symlinks: bool) -> Iterator[LocalFile]:
    """Every entry under `root` the filters take, in key order."""
    for file in walk(root, filters.admits_key, follow_symlinks=follow_symlinks):
        if admits_file(filters, file):
            yield file


def walk(root: str, keep: Callable[[str], bool], *, follow_symlinks: bool) -> Iterator[LocalFile]:
    """Every entry under `root` whose key `keep` accepts, depth first, in key order."""
    top = os.stat(root)
    yield from _folder(root, "", keep, follow_symlinks, frozenset({(top.st_dev, top.st_ino)}))


@dataclass
class _Entry:
    name: str
    path: str
    info: os.stat_result | None  # the entry's own, or its target's when links are followed
    link: bool
    problem: str | None = None

    @property
    def is_folder(self) -> bool:
        return self.info is not None and stat.S_ISDIR(self.info.st_mode) and self.problem is None

    @property
    def order(self) -> bytes:
        return os.fsencode(self.name) + (b"/" if self.is_folder else b"")


def _folder(
    folder: str,
    prefix: str,
    keep: Callable[[str], bool],
    follow: bool,
    above: frozenset[tuple[int, int]],
) -> Iterator[LocalFile]:
    try:
        with os.scandir(folder) as listing:
            entries = [_entry(item, follow) for item in listing]
    except OSError as error:
        yield LocalFile(folder, prefix, problem=f"cannot read the folder: {error.strerror}")
        return
    for entry in sorted(entries, key=lambda e: e.order):
        key = prefix + entry.name
        if entry.is_folder:
            assert entry.info is not None
            identity = (entry.info.st_dev, entry.info.st_ino)
            if identity in above:
                if keep(key):
                    yield LocalFile(
                        entry.path,
                        key + "/",
                        problem="a symbolic link to a folder it is inside of (a loop): not followed",
                    )
                continue
            yield from _folder(entry.path, key + "/", keep, follow, above | {identity})
        elif keep(key):
            yield _file(entry, key)


def _entry(item: os.DirEntry[str], follow: bool) -> _Entry:
    link = item.is_symlink()
    try:
        if link and not follow:
            return _Entry(item.name, item.path, item.stat(follow_symlinks=False), True, SYMLINK_SKIPPED)
        return _Entry(item.name, item.path, item.stat(follow_symlinks=follow), link)
    except FileNotFoundError:
        if link:
            return _Entry(
                item.name, item.path, None, True, "a symbolic link to nothing (its target is missing)"
            )
        return _Entry(item.name, item.path, None, False, "removed while the folder was listed")
    except OSError as error:
        return _Entry(item.name, item.path, None, link, f"cannot read it: {error.strerror}")


def _file(entry: _Entry, key: str) -> LocalFile:
    if entry.problem is not None:
        status = Status.SKIPPED if entry.problem == SYMLINK_SKIPPED else Status.FAILED
        return LocalFile(entry.path, key, problem=entry.problem, problem_status=status)
    assert entry.info is not None
    mode = entry.info.st_mode
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        return LocalFile(
            entry.path, key, problem=f"{kind}: only regular files are copied", problem_status=Status.SKIPPED
        )
    if is_partial_name(entry.name):
        return LocalFile(
            entry.path,
            key,
            problem="an unfinished download of ferry's (a partial file): not copied",
            problem_status=Status.SKIPPED,
        )
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return LocalFile(
            _printable(entry.path),
            _printable(key),
            problem="the file name is not UTF-8, and S3 keys are UTF-8 text",
        )
    return LocalFile(entry.path, key, entry.info.st_size, entry.info.st_mtime_ns)


def _printable(name: str) -> str:
    """A name that is not UTF-8, its odd bytes written as \\xNN, so reports and the terminal
    can show it."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")
