"""Which listed objects a command takes: globs on the key, a size range, an age range and a
list of keys. One rule for `ferry copy`, `ferry sync` and `ferry check`, applied to whatever
lists a side (an S3 prefix today), so a filter means the same on every command and side.

The size and age options read and mean what rclone's filtering options do, so a user's
rclone command line carries over:

- `--min-size` / `--max-size`: inclusive bounds (rclone: "don't transfer any file smaller /
  larger than this"), read by the one rule every size option follows (ferry.limits.parse_size):
  units binary, as rclone's suffixes are (`10M`, `10MB` and `10MiB` alike), but a bare number
  is bytes, as for `--part-size`, where rclone reads it as KiB.
- `--min-age` / `--max-age`: on the object's LastModified. A duration (Go's `1h30m`, `300ms`;
  or a number with d, w, M (30 days), y (365 days), or none for seconds) counts back from the
  moment the command starts; a date (`2024-05-01`, `2024-05-01 12:00:00`, RFC 3339) is that
  instant, in the local time zone unless it names one. `--max-age` keeps objects modified at
  or after the cut-off, `--min-age` objects modified at or before it.
- `--files-from FILE`: one key per line, relative to the source prefix; blank lines and lines
  starting with `#` are skipped, and surrounding whitespace is stripped (rclone's rules). A
  leading `/` is the source's root, as rclone reads it: `/a.txt` is `a.txt` (so `//a.txt` names
  a key that itself starts with `/`). The names that match no object are kept (NamedKeys), so
  the command can say which.

An object whose size or modification time is not known passes that filter (nothing to judge
it by). Filtered-out objects are not objects of the command: no side counts them.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import math
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from ferry.errors import ConfigError
from ferry.models import DEFAULT_MARKS_PREFIX

# -- a SRC with wildcards ----------------------------------------------------------------------

WILDCARDS = "*?"  # s5cmd's: `[` is no wildcard, so keys holding brackets are named as written


@dataclass(frozen=True)
class KeyPattern:
    """The part of a SRC from its last `/` before the first wildcard (`*.gz` of
    `s3://b/logs/*.gz`), matched against each key relative to that folder, as s5cmd matches
    it: `*` any run of characters, `/` included (so `**` is `*`), `?` any one character, every
    other character itself. A pattern ending in `/` takes everything under the folders it
    matches (`logs/2024-*/`: what is under each `logs/2024-.../`)."""

    text: str  # as written
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        text = self.text + "*" if self.text.endswith("/") else self.text
        parts = ("." if c == "?" else ".*" if c == "*" else re.escape(c) for c in text)
        object.__setattr__(self, "regex", re.compile("".join(parts), re.DOTALL))

    @property
    def literal(self) -> str:
        """The text before the first wildcard: where a listing of the folder can start."""
        return self.text[: first_wildcard(self.text)]

    def matches(self, relative_key: str) -> bool:
        return self.regex.fullmatch(relative_key) is not None


def first_wildcard(text: str) -> int:
    """Where the first wildcard character is in `text`, or -1."""
    found = [i for i in (text.find(c) for c in WILDCARDS) if i >= 0]
    return min(found) if found else -1


def split_pattern(text: str, separator: str = "/") -> tuple[str, KeyPattern] | None:
    """A SRC's key (or local path) with wildcards, as (its folder: the text to the last
    `separator` before the first wildcard, the pattern of the rest); None without wildcards."""
    at = first_wildcard(text)
    if at < 0:
        return None
    cut = text.rfind(separator, 0, at) + 1
    return text[:cut], KeyPattern(text[cut:])


@dataclass(frozen=True)
class Filters:
    """What a listed object must be to be taken. The default takes everything."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    min_size: int | None = None
    max_size: int | None = None
    modified_from: dt.datetime | None = None  # --max-age: modified at or after this
    modified_to: dt.datetime | None = None  # --min-age: modified at or before this
    keys: NamedKeys | None = None  # --files-from: only these relative keys
    pattern: KeyPattern | None = None  # a SRC with wildcards: the part below its folder

    def admits_key(self, relative_key: str) -> bool:
        """The key alone decides: SRC's pattern, globs and the list of keys."""
        if self.pattern is not None and not self.pattern.matches(relative_key):
            return False
        if self.keys is not None and relative_key not in self.keys:
            return False
        return matches_globs(relative_key, self.include, self.exclude)

    def listing_prefix(self, folder: str) -> str:
        """Where a listing of `folder` for these filters starts: SRC's pattern takes no key
        outside its literal text."""
        return folder + (self.pattern.literal if self.pattern is not None else "")

    @property
    def chooses(self) -> bool:
        """True when an option of the command line leaves keys out (not SRC's own pattern)."""
        return replace(self, pattern=None) != Filters()

    def admits(self, relative_key: str, size: int | None, last_modified: dt.datetime | None) -> bool:
        """Every filter, on what a listing says of one object."""
        if not self.admits_key(relative_key):
            return False
        if size is not None:
            if self.min_size is not None and size < self.min_size:
                return False
            if self.max_size is not None and size > self.max_size:
                return False
        if last_modified is not None:
            moment = _aware(last_modified)
            if self.modified_from is not None and moment < self.modified_from:
                return False
            if self.modified_to is not None and moment > self.modified_to:
                return False
        return True

    @property
    def by_details(self) -> bool:
        """True when a size or a time decides, so an object's details must be known."""
        return any(
            v is not None for v in (self.min_size, self.max_size, self.modified_from, self.modified_to)
        )


def matches_globs(relative_key: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    """Globs apply to the key relative to the source prefix; excludes win over includes."""
    if include and not any(fnmatch.fnmatchcase(relative_key, g) for g in include):
        return False
    return not any(fnmatch.fnmatchcase(relative_key, g) for g in exclude)


def marks_prefixes(configured: str | None) -> tuple[str, ...]:
    """Where Ferry keeps its own upload marks in a bucket: the configured folder and the
    default one (an earlier run may have used either). Keys there are never a side's objects:
    sync and check neither compare, copy nor delete them."""
    return tuple(dict.fromkeys(p for p in (configured, DEFAULT_MARKS_PREFIX) if p))


def is_ferrys_own(key: str, marks: Sequence[str]) -> bool:
    return any(key.startswith(prefix) for prefix in marks)


# -- ages -------------------------------------------------------------------------------------

_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_SUFFIXED = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)(d|w|M|y|)$")
_SUFFIX_SECONDS = {"d": 86400.0, "w": 7 * 86400.0, "M": 30 * 86400.0, "y": 365 * 86400.0, "": 1.0}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?$")


def parse_age(text: str, flag: str, now: dt.datetime) -> dt.datetime:
    """The cut-off instant an age names: `now` minus a duration, or a date's own instant."""
    value = text.strip()
    seconds = _duration_seconds(value)
    if seconds is not None:
        return now - dt.timedelta(seconds=seconds)
    if _DATE.match(value):
        try:
            moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            moment = None
        if moment is not None:
            return _aware(moment) if moment.tzinfo else moment.astimezone()  # local time, as rclone
    raise ConfigError(
        f"{flag} {text!r}: write a duration such as 30m, 2h, 7d, 1h30m, or a date such as 2024-05-01"
    )


def _duration_seconds(value: str) -> float | None:
    """Seconds in a duration as rclone reads one, or None when `value` is not one."""
    suffixed = _SUFFIXED.match(value)
    if suffixed:
        seconds = float(suffixed.group(1)) * _SUFFIX_SECONDS[suffixed.group(2)]
    elif value and _GO_PART.sub("", value) == "":
        seconds = sum(float(n) * _GO_UNITS[u] for n, u in _GO_PART.findall(value))
    else:
        return None
    return seconds if math.isfinite(seconds) and seconds < 1e11 else None


def _aware(moment: dt.datetime) -> dt.datetime:
    """S3's times are UTC; one without a zone is taken as UTC, as S3 writes them."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


# -- a list of keys ---------------------------------------------------------------------------


class NamedKeys:
    """The keys `--files-from` names, and which of them the listings have met: a name that
    matches no object is said by the command (its summary and report), never dropped without
    a word. Two lists are equal when they name the same keys."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(names)
        self._met: set[str] = set()
        self._lock = threading.Lock()

    def __contains__(self, key: object) -> bool:
        if key not in self.names:
            return False
        with self._lock:
            self._met.add(str(key))
        return True

    def __len__(self) -> int:
        return len(self.names)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NamedKeys) and other.names == self.names

    def __hash__(self) -> int:
        return hash(self.names)

    def __repr__(self) -> str:
        return f"NamedKeys({len(self.names)} names)"

    def unmatched(self) -> list[str]:
        """The names no listing met, in key order."""
        with self._lock:
            return sorted(self.names - self._met)


def read_files_from(path: str) -> NamedKeys:
    """The keys a `--files-from` file names, or one sentence saying why it cannot be read."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        raise ConfigError(f"cannot read --files-from {path!r}: {error.strerror}") from error
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError(
            f"--files-from {path!r} is not UTF-8 (byte 0x{data[error.start]:02x} on line {line}): save it as UTF-8"
        ) from error
    keys = set()
    for line in text.splitlines():
        key = line.strip()
        if key and not key.startswith("#"):
            keys.add(key.removeprefix("/"))  # the source's root, as rclone reads it
    return NamedKeys(key for key in keys if key)
