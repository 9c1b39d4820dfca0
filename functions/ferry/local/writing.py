"""Writing a download: a temporary file beside the final name, a record of the parts written,
and the rename that gives the file its name once the engine has proved it.

- The temporary file is `.NAME.ferry-partial` in the destination's own folder (so the rename
  is atomic, on one file system), sized up front and written at offsets (`os.pwrite`) by as
  many parts at once as the engine runs. A process killed mid-way leaves only it, never a
  partial file under the final name.
- Its record, `.NAME.ferry-parts`, is a JSON line naming the source and part plan (the engine
  writes what it needs), then one line per part written. A later run that finds the same
  source and plan rewrites only the parts the record lacks (after checking the rest).
- Folders under the destination folder are created and opened one at a time, relative to the
  one above (`dir_fd`), never through a symbolic link (`O_NOFOLLOW`): a link inside the
  destination cannot lead a write outside it. The destination folder itself is the user's
  choice and may be reached through links.
- Permissions are not copied: files are created 0666 and folders 0777, less the umask.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
import threading
from typing import Any

from ferry.errors import CopyFailed
from ferry.local.paths import LocalTarget
from ferry.local.reading import LocalReader

PARTIAL_SUFFIX = ".ferry-partial"
RECORD_SUFFIX = ".ferry-parts"
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Bytes handed to the kernel per write. The page cache takes a folio as large as the write (ext4
# and others have large folios), and on a virtual machine that hands free memory back to its
# host (virtio-balloon free page reporting: blocks of 2 MiB and up), a folio of 1 MiB is often
# carved from such a block, whose first touch costs the host's fault on every 4 KiB page.
# Writing 2 GiB 1 MiB at a time took 1.2-4.2 s of system CPU there, 256 KiB at a time
# 0.44-0.61 s; on other machines the smaller writes cost four system calls per MiB instead of one.
WRITE_BYTES = 256 * 1024


def is_partial_name(name: str) -> bool:
    """A download's temporary file or record, which an upload of the folder leaves out."""
    return name.startswith(".") and name.endswith((PARTIAL_SUFFIX, RECORD_SUFFIX))


def side_name(name: str, suffix: str, longest: int) -> str:
    """`.NAME<suffix>`, or a name made from NAME's hash when that would be too long."""
    candidate = _side(name, suffix)
    if len(os.fsencode(candidate)) <= longest:
        return candidate
    return f".ferry-{hashlib.sha256(os.fsencode(name)).hexdigest()[:24]}{suffix}"


def _side(name: str, suffix: str) -> str:
    return f".{name}{suffix}"


def open_folder(target: LocalTarget, *, create: bool) -> int | None:
    """A descriptor of the folder the target's file goes in; None when it is not there and
    `create` is off. Raises CopyFailed when a file or a link stands where a folder must be."""
    try:
        fd = _open_root(target.root, create)
    except FileNotFoundError:
        return None
    except NotADirectoryError as error:
        raise CopyFailed(f"the destination {target.root} is a file, not a folder") from error
    walked = target.root
    try:
        for name in target.folders:
            walked = os.path.join(walked, name)
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
            try:
                inner = os.open(name, _FOLDER_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if create:
                    raise
                os.close(fd)
                return None
            except OSError as error:
                if error.errno in (errno.ENOTDIR, errno.ELOOP):
                    raise CopyFailed(_in_the_way(fd, name, walked)) from error
                raise
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_root(root: str, create: bool) -> int:
    """The destination folder, made first only when it is not there: a download opens it for
    every file, and making it each time (os.makedirs) was three system calls more per file."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    try:
        return os.open(root, flags)
    except FileNotFoundError:
        if not create:
            raise
    _make_root(root)
    return os.open(root, flags)


def _make_root(root: str) -> None:
    try:
        os.makedirs(root, exist_ok=True)
    except FileExistsError as error:  # a file has the folder's name
        raise CopyFailed(f"the destination {root} is a file, not a folder") from error


def _in_the_way(folder_fd: int, name: str, shown: str) -> str:
    try:
        mode = os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_mode
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        return f"{shown} is a symbolic link, which is not followed inside the destination"
    return f"{shown} is a file where the key needs a folder"


def open_existing(target: LocalTarget) -> LocalReader | None:
    """The file already at the target's name, opened for comparing; None when there is none.
    A folder, a link or a special file there is refused: it is never replaced."""
    if target.name and not target.folders:
        try:
            return _existing_in_root(target)
        except OSError as error:
            if error.errno != errno.ENAMETOOLONG:
                raise
    folder = open_folder(target, create=False)
    if folder is None:
        return None
    try:
        try:
            mode = os.stat(target.name, dir_fd=folder, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return None
        _refuse_unless_file(target, mode)
        fd = os.open(target.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        return LocalReader(fd, target.path)
    finally:
        os.close(folder)


def _existing_in_root(target: LocalTarget) -> LocalReader | None:
    """A file directly in the destination folder, looked for by its path: the folder is the
    user's choice and may be reached through links, so nothing is walked, and not opening it
    saves two system calls per file (each a hand-over of the interpreter's lock between the
    threads of a download). A path longer than the system takes (ENAMETOOLONG, a folder near
    PATH_MAX) is left to the caller, which looks in the opened folder instead."""
    try:
        mode = os.lstat(target.path).st_mode
    except FileNotFoundError:
        return None
    except NotADirectoryError as error:
        raise CopyFailed(f"the destination {target.root} is a file, not a folder") from error
    _refuse_unless_file(target, mode)
    return LocalReader(os.open(target.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), target.path)


def _refuse_unless_file(target: LocalTarget, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise CopyFailed(f"{target.path} {_what(mode)}: it is not replaced by a file")


def _what(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "is a folder"
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    return "is not a regular file"


class PartialFile:
    """One download in progress: its temporary file and its record of parts written."""

    def __init__(self, target: LocalTarget, folder: int, temp: str, record: str, fd: int) -> None:
        self.target = target
        self._folder = folder
        self._temp = temp
        self._record = record
        self.fd = fd
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._record_fd: int | None = None
        self._has_record = False  # a record may be there: removed with the file

    @classmethod
    def open(cls, target: LocalTarget, size: int, *, resume: bool) -> PartialFile:
        """Create the temporary file, empty, to be written from its start; or, with `resume`,
        open the one a crashed run left (with its record), `size` bytes long."""
        folder = open_folder(target, create=True)
        assert folder is not None
        try:
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (0 if resume else os.O_TRUNC)
            temp, record = _side(target.name, PARTIAL_SUFFIX), _side(target.name, RECORD_SUFFIX)
            try:
                fd = os.open(temp, flags, 0o666, dir_fd=folder)
            except OSError as error:
                # The folder's longest name is asked only for a name too long for it (one
                # system call less per file); the record's name is the shorter, so it fits
                # whenever the temporary file's does.
                if error.errno != errno.ENAMETOOLONG:
                    raise
                longest = os.fpathconf(folder, "PC_NAME_MAX")
                temp = side_name(target.name, PARTIAL_SUFFIX, longest)
                record = side_name(target.name, RECORD_SUFFIX, longest)
                fd = os.open(temp, flags, 0o666, dir_fd=folder)
        except BaseException:
            os.close(folder)
            raise
        partial = cls(target, folder, temp, record, fd)
        partial._has_record = resume
        try:
            # Sized up front, for writes at any offset; in one step, never through zero: ext4
            # takes a file truncated to zero for one replaced in place and writes all of it out
            # on close (auto_da_alloc), seconds a GiB of waiting after the last byte came. Bytes
            # a crashed run left are overwritten unless its record vouches for them.
            if resume and os.fstat(fd).st_size != size:
                os.ftruncate(fd, size)
        except BaseException:
            partial.discard()
            raise
        return partial

    # -- bytes ---------------------------------------------------------------------------------

    def write_at(self, offset: int, data: bytes | memoryview) -> None:
        """One writer at a time: the kernel lets only one buffered write into a file at once
        (the inode's lock), and writers queued there spin on it, burning CPU (on ext4, 16 parts
        writing a 2 GiB download at once spent a fifth of the run's CPU in rwsem_spin_on_owner).
        Waiting here sleeps instead; the other parts go on reading their sockets meanwhile."""
        view = memoryview(data)
        with self._write_lock:
            while view:
                written = os.pwrite(self.fd, view[:WRITE_BYTES], offset)
                view, offset = view[written:], offset + written

    def read_at(self, offset: int, view: memoryview) -> None:
        got = 0
        while got < len(view):
            n = os.preadv(self.fd, [view[got:]], offset + got)
            if n == 0:
                raise CopyFailed("the temporary file is shorter than the object: it changed")
            got += n

    # -- the record of parts written -----------------------------------------------------------

    def load_record(self) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """(header, one entry per part written), as a crashed run left them; None if absent or
        unreadable. A torn last line (the crash came mid-write) is left out."""
        try:
            fd = os.open(self._record, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self._folder)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as file:
            lines = file.read().split(b"\n")
        try:
            header = json.loads(lines[0])
        except ValueError:
            return None
        entries = []
        for line in lines[1:]:
            try:
                entries.append(json.loads(line))
            except ValueError:
                continue
        return (header, entries) if isinstance(header, dict) else None

    def start_record(self, header: dict[str, Any], entries: list[dict[str, Any]]) -> None:
        """Write the record anew: the header, then the entries that still hold."""
        self._close_record()
        fd = os.open(
            self._record,
            os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o666,
            dir_fd=self._folder,
        )
        self._has_record = True
        lines = [json.dumps(header, separators=(",", ":"))] + [
            json.dumps(e, separators=(",", ":")) for e in entries
        ]
        os.write(fd, ("\n".join(lines) + "\n").encode())
        self._record_fd = fd

    def add_to_record(self, entry: dict[str, Any]) -> None:
        """One part written: one line, in one write."""
        line = (json.dumps(entry, separators=(",", ":")) + "\n").encode()
        with self._lock:
            if self._record_fd is not None:
                os.write(self._record_fd, line)

    # -- the end -------------------------------------------------------------------------------

    def finish(self, mtime_ns: int | None) -> None:
        """Give the proved file its name (and the object's time), and drop the record."""
        try:
            if mtime_ns is not None:
                os.utime(self.fd, ns=(mtime_ns, mtime_ns))
            os.close(self.fd)
            self.fd = -1
            try:
                os.replace(self._temp, self.target.name, src_dir_fd=self._folder, dst_dir_fd=self._folder)
            except OSError as error:
                if error.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                    raise CopyFailed(
                        f"{self.target.path} is a folder: a file cannot take its name"
                    ) from error
                raise
        except BaseException:
            self.discard()
            raise
        self._close_record()
        if self._has_record:
            self._unlink(self._record)
        self._close_folder()

    def discard(self) -> None:
        """Remove the temporary file and its record: nothing of this download stays."""
        self._close_files()
        if self._folder >= 0:
            self._unlink(self._temp)
            if self._has_record:
                self._unlink(self._record)
        self._close_folder()

    def keep(self) -> None:
        """Leave the temporary file and its record for a later run to resume."""
        self._close_files()
        self._close_folder()

    def _close_folder(self) -> None:
        if self._folder >= 0:
            os.close(self._folder)
            self._folder = -1

    def _close_files(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self._close_record()

    def _close_record(self) -> None:
        if self._record_fd is not None:
            os.close(self._record_fd)
            self._record_fd = None

    def _unlink(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self._folder)
