"""Removing a file `ferry sync --delete` found in a local destination that its source lacks.

Only a regular file is removed, and only when it is still the file the listing saw: the same
size and modification time, to the nanosecond (the local counterpart of the If-Match an S3
delete carries). The folders down to it are opened one at a time without following a link
(writing.open_folder), as a download's are, so nothing outside the destination folder is ever
removed. Folders are never removed, even when this leaves them empty (as rclone's sync keeps
them unless --rmdirs).

Between the check and the unlink another writer could still replace the file: that write is
lost, as it would be on an S3 server that ignores If-Match.
"""

from __future__ import annotations

import os
import stat

from ferry.local.paths import LocalTarget
from ferry.local.writing import open_folder

REMOVED = "removed"
GONE = "already gone"
CHANGED = "changed since it was listed: kept"
NOT_A_FILE = "not a regular file: kept (only files are deleted)"


def remove_file(root: str, relative: str, size: int | None, mtime_ns: int | None) -> str:
    """Remove `relative` under `root` if it is the regular file listed; one of the words above
    says what happened. Raises OSError (no permission, say) and CopyFailed (a link or a file
    where a folder should be, on the way) for the caller to report."""
    target = LocalTarget(root, relative)
    folder = open_folder(target, create=False)
    if folder is None:
        return GONE
    try:
        try:
            info = os.stat(target.name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return GONE
        if not stat.S_ISREG(info.st_mode):
            return NOT_A_FILE
        if (info.st_size, info.st_mtime_ns) != (size, mtime_ns):
            return CHANGED
        try:
            os.unlink(target.name, dir_fd=folder)
        except FileNotFoundError:
            return GONE
        return REMOVED
    finally:
        os.close(folder)
