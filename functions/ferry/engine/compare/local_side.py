"""A local folder as one side of `ferry sync` or `ferry check`: its files as `Entry`s, in the
order S3 lists keys, so it walks side by side with an S3 prefix (side_listing.py).

The key of a file is its path relative to the folder with '/' between folders, and the order
is S3's: UTF-8 bytes of the whole key, so `a.b` comes before `a/b` ('.' is below '/'), which a
plain `os.walk` or a sort by name does not give. ferry.local.files walks that way already (the
upload lists with it); this module turns what it finds into entries:

- a regular file: its size and modification time (the age filters judge that time);
- what `ferry copy` does not copy, with its reason (`problem`): a symbolic link not followed
  (a choice, `chosen`), a FIFO, socket or device (a choice), a name that is not UTF-8, or a
  folder that cannot be read (listed once, as `name/`, and covering its subtree);
- never Ferry's own unfinished downloads (`.NAME.ferry-partial`, `.NAME.ferry-parts`): like
  the upload marks in a bucket, they are no side's files, never compared, copied or deleted.

Folders themselves are not entries (S3 has none to compare them with).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ferry.engine.compare.side_listing import Entry
from ferry.filters import Filters
from ferry.local.files import LocalFile, admits_file, walk
from ferry.local.writing import is_partial_name
from ferry.models import Status


@dataclass(frozen=True)
class LocalSide:
    """A folder on this machine as one side (`name` is "source" or "destination")."""

    root: str
    name: str
    filters: Filters = Filters()
    follow_symlinks: bool = False
    leave_out: Callable[[str], bool] | None = None  # relative keys that are no side's files

    @property
    def bucket(self) -> None:
        return None

    @property
    def folder(self) -> str:
        return self.root

    def url(self, key: str) -> str:
        """An entry's `key` on this side is already its path."""
        return key

    def path(self, relative_key: str) -> str:
        return os.path.join(self.root, *relative_key.split("/")) if relative_key else self.root

    def entries(self) -> Iterator[Entry]:
        """Every file the filters take, in key order."""
        for file in self._files(self.filters.admits_key):
            if admits_file(self.filters, file):
                yield _entry(file)

    def all_entries(self) -> Iterator[Entry]:
        """Every file, before any filter."""
        for file in self._files(lambda key: True):
            yield _entry(file)

    def _files(self, keep: Callable[[str], bool]) -> Iterator[LocalFile]:
        if not os.path.lexists(self.root):
            return  # a download's folder not made yet holds nothing (the caller checked a source's)
        for file in walk(self.root, keep, follow_symlinks=self.follow_symlinks):
            if is_partial_name(os.path.basename(file.path)) and not file.key.endswith("/"):
                continue
            if self.leave_out is not None and self.leave_out(file.key):
                continue
            yield file


def _entry(file: LocalFile) -> Entry:
    if file.problem is not None:
        return Entry(
            file.key,
            file.path,
            None,
            None,
            problem=file.problem,
            chosen=file.problem_status == Status.SKIPPED,
        )
    return Entry(file.key, file.path, file.size, None, file.modified, mtime_ns=file.mtime_ns)
