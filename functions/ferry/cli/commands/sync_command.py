"""`ferry sync SRC DST [--delete]`: make DST's prefix hold what SRC's holds.

The copy is `ferry copy`'s, with its skip-existing rules (checksum, or --compare size-mtime):
what DST lacks or holds differently is copied, the rest skipped. With --delete, what DST holds
and SRC does not (after the same filters; never Ferry's upload marks; never outside DST's
prefix) is deleted, but only:

- after both listings were walked to the end (a failed listing: nothing copied or deleted);
- if no more than --max-delete objects would go (otherwise nothing is copied or deleted);
- after every copy succeeded (a failed or pending copy: nothing deleted, said on stderr).

Deletes are counted beside the copies (`deleted`), in the summary and the report.

SyncDeletes plans and makes the deletes for any two sides (engine/compare/side_listing.py): two S3
prefixes here, or a local folder and a prefix (local_sync.py, which reuses it).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from typing import IO

from botocore.exceptions import BotoCoreError, ClientError

from ferry.cli.commands.copy_command import delete_line, matched_pairs, run_copy
from ferry.cli.shared.copy_extension import CopyEnd, CopySides, Pair
from ferry.cli.shared.report import Summary
from ferry.counts import plural
from ferry.engine.compare.prune import DeleteResult, Extra, delete_extras, find_extras
from ferry.engine.compare.side_listing import S3Side, Side
from ferry.engine.run.outcome import WOULD_DELETE
from ferry.engine.strategies.copier import FIRST_WINDOW, Copier
from ferry.errors import ConfigError, FerryError
from ferry.filters import is_ferrys_own, marks_prefixes
from ferry.jobspec import as_folder
from ferry.models import CopyResult, Status

Remove = Callable[[Sequence[Extra]], list[DeleteResult]]


def run_sync(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    check_delete_options(args)
    return run_copy(args, stdout, stderr, extension=SyncDeletes(args, stderr if args.json else stdout))


def check_delete_options(args: argparse.Namespace) -> None:
    """--max-delete makes sense with --delete only, and counts from 0."""
    if args.max_delete is not None and not args.delete:
        raise ConfigError("--max-delete limits --delete: give --delete too, or leave --max-delete out")
    if args.max_delete is not None and args.max_delete < 0:
        raise ConfigError(f"--max-delete {args.max_delete}: give 0 or more objects")


class SyncDeletes:
    """`ferry sync`'s part of the run (cli/shared/copy_extension.py): the deletes, and the dry run's
    list of what would be copied and deleted."""

    def __init__(self, args: argparse.Namespace, out: IO[str]) -> None:
        self.args = args
        self.out = out
        self.extras: list[Extra] = []
        self.marks: tuple[str, ...] = ()
        self.remove: Remove | None = None
        self.sides: CopySides | None = None

    def before_copy(self, sides: CopySides) -> None:
        """Two S3 prefixes: plan the deletes with S3 sides and conditional DeleteObjects."""
        configured, filters = sides.options.policy.marks_prefix, sides.filters
        self.marks = marks_prefixes(configured)
        self.sides = sides
        if not self.args.delete:
            return
        source = S3Side.of(
            sides.source_client, sides.src.bucket, sides.src.key, "source", filters, configured
        )
        destination = S3Side.of(
            sides.dest_client, sides.dst.bucket, sides.dst.key, "destination", filters, configured
        )
        client, prefix, marks = sides.dest_client, as_folder(sides.dst.key), self.marks
        self.plan(
            source, destination, lambda extras: delete_extras(client, extras, prefix=prefix, marks=marks)
        )

    def plan(self, source: Side, destination: Side, remove: Remove) -> None:
        """With --delete: walk both sides to the end and keep what DST holds and SRC lacks, or
        refuse the whole sync (a listing failed, SRC holds nothing, too many deletes)."""
        if not self.args.delete:
            return
        try:
            found = find_extras(source, destination)
        except (FerryError, ClientError, BotoCoreError, OSError) as error:
            raise ConfigError(f"listing for --delete failed: {error}; nothing copied or deleted") from error
        if found.source_objects == 0 and found.extras:
            what = "objects" if source.bucket is not None else "files"
            raise ConfigError(
                f"SRC {self.args.src} lists no {what}: --delete would empty {self.args.dst} "
                f"({plural(len(found.extras), 'object')}); nothing copied or deleted (check SRC; to empty DST, delete it yourself)"
            )
        limit = self.args.max_delete
        if limit is not None and len(found.extras) > limit:
            raise ConfigError(
                f"--delete would delete {plural(len(found.extras), 'object')}, more than --max-delete {limit}: "
                "nothing copied or deleted"
            )
        self.extras = found.extras
        self.remove = remove

    def pairs(self, pairs: Iterator[Pair]) -> Iterator[Pair]:
        """Ferry's own upload marks are never a side's objects: not copied either. A SRC with
        wildcards that takes no key is refused as `ferry copy` refuses it, before anything is
        written: with --delete, DST's keys the mistyped pattern takes would all go."""
        marks, sides = self.marks, self.sides
        if sides is not None and sides.filters.pattern is not None:
            pairs = matched_pairs(sides.source_client, sides.src, sides.dst, sides.options, sides.filters)
        return (pair for pair in pairs if not is_ferrys_own(pair[0].key, marks))

    def on_result(self, result: CopyResult) -> None:
        """Nothing per copy: a dry run's `would copy:` lines are the copy's own (copy_command)."""

    def copy(self, copier: Copier, pairs: Iterator[Pair], on_result: Callable[[CopyResult], None]) -> None:
        copier.copy_batch(pairs, on_result=on_result, collect=False, first_window=FIRST_WINDOW)

    def after_copy(self, end: CopyEnd) -> str | None:
        if not self.args.delete:
            return None
        end.summary.deleting = True
        if self.args.dry_run:
            results = [DeleteResult(e.bucket, e.key, "pending", WOULD_DELETE) for e in self.extras]
            for extra in self.extras:
                self.out.write(f"would delete: {extra.url}\n")
            self._record(results, end)
            return None
        unfinished = self._unfinished(end.summary, end.stopped)
        if unfinished:
            held = [
                DeleteResult(e.bucket, e.key, "skipped", f"not deleted: {unfinished}") for e in self.extras
            ]
            self._record(held, end)
            return (
                f"deleted nothing ({plural(len(self.extras), 'object')} kept): {unfinished}"
                if self.extras
                else None
            )
        assert self.remove is not None or not self.extras
        results = self.remove(self.extras) if self.remove and self.extras else []
        self._record(results, end)
        return None

    @staticmethod
    def _unfinished(summary: Summary, stopped: str | None) -> str | None:
        """Why the copies do not allow deleting: the run stopped, or a copy failed or waits."""
        if stopped:
            return "the copy stopped before the end"
        if summary.failed or summary.pending:
            return f"copies failed: {summary.failed}, pending: {summary.pending}"
        return None

    @staticmethod
    def _record(results: list[DeleteResult], end: CopyEnd) -> None:
        """Each delete counted in the summary, written to the report, said with `-v`, and a
        failed one among the failures named at the end."""
        for result in results:
            end.summary.add_delete(result.status, result.reason)
            if end.report:
                end.report.write_record(result.to_dict())
            line = delete_line(result) if end.say else None
            if end.say and line:
                end.say(line)
            if result.status == Status.FAILED and len(end.failures) < 20:
                end.failures.append(
                    CopyResult(
                        result.key, result.key, Status.FAILED, result.reason, source_bucket=result.bucket
                    )
                )
