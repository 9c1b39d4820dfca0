"""Where a downloaded key lands under a destination folder, and why some keys cannot land.

S3 keys are any UTF-8 text up to 1,024 bytes; file names are not. A key is refused alone,
with its reason, when it holds a NUL character, has a `..` segment (it would lead outside the
destination folder), a `.` or empty segment (it names no file of its own), or a segment
longer than the destination's file system allows. A key ending in `/` is a folder marker:
folders are not created, so it is skipped (one with data in it cannot be a file and fails).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ferry.models import Status

DEFAULT_NAME_MAX = 255
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_local(text: str) -> bool:
    """A copy argument names a local file or folder unless it is a URL: `s3://...`, or any
    other scheme (`S3://`, `https://`), which the S3 side refuses with its own words."""
    return not _URL.match(text)


@dataclass(frozen=True)
class LocalTarget:
    """A file to write under `root`: `relative` is the key relative to the source prefix,
    `/`-separated. `problem` says why it cannot be written (then nothing is)."""

    root: str
    relative: str
    problem: str | None = None
    problem_status: Status = Status.FAILED

    @property
    def path(self) -> str:
        """The file's path as a person would name it."""
        return os.path.join(self.root, *self.relative.split("/")) if self.relative else self.root

    @property
    def folders(self) -> list[str]:
        """The folders between the root and the file, outermost first."""
        return self.relative.split("/")[:-1]

    @property
    def name(self) -> str:
        return self.relative.rsplit("/", 1)[-1]


def name_max(folder: str) -> int:
    """The longest file name (in bytes) the file system under `folder` takes: the folder's
    own, or its nearest existing parent's when it is not there yet."""
    path = os.path.abspath(folder)
    while True:
        try:
            return int(os.pathconf(path, "PC_NAME_MAX"))
        except (OSError, ValueError):
            parent = os.path.dirname(path)
            if parent == path:
                return DEFAULT_NAME_MAX
            path = parent


def target_for(root: str, relative: str, size: int | None, longest: int) -> LocalTarget:
    """The file a key becomes, or the reason it cannot become one (see the module's rules)."""
    if relative == "" or relative.endswith("/"):
        if size:
            return LocalTarget(
                root,
                relative,
                f"the key ends in '/' but holds {size} bytes: a name ending in '/' cannot be a file",
            )
        return LocalTarget(
            root,
            relative,
            "a folder marker (a key ending in '/'): folders are not created",
            Status.SKIPPED,
        )
    problem = unsafe_key_reason(relative, longest)
    return LocalTarget(root, relative, problem)


def unsafe_key_reason(relative: str, longest: int) -> str | None:
    """Why a key (relative to the source prefix) cannot be a file name here, or None."""
    if "\0" in relative:
        return "the key holds a NUL character, which no file name can hold"
    for segment in relative.split("/"):
        if segment == "..":
            return "the key has a '..' segment, which would lead outside the destination folder"
        if segment == ".":
            return "the key has a '.' segment, which names no file of its own"
        if segment == "":
            return "the key has an empty segment ('//' or a leading '/'), which names no file"
        size = len(os.fsencode(segment))
        if size > longest:
            return (
                f"the name {_short(segment)} is {size} bytes, longer than this file system allows ({longest})"
            )
    return None


def _short(name: str) -> str:
    return repr(name if len(name) <= 40 else name[:37] + "...")
