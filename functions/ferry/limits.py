"""Every S3 size limit Ferry respects, and the part plans derived from them.

Kept in one place (as s3transfer's chunk-size adjuster does) so that no strategy can
disagree with another about what S3 accepts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ferry.errors import ConfigError

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
TiB = 1024 * GiB

MIN_PART_SIZE = 5 * MiB
MAX_PART_SIZE = 5 * GiB
MAX_PARTS = 10_000
MAX_OBJECT_SIZE = 5 * TiB
MAX_SINGLE_COPY = 5 * GiB  # CopyObject and PutObject accept at most this in one request.

DEFAULT_STREAM_PART_SIZE = 8 * MiB
DEFAULT_COPY_PART_SIZE = 256 * MiB
DEFAULT_MULTIPART_THRESHOLD = 16 * MiB
MAX_REPRODUCED_STREAM_PART = 256 * MiB
# Object bytes a streaming copy holds at once by default. The process itself (Python, boto3,
# the clients) takes about 70 MiB beside them: 160 MiB keeps the whole `ferry` process within
# 256 MiB whatever the source's parts (16 parts of 8 MiB fit; of 16 MiB parts, 10 run at once).
DEFAULT_MEMORY_LIMIT = 160 * MiB

# One rule for every size a user writes (options, job specs, settings): a bare number is
# bytes, as S3, boto3's transfer settings and the AWS CLI read one, and a JSON number in a job
# spec is; every unit is binary, whether written K, KB or KiB, as the AWS CLI reads `16MB`
# (1024 * 1024 * 16) and as rclone's suffixes are. Decimal units are never meant: `5MB` is
# 5 MiB, the smallest part S3 takes, not 5,000,000 bytes below it.
SIZE_RULE = "a bare number is bytes; units are binary (1MB = 1MiB)"
_UNITS = {"K": KiB, "M": MiB, "G": GiB, "T": TiB, "P": 1024 * TiB}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*$")


def parse_size(text: str, what: str | None = None) -> int:
    """A size as a user writes it: `8388608`, `8MiB`, `8MB`, `8M`, `1.5GiB`, `500B` (see
    SIZE_RULE); refused in one sentence, naming `what` (the option) when given."""
    match = _SIZE_RE.match(text)
    scale = _scale(match.group(2).upper()) if match else None
    if match is None or scale is None:
        where = f"{what}: " if what else ""
        raise ConfigError(
            f"{where}cannot read size {text!r}: write a number of bytes, or one with a unit such as "
            f"8MiB or 8MB; {SIZE_RULE}"
        )
    return int(float(match.group(1)) * scale)


def _scale(unit: str) -> int | None:
    """Bytes in one `unit` (upper case): none or B, else K, M, G, T or P, alone or with B, I
    or IB after it; None for anything else."""
    if unit in ("", "B"):
        return 1
    if unit[:1] in _UNITS and unit[1:] in ("", "B", "I", "IB"):
        return _UNITS[unit[:1]]
    return None


def format_size(n: float) -> str:
    for unit, scale in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def check_part_size(part_size: int) -> int:
    if not MIN_PART_SIZE <= part_size <= MAX_PART_SIZE:
        raise ConfigError(
            f"part size {format_size(part_size)} is out of range: S3 accepts parts from 5 MiB to 5 GiB"
        )
    return part_size


def choose_part_size(object_size: int, preferred: int) -> int:
    """Grow the preferred part size until the object fits in 10,000 parts.

    A 5 TiB object needs parts of at least 525 MiB; rounding up to whole MiB keeps part
    boundaries readable in logs and reports.
    """
    part = max(preferred, MIN_PART_SIZE)
    if math.ceil(object_size / part) > MAX_PARTS:
        part = math.ceil(object_size / MAX_PARTS / MiB) * MiB
    return min(part, MAX_PART_SIZE)


@dataclass(frozen=True)
class Part:
    """One part of a multipart upload: bytes [start, end) of the object."""

    number: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def http_range(self) -> str:
        return f"bytes={self.start}-{self.end - 1}"


def uniform_parts(object_size: int, part_size: int) -> list[Part]:
    count = max(1, math.ceil(object_size / part_size))
    if count > MAX_PARTS:
        raise ConfigError(
            f"{count} parts exceed S3's 10,000: use a part size of at least {format_size(object_size / MAX_PARTS)}"
        )
    return [Part(n + 1, n * part_size, min((n + 1) * part_size, object_size)) for n in range(count)]


def parts_from_sizes(sizes: list[int]) -> list[Part]:
    parts, offset = [], 0
    for number, size in enumerate(sizes, start=1):
        parts.append(Part(number, offset, offset + size))
        offset += size
    return parts


# The daily rate `ferry estimate` checks one stack's limits against (its --per-day default).
DEFAULT_OBJECTS_PER_DAY = 1_000_000_000
