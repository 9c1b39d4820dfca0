"""Numbers on the command line that Ferry refuses before any request: counts of threads,
the memory limit, and a KMS key's region against the destination's.

Why bounds at all: `--concurrency` and `--part-concurrency` each become threads and pooled
connections. urllib3 fills a connection pool's queue with one slot per allowed connection
when the pool is made (urllib3/connectionpool.py, HTTPConnectionPool.__init__), so 100
million hung the command before its first request; 1024 is far above what one machine's
network uses (the defaults are 8 per CPU, at most 64).
"""

from __future__ import annotations

from typing import Any

from ferry.errors import ConfigError
from ferry.kms_keys import kms_key_problem
from ferry.limits import DEFAULT_MEMORY_LIMIT, MIN_PART_SIZE, MiB, format_size, parse_size

MAX_CONCURRENCY = 1024


def check_count(value: int | None, flag: str, maximum: int = MAX_CONCURRENCY) -> None:
    """A thread count given on the command line: 1 to `maximum` (None: Ferry chooses)."""
    if value is None:
        return
    if value < 1:
        raise ConfigError(f"{flag} must be at least 1")
    if value > maximum:
        raise ConfigError(f"{flag} {value} is more than {maximum}: give 1 to {maximum}")


def add_memory_limit_argument(group: Any) -> None:
    """`--memory-limit`, the same for `ferry copy` and `ferry run`."""
    group.add_argument(
        "--memory-limit",
        metavar="SIZE",
        default=f"{DEFAULT_MEMORY_LIMIT // MiB}MiB",
        help="object bytes held in memory by streaming (default %(default)s; the process adds about 70 MiB)",
    )


def memory_limit(text: str, flag: str = "--memory-limit") -> int:
    """The streaming memory budget: a part's whole buffer is granted at once, so a budget
    below the smallest part (5 MiB) could not be kept; it is refused, not silently exceeded."""
    size = parse_size(text)
    if size < MIN_PART_SIZE:
        raise ConfigError(f"{flag} {format_size(size)} is less than one part: give at least 5MiB")
    return size


def bandwidth_limit(text: str | None, flag: str = "--bwlimit") -> int | None:
    """`--bwlimit`'s bytes per second, read by the one size rule; none given, no limit. A rate
    of nothing would stop every byte: refused, as is anything that is no size."""
    if text is None:
        return None
    rate = parse_size(text, flag)
    if rate <= 0:
        raise ConfigError(f"{flag} {text}: give a rate above 0 bytes per second, e.g. 10MiB")
    return rate


def check_kms_region(key: str | None, dest_region: str | None, label: str) -> None:
    """A key ARN in another region than the destination's given region cannot encrypt there."""
    problem = kms_key_problem(key, dest_region) if key else None
    if problem:
        raise ConfigError(f"{label}: {problem}")
