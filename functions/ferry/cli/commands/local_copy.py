"""`ferry copy` with a local path on one side: a folder (or one file) uploaded to S3, or a prefix
(or one object) downloaded into a folder.

The same options, progress bar, summary, report and exit codes as a copy between buckets
(copy_command.py); the engine's Uploader and Downloader copy and prove each file, and
ferry.local lists, reads and writes them. Everything checkable is checked before anything is
written: the local path (missing, unreadable, a file where a folder is needed, a folder that
cannot be written), the bucket, and the options that mean nothing with a local side.
"""

from __future__ import annotations

import argparse
import itertools
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import IO, Any

from ferry.cli.commands.copy_command import copy_and_report, copy_choices, first_or_refuse
from ferry.cli.shared.clients import ClientMaker, copy_pool_size
from ferry.cli.shared.sides import check_local_source, endpoints
from ferry.engine.files.downloads import Downloader
from ferry.engine.files.uploads import Uploader
from ferry.engine.run.bandwidth import Bandwidth
from ferry.engine.strategies.copier import Copier
from ferry.errors import ConfigError
from ferry.filters import Filters, marks_prefixes, split_pattern
from ferry.jobspec import JobOptions, as_folder
from ferry.local.files import LocalFile, admits_file, local_files, one_file, walk
from ferry.local.paths import LocalTarget, is_local, name_max, target_for
from ferry.models import SourceObject, Target
from ferry.s3.clients import make_client
from ferry.s3.listing import (
    Prefix,
    S3Url,
    admitted_under,
    landing_key,
    object_or_prefix,
    parse_s3_url,
    wildcard_source,
)

# Options that mean nothing for one direction: refused in one line, not silently ignored.
_UPLOAD_REFUSES = {
    "restore": "--restore",
    "source_endpoint_url": "--source-endpoint-url",
    "source_region": "--source-region",
    "source_profile": "--source-profile",
    "source_role_arn": "--source-role-arn",
    "source_requester_pays": "--source-requester-pays",
}
_DOWNLOAD_REFUSES = {
    "storage_class": "--storage-class",
    "metadata": "--metadata",
    "tag": "--tag",
    "kms_key_id": "--kms-key-id",
    "marks_prefix": "--marks-prefix",
    "follow_symlinks": "--follow-symlinks",
    "dest_endpoint_url": "--dest-endpoint-url",
    "dest_region": "--dest-region",
    "dest_profile": "--dest-profile",
    "dest_role_arn": "--dest-role-arn",
    "dest_requester_pays": "--dest-requester-pays",
}

Pairs = Iterator[tuple[Any, Any]]


def run_local_copy(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Upload or download: validate everything, then copy, report and summarise."""
    upload = is_local(args.src)
    if upload and is_local(args.dst):
        raise ConfigError(
            f"SRC {args.src!r} and DST {args.dst!r} are both local paths: one side must be s3://bucket/prefix"
        )
    setup = local_setup(args, upload)
    options, filters = setup.options, setup.filters
    source, destination = endpoints(args)
    maker = ClientMaker(make_client, setup.pool)

    copier: Copier
    if upload:
        path, filters = local_source(args.src, filters)
        folder = check_local_source(path)
        dst = parse_s3_url(args.dst, "DST")
        client = maker.checked(destination, dst.bucket, "destination")
        pairs = matched_files(
            upload_pairs(path, folder, dst, filters, args.follow_symlinks), args.src, path, filters
        )
        copier = Uploader(
            destination,
            options.policy,
            follow_symlinks=args.follow_symlinks,
            dest_client=client,
            **setup.copier_options,
        )
    else:
        src = parse_s3_url(args.src, "SRC")
        client = maker.checked(source, src.bucket, "source")
        src, filters = wildcard_source(client, src, filters)
        marks = marks_prefixes(options.policy.marks_prefix)
        pairs = first_or_refuse(
            _download_pairs(client, src, args.dst, filters, marks),
            client,
            src,
            filters,
            lambda relaxed: next(_download_pairs(client, src, args.dst, relaxed, marks), None) is not None,
            options.policy.marks_prefix,
        )
        copier = Downloader(source, options.policy, source_client=client, **setup.copier_options)
    # (no byte hook: as before)
    return copy_and_report(args, lambda _: copier, pairs, stdout, stderr, names=filters.keys)


@dataclass(frozen=True)
class LocalSetup:
    """What a copy with a local side checks and derives from its options, for copy and sync
    alike: the job options, the filters, the client's pool size and the copier's options."""

    options: JobOptions
    filters: Filters
    pool: int
    copier_options: dict[str, Any]


def local_setup(args: argparse.Namespace, upload: bool) -> LocalSetup:
    """The options a local side refuses refused, then what every copy reads (copy_choices)."""
    refuse_options(args, upload)
    chosen = copy_choices(args)
    pool = copy_pool_size(args)
    copier_options: dict[str, Any] = {
        "concurrency": args.concurrency,
        "part_concurrency": args.part_concurrency,
        "memory_limit": chosen.memory,
        "bandwidth": Bandwidth(chosen.bandwidth) if chosen.bandwidth else None,
    }
    return LocalSetup(chosen.options, chosen.filters, pool, copier_options)


def refuse_options(args: argparse.Namespace, upload: bool) -> None:
    if args.mode == "server-side":
        raise ConfigError("--mode server-side copies between two S3 locations: one side here is a local path")
    refused = _UPLOAD_REFUSES if upload else _DOWNLOAD_REFUSES
    side = "an S3 source" if upload else "an S3 destination"
    for field, flag in refused.items():
        if getattr(args, field, None):
            raise ConfigError(f"{flag} applies to {side}; here that side is the local path")


# -- uploads ------------------------------------------------------------------------------------


def local_source(path: str, filters: Filters) -> tuple[str, Filters]:
    """A local SRC with wildcards (`logs/*.gz`) as its folder (`logs/`) and the filters with its
    pattern, matched as an S3 SRC's is (filters.KeyPattern) against each file's path relative
    to that folder; SRC unchanged without wildcards, or when a file or folder of that very
    name exists (the shell has usually expanded a pattern before Ferry sees it)."""
    split = split_pattern(path, os.sep)
    if split is None or os.path.lexists(path):
        return path, filters
    folder, pattern = split
    return folder or os.curdir, replace(filters, pattern=pattern)


def matched_files(
    pairs: Iterator[tuple[LocalFile, Target]], src: str, folder: str, filters: Filters
) -> Iterator[tuple[LocalFile, Target]]:
    """`pairs` as they come; for a SRC with wildcards that takes no file, the one-line refusal
    an S3 SRC gets (a copy of nothing is far more often a mistyped pattern than a wish)."""
    if filters.pattern is None:
        return pairs
    first = next(pairs, None)
    if first is not None:
        return itertools.chain([first], pairs)
    if filters.by_details:
        return iter(())  # sizes or ages chose nothing this time: a copy of nothing
    shown = os.path.join(folder, "")
    if filters.chooses and any(True for _ in walk(folder, filters.pattern.matches, follow_symlinks=False)):
        raise ConfigError(
            f"nothing matched {src}: files match it, but the filters (--include, --exclude, --files-from) "
            "left out every one"
        )
    raise ConfigError(f"nothing matched {src}: no file under {shown} matches it")


def upload_pairs(
    path: str, folder: bool, dst: S3Url, filters: Filters, follow_symlinks: bool
) -> Iterator[tuple[LocalFile, Target]]:
    """Files under a folder land under DST's prefix with their relative paths; one file lands
    on DST's key, or into DST's folder under its own name. The filters judge a file by its
    path relative to SRC, its size and its modification time, as they judge an object."""
    if folder:
        prefix = as_folder(dst.key)
        for file in local_files(path, filters, follow_symlinks=follow_symlinks):
            yield file, Target(dst.bucket, prefix + file.key)
        return
    name = os.path.basename(path)
    file = one_file(path, name)
    if admits_file(filters, file):
        yield file, Target(dst.bucket, landing_key(dst.key, name))


# -- downloads ----------------------------------------------------------------------------------


def _download_pairs(
    client: Any, src: S3Url, dst: str, filters: Filters, marks: tuple[str, ...]
) -> Iterator[tuple[SourceObject, LocalTarget]]:
    """An object lands in DST (a folder, or DST ending in '/'), or as DST itself; a prefix's
    objects land under the folder DST with their keys relative to the prefix. The local side
    is checked here, before the first pair is asked for. Ferry's own upload marks (`marks`)
    are never objects: none is downloaded."""
    source = object_or_prefix(client, src, filters, marks)
    if isinstance(source, Prefix):
        check_local_folder(dst, dst)
        return listed_pairs(client, src, dst, filters, name_max(dst), marks)
    if source.own:
        return iter([])
    if dst.endswith(("/", os.sep)) or os.path.isdir(dst):
        root, relative = dst, source.name
    else:
        root, relative = os.path.dirname(dst) or ".", os.path.basename(dst)
    check_local_folder(root, dst)
    pairs = [(SourceObject(src.bucket, src.key), target_for(root, relative, None, name_max(root)))]
    return iter(pairs if source.admitted else [])


def listed_pairs(
    client: Any, src: S3Url, dst: str, filters: Filters, longest: int, marks: tuple[str, ...]
) -> Iterator[tuple[SourceObject, LocalTarget]]:
    """Each object under SRC's prefix the filters take, and the file it becomes under `dst`."""
    for obj, relative in admitted_under(client, src, filters, marks):
        yield obj, target_for(dst, relative, obj.size, longest)


def check_local_folder(folder: str, dst: str) -> None:
    """The folder a download writes into (DST, or DST's folder for one object): there and
    writable, or creatable where its nearest existing parent is writable; never a file."""
    existing = folder
    while True:
        try:
            info = os.stat(existing)
            break
        except FileNotFoundError:
            existing = os.path.dirname(os.path.abspath(existing))
        except NotADirectoryError as error:
            raise ConfigError(f"DST {dst!r} needs a folder where a file stands in its path") from error
    if not stat.S_ISDIR(info.st_mode):
        if existing == folder:
            raise ConfigError(f"DST {dst!r} is a file where a folder is needed")
        raise ConfigError(f"DST {dst!r} needs a folder where the file {existing!r} stands")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write into DST {dst!r}: permission denied on {existing!r}")
