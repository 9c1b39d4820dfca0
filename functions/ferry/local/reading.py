"""Reading a local file at offsets, for an upload's parts (in parallel) or a comparison.

The file is opened once per copy and read with `os.preadv` into the caller's buffer: no
second buffer, no shared file position between the threads reading its parts. What it was
when opened (size, modification time) is kept, so a file that changes while it is read is
caught before its copy is kept.
"""

from __future__ import annotations

import os
import stat

from ferry.errors import CopyFailed

CHANGED = "the file changed while it was read (its size or modification time): not copied; run again"


class LocalReader:
    """One open regular file: `size` and `mtime_ns` as it was opened."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise CopyFailed("not a regular file: only regular files are copied")
        self.size = info.st_size
        self.mtime_ns = info.st_mtime_ns

    @classmethod
    def open(cls, path: str, *, follow_symlinks: bool = True) -> LocalReader:
        """Open `path` for reading; without following a link there unless asked to (a file
        replaced by a link after the listing is not read through it)."""
        flags = os.O_RDONLY | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
        return cls(os.open(path, flags), path)

    def __enter__(self) -> LocalReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def read_at(self, offset: int, view: memoryview) -> None:
        """Fill `view` with the bytes from `offset`; a file shorter than that has changed."""
        got = 0
        while got < len(view):
            n = os.preadv(self.fd, [view[got:]], offset + got)
            if n == 0:
                raise CopyFailed(CHANGED)
            got += n

    def check_unchanged(self) -> None:
        """Raise if the file is not what it was when opened: the bytes read may mix versions."""
        info = os.fstat(self.fd)
        if (info.st_size, info.st_mtime_ns) != (self.size, self.mtime_ns):
            raise CopyFailed(CHANGED)
