"""The filter options `ferry copy`, `ferry sync` and `ferry check` share, and the one
`Filters` they make (ferry.filters says what each option means). Light: no botocore, so
`--help` and a usage error stay fast."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Sequence

from ferry.errors import ConfigError
from ferry.filters import Filters, parse_age, read_files_from
from ferry.limits import SIZE_RULE, format_size, parse_size


def add_filter_arguments(group: argparse._ArgumentGroup, *, files_from: bool = True) -> None:
    """Sizes, ages and a list of keys, spelled and meant as rclone's filtering options."""
    group.add_argument(
        "--min-size",
        metavar="SIZE",
        help=f"only objects of at least this size, e.g. 10MiB ({SIZE_RULE})",
    )
    group.add_argument("--max-size", metavar="SIZE", help="only objects of at most this size")
    group.add_argument(
        "--min-age",
        metavar="AGE",
        help="only objects modified at least this long ago (30m, 2h, 7d) or on/before a date (2024-05-01)",
    )
    group.add_argument(
        "--max-age",
        metavar="AGE",
        help="only objects modified at most this long ago, or on/after a date",
    )
    if files_from:
        group.add_argument(
            "--files-from",
            metavar="FILE",
            help="only the keys listed in FILE, one per line, relative to SRC (a leading / is SRC's root; "
            "# comments); names that match no object are counted in the summary",
        )


def filters_from(
    args: argparse.Namespace, include: Sequence[str], exclude: Sequence[str], now: dt.datetime | None = None
) -> Filters:
    """The command line's filters; a wrong one is a usage error, before any request."""
    now = now or dt.datetime.now(dt.UTC)
    min_size = _size(args.min_size, "--min-size")
    max_size = _size(args.max_size, "--max-size")
    if min_size is not None and max_size is not None and min_size > max_size:
        raise ConfigError(
            f"--min-size {format_size(min_size)} is above --max-size {format_size(max_size)}: no object could pass"
        )
    newest = parse_age(args.min_age, "--min-age", now) if args.min_age else None
    oldest = parse_age(args.max_age, "--max-age", now) if args.max_age else None
    if newest is not None and oldest is not None and oldest > newest:
        raise ConfigError(
            f"--max-age {args.max_age} and --min-age {args.min_age} leave no time between them: "
            "--max-age keeps objects newer than it, --min-age objects older than it"
        )
    path = getattr(args, "files_from", None)
    return Filters(
        include=tuple(include),
        exclude=tuple(exclude),
        min_size=min_size,
        max_size=max_size,
        modified_from=oldest,
        modified_to=newest,
        keys=read_files_from(path) if path else None,
    )


def _size(text: str | None, flag: str) -> int | None:
    return parse_size(text, flag) if text is not None else None
