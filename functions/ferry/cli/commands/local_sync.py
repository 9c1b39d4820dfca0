"""`ferry sync` with a local folder on one side: a folder kept in step with a prefix (upload), or
a folder kept in step with one (download); local to local is refused.

The copy is `ferry copy`'s local door (local_copy.py: the Uploader or Downloader, their
skip-existing rules, reports and exit codes); the deletes are `ferry sync`'s (SyncDeletes in
sync_command.py: planned from both listings walked to the end before anything is written,
refused past --max-delete or when SRC holds nothing, made only after every copy succeeded).
What differs is the sides: a local folder lists as engine/compare/local_side.py says, and a local
DST's extras are removed by engine/compare/local_prune.py (regular files only; folders stay, even
empty).

Both SRC and DST are folders (a prefix on the S3 side): for one file, `ferry copy` says
everything a sync would.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from typing import IO, Any

from ferry.cli.commands.copy_command import copy_and_report, first_or_refuse
from ferry.cli.commands.local_copy import (
    LocalSetup,
    check_local_folder,
    listed_pairs,
    local_setup,
    local_source,
    matched_files,
    upload_pairs,
)
from ferry.cli.commands.sync_command import SyncDeletes, check_delete_options
from ferry.cli.shared.clients import ClientMaker
from ferry.cli.shared.sides import check_local_source, endpoints
from ferry.engine.compare.local_prune import delete_local_extras
from ferry.engine.compare.local_side import LocalSide
from ferry.engine.compare.prune import DeleteResult, Extra, delete_extras
from ferry.engine.compare.side_listing import S3Side
from ferry.engine.files.downloads import Downloader
from ferry.engine.files.uploads import Uploader
from ferry.engine.strategies.copier import Copier
from ferry.errors import ConfigError
from ferry.filters import Filters, is_ferrys_own, marks_prefixes
from ferry.jobspec import as_folder
from ferry.local.paths import is_local, name_max
from ferry.s3.clients import make_client
from ferry.s3.listing import parse_s3_url, wildcard_source


def run_local_sync(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Validate everything, plan the deletes, then copy, delete, report and summarise."""
    upload = is_local(args.src)
    if upload and is_local(args.dst):
        raise ConfigError(
            f"SRC {args.src!r} and DST {args.dst!r} are both local paths: ferry sync keeps a folder and "
            "an S3 prefix in step (one side must be s3://bucket/prefix)"
        )
    check_delete_options(args)
    setup = local_setup(args, upload)
    deletes = SyncDeletes(args, stderr if args.json else stdout)
    copier, pairs = (_up if upload else _down)(args, setup, deletes)
    return copy_and_report(
        args, lambda _: copier, pairs, stdout, stderr, extension=deletes, names=setup.filters.keys
    )


def _up(args: argparse.Namespace, setup: LocalSetup, deletes: SyncDeletes) -> tuple[Copier, Iterator[Any]]:
    """A folder to a prefix. Files whose key would fall among Ferry's upload marks are no
    files of the sync (as the marks are no objects of the prefix)."""
    options = setup.options
    path, filters = local_source(args.src, setup.filters)
    if not check_local_source(path):
        raise ConfigError(
            f"SRC {args.src!r} is a file: ferry sync keeps a folder in step; use ferry copy for one file"
        )
    dst = parse_s3_url(args.dst, "DST")
    destination_endpoint = endpoints(args)[1]
    client = ClientMaker(make_client, setup.pool).checked(destination_endpoint, dst.bucket, "destination")
    prefix, marks = as_folder(dst.key), marks_prefixes(options.policy.marks_prefix)

    def own(relative: str) -> bool:
        return is_ferrys_own(prefix + relative, marks)

    follow = args.follow_symlinks
    source = LocalSide(path, "source", filters, follow_symlinks=follow, leave_out=own)
    destination = S3Side.of(client, dst.bucket, dst.key, "destination", filters, options.policy.marks_prefix)

    def remove(extras: Sequence[Extra]) -> list[DeleteResult]:
        return delete_extras(client, extras, prefix=prefix, marks=marks)

    deletes.marks = marks
    deletes.plan(source, destination, remove)
    listed = (pair for pair in upload_pairs(path, True, dst, filters, follow) if not own(pair[0].key))
    pairs = matched_files(listed, args.src, path, filters)
    copier = Uploader(
        destination_endpoint,
        options.policy,
        follow_symlinks=follow,
        dest_client=client,
        **setup.copier_options,
    )
    return copier, pairs


def _down(args: argparse.Namespace, setup: LocalSetup, deletes: SyncDeletes) -> tuple[Copier, Iterator[Any]]:
    """A prefix to a folder (made if missing). The prefix's upload marks are not downloaded."""
    options = setup.options
    src = parse_s3_url(args.src, "SRC")
    source_endpoint = endpoints(args)[0]
    client = ClientMaker(make_client, setup.pool).checked(source_endpoint, src.bucket, "source")
    src, filters = wildcard_source(client, src, setup.filters)
    check_local_folder(args.dst, args.dst)
    marks = marks_prefixes(options.policy.marks_prefix)
    source = S3Side.of(client, src.bucket, src.key, "source", filters, options.policy.marks_prefix)
    destination = LocalSide(args.dst, "destination", filters)

    def remove(extras: Sequence[Extra]) -> list[DeleteResult]:
        return delete_local_extras(args.dst, extras)

    def listed(chosen: Filters) -> Iterator[Any]:
        return listed_pairs(client, src, args.dst, chosen, name_max(args.dst), marks)

    # A SRC that matches nothing is refused before any delete is planned: a mistyped prefix
    # must never read as "the source is empty" (with --delete, "delete everything").
    pairs = first_or_refuse(
        listed(filters),
        client,
        src,
        filters,
        lambda relaxed: next(listed(relaxed), None) is not None,
        options.policy.marks_prefix,
    )
    deletes.marks = marks
    deletes.plan(source, destination, remove)
    copier = Downloader(source_endpoint, options.policy, source_client=client, **setup.copier_options)
    return copier, pairs
