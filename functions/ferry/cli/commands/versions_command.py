"""`ferry copy SRC DST --all-versions`: every version of each key under SRC, oldest first,
with its delete markers, so DST's history holds the same contents in the same order
(engine/versions/version_copy.py; version ids are S3's to give, so they differ).

Everything else is `ferry copy`'s (checks, clients, reports, summary, exit codes): this module
adds the checks only a history copy needs, and the copy of histories in place of a listing.
Each key's versions are copied one after another; keys run side by side. A re-run copies only
the versions the destination's history lacks (found by content, position by position), and
the report maps each source version to the destination version holding it.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any

from ferry.cli.commands.copy_command import compare_choices, first_or_refuse, run_copy
from ferry.cli.shared.copy_extension import CopyEnd, CopySides, Pair
from ferry.engine.compare.side_listing import side_by_side
from ferry.engine.strategies.copier import Copier
from ferry.engine.versions.version_copy import KEYS_AT_ONCE, copy_history
from ferry.errors import ConfigError
from ferry.filters import is_ferrys_own, marks_prefixes
from ferry.jobspec import as_folder
from ferry.models import Compare, CopyResult, Target
from ferry.s3.listing import OneObject, object_or_prefix
from ferry.s3.version_listing import History, Wording, check_versioning, histories, key_history


def run_copy_all_versions(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    given = [flag for flag in ("min_size", "max_size", "min_age", "max_age") if getattr(args, flag)]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise ConfigError(
            f"{flag} cannot go with --all-versions: a history is copied whole, or its order would not "
            "hold; choose keys with --include, --exclude or --files-from"
        )
    if args.no_skip_existing:
        raise ConfigError(
            "--all-versions finds what is already there by the destination's history: leave out --no-skip-existing"
        )
    chosen = [(said, compare) for said, compare in compare_choices(args) if compare != Compare.CHECKSUM]
    if chosen:  # checksum is the history's own test (compare_heads); any other would not be run
        raise ConfigError(
            f"{chosen[0][0]} cannot go with --all-versions: a history is matched version by version "
            "by its contents; leave it out"
        )
    # Every version is written: the destination's current object says nothing of its history.
    args.no_skip_existing = True
    args.compare = None  # --compare checksum: the history's own test, asked for by name
    return run_copy(args, stdout, stderr, extension=AllVersions(args))


@dataclass(frozen=True)
class _Relative:
    """A key's history under its key relative to its side's prefix (for side_by_side)."""

    relative_key: str
    history: History


class AllVersions:
    """The extension of `run_copy` (cli/shared/copy_extension.py) that copies histories."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.sides: CopySides | None = None
        self._jobs: Iterator[tuple[History, History, Target]] = iter(())

    def before_copy(self, sides: CopySides) -> None:
        """The destination must keep versions, and the source must list them: refused in one
        line before anything is written."""
        self.sides = sides
        check_versioning(
            sides.source_client,
            sides.src.bucket,
            sides.src.key,
            sides.dest_client,
            sides.dst.bucket,
            Wording(
                "--all-versions",
                "--all-versions: the source bucket",
                "--all-versions: the destination bucket",
            ),
        )

    def pairs(self, pairs: Iterator[Pair]) -> Iterator[Pair]:
        """The histories to copy, in place of the listing (`pairs` is never read): SRC that
        holds no history the filters take is refused in one line, before anything is written,
        as a plain copy refuses it (`nothing matched ...`). A key whose history holds only
        delete markers is matched: its markers are copied."""
        sides = self.sides
        assert sides is not None
        self._jobs = first_or_refuse(
            self._plan(),
            sides.source_client,
            sides.src,
            sides.filters,
            lambda _: False,  # sizes and ages are refused with --all-versions: never a copy of nothing
            sides.options.policy.marks_prefix,
        )
        return pairs

    def on_result(self, result: CopyResult) -> None:
        return None

    def copy(self, copier: Copier, pairs: Iterator[Pair], on_result: Callable[[CopyResult], None]) -> None:
        assert self.sides is not None
        bucket = self.sides.src.bucket
        plan = self._jobs
        with ThreadPoolExecutor(KEYS_AT_ONCE, thread_name_prefix="ferry-history") as pool:
            while True:
                window = list(itertools.islice(plan, KEYS_AT_ONCE * 4))
                if not window:
                    return
                futures = [
                    pool.submit(
                        lambda s, d, t: list(
                            copy_history(copier, s, bucket, t, d, dry_run=self.args.dry_run)
                        ),
                        *job,
                    )
                    for job in window
                ]
                for future in futures:
                    for result in future.result():
                        on_result(result)

    def after_copy(self, end: CopyEnd) -> str | None:
        return None

    def _plan(self) -> Iterator[tuple[History, History, Target]]:
        """(source history, destination history, target) for each key the filters take."""
        sides = self.sides
        assert sides is not None
        src, dst = sides.src, sides.dst
        source = object_or_prefix(sides.source_client, src, sides.filters)
        if isinstance(source, OneObject):
            target_key = source.key_in(dst.key)
            if source.admitted:
                yield (
                    key_history(sides.source_client, src.bucket, src.key),
                    key_history(sides.dest_client, dst.bucket, target_key, side="destination"),
                    Target(dst.bucket, target_key),
                )
            return
        prefix, dest_prefix = source.folder, as_folder(dst.key)
        marks = marks_prefixes(sides.options.policy.marks_prefix)
        ours = self._relative(sides.source_client, src.bucket, prefix, "source", marks)
        theirs = self._relative(sides.dest_client, dst.bucket, dest_prefix, "destination", marks)
        for relative, source, destination in side_by_side(ours, theirs):
            if source is None or not sides.filters.admits_key(relative):
                continue
            target = Target(dst.bucket, dest_prefix + relative)
            yield source.history, destination.history if destination else History(target.key, ()), target

    @staticmethod
    def _relative(
        client: Any, bucket: str, prefix: str, side: str, marks: tuple[str, ...]
    ) -> Iterator[_Relative]:
        for history in histories(client, bucket, prefix, side=side):
            if not is_ferrys_own(history.key, marks):
                yield _Relative(history.key[len(prefix) :], history)
