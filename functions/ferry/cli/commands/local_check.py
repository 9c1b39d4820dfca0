"""The two sides of `ferry check` when one is a local folder: the folder (checked there and
readable before anything is listed) and the S3 prefix (its bucket checked), as Sides for
engine/compare/check.py. Local to local is refused: there is no S3 evidence to compare with.

The S3 side is a prefix (`s3://b/photos` means the folder `photos/`), as the folder is a
folder: one file against one object is `ferry check`'s business between two S3 locations.
"""

from __future__ import annotations

import argparse

from ferry.cli.shared.clients import ClientMaker
from ferry.cli.shared.sides import check_local_source, endpoints
from ferry.engine.compare.local_side import LocalSide
from ferry.engine.compare.side_listing import S3Side, Side
from ferry.errors import ConfigError
from ferry.filters import Filters, is_ferrys_own, marks_prefixes
from ferry.jobspec import as_folder
from ferry.local.paths import is_local
from ferry.s3.clients import make_client
from ferry.s3.listing import parse_s3_url

_SIDE_OPTIONS = ("endpoint_url", "region", "profile", "role_arn", "requester_pays")


def local_sides(args: argparse.Namespace, filters: Filters, marks_prefix: str | None) -> tuple[Side, Side]:
    """(source, destination), one of them a local folder; one clear line for bad input."""
    local_src = is_local(args.src)
    if local_src and is_local(args.dst):
        raise ConfigError(
            f"SRC {args.src!r} and DST {args.dst!r} are both local paths: ferry check compares a folder "
            "with an S3 prefix (one side must be s3://bucket/prefix)"
        )
    what, path, name = ("SRC", args.src, "source") if local_src else ("DST", args.dst, "destination")
    _refuse_side_options(args, "source" if local_src else "dest", what)
    if not check_local_source(path, what):
        raise ConfigError(f"{what} {path!r} is a file: ferry check compares a folder with an S3 prefix")
    url = parse_s3_url(args.dst if local_src else args.src, "DST" if local_src else "SRC")
    s3_side = "destination" if local_src else "source"
    client = ClientMaker(make_client).checked(endpoints(args)[1 if local_src else 0], url.bucket, s3_side)
    s3 = S3Side.of(client, url.bucket, url.key, s3_side, filters, marks_prefix)
    prefix, marks = as_folder(url.key), marks_prefixes(marks_prefix)

    def own(relative: str) -> bool:
        """A file whose key would fall among Ferry's upload marks (no object of the prefix)."""
        return is_ferrys_own(prefix + relative, marks)

    local = LocalSide(
        path, name, filters, follow_symlinks=args.follow_symlinks, leave_out=own if local_src else None
    )
    return (local, s3) if local_src else (s3, local)


def _refuse_side_options(args: argparse.Namespace, side: str, what: str) -> None:
    """The local side's endpoint and credential options mean nothing: refused, not ignored."""
    for option in _SIDE_OPTIONS:
        if getattr(args, f"{side}_{option}", None):
            flag = f"--{side}-{option.replace('_', '-')}"
            raise ConfigError(f"{flag} applies to an S3 location; here {what} is a local folder")
