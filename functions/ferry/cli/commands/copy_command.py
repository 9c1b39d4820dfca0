"""`ferry copy`: copy a prefix or one object between any two S3 endpoints, verified, with a
progress bar on a terminal (ferry.cli.shared.progress), a summary, and an optional JSON Lines report."""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import IO, Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from ferry.cli.shared.arguments import add_copy_parser
from ferry.cli.shared.clients import ClientMaker, copy_pool_size, one_store
from ferry.cli.shared.copy_extension import CopyEnd, CopyExtension, CopySides
from ferry.cli.shared.filter_options import filters_from
from ferry.cli.shared.parsing import EXIT_FAILED, EXIT_OK, EXIT_PENDING, Parser, open_for_writing
from ferry.cli.shared.progress import Progress
from ferry.cli.shared.ranges import bandwidth_limit, check_count, check_kms_region, memory_limit
from ferry.cli.shared.report import ReportWriter, Summary, report_for_html
from ferry.cli.shared.sides import endpoints
from ferry.cli.shared.signals import StopOnSignals
from ferry.counts import plural
from ferry.engine.compare.prune import DeleteResult
from ferry.engine.run.bandwidth import Bandwidth
from ferry.engine.run.deadlines import stopping
from ferry.engine.run.outcome import WOULD_COPY, WOULD_DELETE, WOULD_MARK, WOULD_RESTORE
from ferry.engine.strategies.copier import FIRST_WINDOW, Copier
from ferry.errors import ConfigError, FerryError
from ferry.filters import Filters, NamedKeys, is_ferrys_own, marks_prefixes
from ferry.jobspec import JobOptions, parse_options
from ferry.limits import format_size
from ferry.models import SYMLINK_SKIPPED, Compare, CopyResult, SourceObject, Status, Target
from ferry.reports.report_html import render_report_html
from ferry.s3.clients import make_client
from ferry.s3.listing import (
    S3Url,
    check_overlap,
    nothing_matched,
    parse_s3_url,
    plan_pairs,
    wildcard_source,
)

Pair = tuple[SourceObject, Target]


def _pairs(values: Sequence[str], what: str) -> dict[str, str]:
    result = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise ConfigError(f"{what} {value!r} must be written KEY=VALUE")
        result[key] = val
    return result


def parse_copy_args(argv: Sequence[str]) -> argparse.Namespace:
    """`ferry copy ARGS` parsed on its own, for callers that run a copy without the root
    parser (the demo)."""
    parser = Parser(prog="ferry")
    add_copy_parser(parser.add_subparsers(dest="command", required=True, parser_class=Parser))
    return parser.parse_args(["copy", *argv])


_FLAGS = {
    "skip_existing": "--no-skip-existing",
    "restore_tier": "--restore",
    "tags": "--tag",
    "preserve_tags": "--no-tags",
}


def _flag(field: str) -> str:
    return _FLAGS.get(field, "--" + field.replace("_", "-"))


# rclone's names for two of --compare's choices.
COMPARE_ALIASES = {"size_only": Compare.SIZE, "ignore_existing": Compare.EXISTENCE}


def compare_choices(args: argparse.Namespace) -> list[tuple[str, Compare]]:
    """Each test of what is already there the command line asks for: (how it was written,
    the test), from --compare and its rclone-named aliases."""
    given = [(_flag(field), compare) for field, compare in COMPARE_ALIASES.items() if getattr(args, field)]
    if args.compare is not None:
        given.append((f"--compare {args.compare}", Compare(args.compare)))
    return given


def compare_from(args: argparse.Namespace) -> str | None:
    """The one test of what is already there; refused in one line when two options choose
    different ones, or when one is given with --no-skip-existing, which skips nothing."""
    given = compare_choices(args)
    for said, compare in given[1:]:
        if compare != given[0][1]:
            raise ConfigError(
                f"{given[0][0]} and {said} choose different tests of what the destination already "
                "holds: give one"
            )
    if given and args.no_skip_existing:
        raise ConfigError(
            f"{given[0][0]} and --no-skip-existing contradict each other: the first skips what the "
            "destination already holds, the second copies everything"
        )
    return str(given[0][1]) if given else None


# Job options read from the argument of the same name, alike in `ferry copy` and `ferry job start`.
_SAME_NAMED = (
    "mode",
    "part_size",
    "multipart_threshold",
    "checksum_algorithm",
    "storage_class",
    "kms_key_id",
)


def given_alike(args: argparse.Namespace) -> dict[str, Any]:
    """The job options `ferry copy` and `ferry job start` read alike from their command lines
    (None where an option was not given); each command adds those it reads its own way."""
    return {
        **{field: getattr(args, field) for field in _SAME_NAMED},
        "metadata": _pairs(args.metadata, "--metadata") if args.metadata else None,
        "tags": _pairs(args.tag, "--tag") if args.tag else None,
        "restore_tier": args.restore,
        "restore_days": args.restore_days,
        "include": args.include,
        "exclude": args.exclude,
    }


def options_from(args: argparse.Namespace) -> JobOptions:
    """The CLI's options, validated by the same code as a pipeline job's `options`."""
    options = {
        **given_alike(args),
        "preserve_tags": not args.no_tags,
        "skip_existing": not args.no_skip_existing,
        "compare": compare_from(args),
        "dry_run": args.dry_run,
        "marks_prefix": args.marks_prefix,
    }
    return parse_options({k: v for k, v in options.items() if v is not None}, name=_flag)


@dataclass(frozen=True)
class CopyChoices:
    """What a copy's options decide before any request, the same for every door (between
    buckets, a folder's upload, a prefix's download): the job options, the filters, the
    streaming memory budget and the bandwidth limit (None: none)."""

    options: JobOptions
    filters: Filters
    memory: int
    bandwidth: int | None


def copy_choices(args: argparse.Namespace) -> CopyChoices:
    """A copy's options read and checked, each wrong one refused in one line."""
    options = options_from(args)
    filters = filters_from(args, options.include, options.exclude)
    check_count(args.concurrency, "--concurrency")
    check_count(args.part_concurrency, "--part-concurrency")
    return CopyChoices(options, filters, memory_limit(args.memory_limit), bandwidth_limit(args.bwlimit))


def run_copy(
    args: argparse.Namespace, stdout: IO[str], stderr: IO[str], extension: CopyExtension | None = None
) -> int:
    """`ferry copy`: validate everything, then copy, report and summarise."""
    chosen = copy_choices(args)
    options, filters = chosen.options, chosen.filters
    src, dst = parse_s3_url(args.src, "SRC"), parse_s3_url(args.dst, "DST")
    source, destination = endpoints(args)
    check_kms_region(options.policy.dest_kms_key_id, destination.region, "--kms-key-id")
    maker = ClientMaker(make_client, copy_pool_size(args))
    source_client, dest_client = maker.checked_sides(source, destination, src, dst)
    src, filters = wildcard_source(source_client, src, filters)
    check_overlap(source_client, src, dst, options, same_endpoint=one_store(source, destination))
    if extension:
        extension.before_copy(CopySides(src, dst, source_client, dest_client, options, filters))
    # ferry copy refuses a SRC that matches nothing; sync and --all-versions decide for themselves
    # (a history may hold only delete markers; a sync of nothing guards its deletes).
    planned = (
        plan_pairs(source_client, src, dst, filters=filters, marks_prefix=options.policy.marks_prefix)
        if extension
        else matched_pairs(source_client, src, dst, options, filters)
    )
    pairs = extension.pairs(planned) if extension else planned

    def make_copier(on_part: Callable[[int], None] | None) -> Copier:
        return Copier(
            source,
            destination,
            options.policy,
            concurrency=args.concurrency,
            part_concurrency=args.part_concurrency,
            memory_limit=chosen.memory,
            source_client=source_client,
            dest_client=dest_client,
            on_part=on_part,
            bandwidth=Bandwidth(chosen.bandwidth) if chosen.bandwidth else None,
        )

    return copy_and_report(args, make_copier, pairs, stdout, stderr, extension, filters.keys)


def copy_and_report(
    args: argparse.Namespace,
    make_copier: Callable[[Callable[[int], None] | None], Copier],
    pairs: Iterator[Any],
    stdout: IO[str],
    stderr: IO[str],
    extension: CopyExtension | None = None,
    names: NamedKeys | None = None,
) -> int:
    """Copy `pairs` with the copier `make_copier` makes (given the progress bar's byte hook,
    or None), for every door (S3 to S3, a folder's upload, a prefix's download): results into
    the summary, the report, the HTML page and the progress bar; the first failures named; the
    extension (sync's deletes, --all-versions' histories) sees each result and does its work
    after the copies. `names`, --files-from's, says which of them matched no object, once the
    listing went to its end."""
    summary = Summary(dry_run=bool(args.dry_run))
    would_out = stderr if args.json else stdout  # a dry run's list: --json keeps stdout to the JSON
    with ExitStack() as stack:
        report = ReportWriter(open_for_writing(stack, args.report, "the report")) if args.report else None
        html_file = open_for_writing(stack, args.report_html, "the HTML report") if args.report_html else None
        show = not args.quiet and stderr.isatty()
        progress = stack.enter_context(Progress(stderr, enabled=show))
        verbose = bool(getattr(args, "verbose", False))
        copier = stack.enter_context(make_copier(progress.part_done if progress.enabled else None))
        failures: list[CopyResult] = []
        links = 0  # local symbolic links not followed (only a folder's upload meets them)

        def on_result(result: CopyResult) -> None:
            nonlocal links
            summary.add(result)
            progress.add(result)
            if report:
                report.write(result)
            if result.status == Status.FAILED and len(failures) < 20:
                failures.append(result)
            elif result.reason == SYMLINK_SKIPPED:
                links += 1
            elif args.dry_run and result.status == Status.PENDING:
                said = would_line(result)
                if said:
                    would_out.write(said + "\n")
            if verbose:
                line = object_line(result)
                if line:
                    progress.say(line)
            if extension:
                extension.on_result(result)

        listing = Listing(pairs)
        counted = progress.counting(listing)
        stopped: str | None = None
        with StopOnSignals(stderr) as signals:
            try:
                if extension:
                    extension.copy(copier, counted, on_result)
                else:
                    copier.copy_batch(counted, on_result=on_result, collect=False, first_window=FIRST_WINDOW)
            except (FerryError, ClientError, BotoCoreError, OSError) as error:
                # The listing or the report broke mid-way: what was done is still summarised.
                stopped = str(error)
        interrupted = signals.received
        held = (
            extension.after_copy(
                CopyEnd(
                    summary,
                    report,
                    failures,
                    stopped or ("interrupted" if interrupted else None),
                    progress.say if verbose else None,
                )
            )
            if extension
            else None
        )
        summary.degradations = copier.degradations
        if not stopped:  # a listing that broke off has not met every name it would have
            summary.note_files_from(names)
        summary.finish()
        unwritten = finish_reports(args, summary, failures, report, html_file)  # also after a stop
        stopped = stopped or unwritten
    _print_summary(args, summary, failures, stdout, stderr)
    if getattr(args, "bwlimit", None):
        note = server_side_note(summary)
        if note:
            (stderr if args.json else stdout).write(note + "\n")
    if links:
        # Each one is in the report; the summary says how many, and how to copy them.
        (stderr if args.json else stdout).write(
            f"  skipped: {plural(links, 'symbolic link')}, not followed (--follow-symlinks copies what they point to)\n"
        )
    if interrupted:
        if held:
            stderr.write(f"ferry: {held}\n")
        stderr.write(interrupted_note(args, summary, listing) + "\n")
        return 128 + interrupted
    return exit_code(args, summary, stopped, held, stderr)


class Listing:
    """The pairs as the copy reads them, counted; at an interruption no more are read (the
    rest of SRC is left unlisted), and whether the listing reached its end is known."""

    def __init__(self, pairs: Iterator[Any]) -> None:
        self._pairs = pairs
        self.read = 0
        self.ended = False

    def __iter__(self) -> Iterator[Any]:
        for pair in self._pairs:
            if stopping():
                return
            self.read += 1
            yield pair
        self.ended = True


def interrupted_note(args: argparse.Namespace, summary: Summary, listing: Listing) -> str:
    """An interrupted copy's last words: what finished, what was left, the command that
    finishes it (the same command: what was copied is skipped as identical, and a multipart
    copy stopped between parts resumes from the parts already in the destination)."""
    finished = f"{summary.copied} copied, {summary.skipped} skipped, {summary.failed} failed"
    left = f"{plural(summary.pending, 'object')} not finished"
    unlisted = "" if listing.ended else ", and the rest of SRC not yet listed"
    if args.no_skip_existing:
        rerun = "run it again without --no-skip-existing to copy only what is missing"
    else:
        rerun = "run the same command again to finish: what was copied is skipped, a multipart copy resumes"
    argv = getattr(args, "argv", None) or [args.command, args.src, args.dst]
    command = shlex.join(["ferry", *argv])
    return f"ferry: interrupted: {finished}; {left}{unlisted}. To go on, {rerun}:\n  {command}"


def would_line(result: CopyResult) -> str | None:
    """A dry run's line for one object: `would copy: s3://bucket/key` (`would restore: ...`,
    `would add a delete marker: ...`); None for a result that is no dry run's (a restore
    already under way)."""
    reason = result.reason or ""
    for said, verb in (
        (WOULD_COPY, "would copy"),
        (WOULD_RESTORE, "would restore"),
        (WOULD_MARK, "would add a delete marker"),
    ):
        if reason.startswith(said):
            return f"{verb}: {_source_name(result)}"
    return None


def server_side_note(summary: Summary) -> str | None:
    """What --bwlimit did not limit, said once: the objects copied inside the store."""
    inside = sum(n for how, n in summary.strategies.items() if how.startswith("server-side"))
    if not inside:
        return None
    were, them = ("was", "it") if inside == 1 else ("were", "them")
    return (
        f"  note: {plural(inside, 'object')} {were} copied server-side, inside the store: no byte passed "
        f"through this machine, so --bwlimit did not slow {them} (--mode stream sends every byte through it)"
    )


def object_line(result: CopyResult) -> str | None:
    """`-v`'s line for one object as it ends, in the summary's and the report's words:
    `copied: SRC -> DST (12 B, server-side, verified by crc32c (full object))`, `skipped: SRC:
    reason`, `failed: SRC: reason`, `pending: SRC: reason`. None for what a dry run already
    says (its `would copy:` lines) and for an object handed over to come again."""
    if result.handed_over or (result.status == Status.PENDING and would_line(result)):
        return None
    source = _source_name(result)
    if result.status == Status.COPIED:
        how = [format_size(result.bytes)]
        how += [result.strategy] if result.strategy else []
        how += [f"verified by {result.verified_by}"] if result.verified_by else []
        return f"copied: {source} -> {_dest_name(result)} ({', '.join(how)})"
    return f"{result.status}: {source}: {result.reason or 'no reason given'}"


def delete_line(result: DeleteResult) -> str | None:
    """`-v`'s line for one of a sync's deletes: `deleted: DST`, `skipped delete: DST: reason`,
    `failed delete: DST: reason`. None for a dry run's, which says `would delete:` itself."""
    where = result.key if result.bucket is None else f"s3://{result.bucket}/{result.key}"
    if result.status == "deleted":
        return f"deleted: {where}"
    if (result.reason or "").startswith(WOULD_DELETE):
        return None
    return f"{result.status} delete: {where}: {result.reason or 'no reason given'}"


def exit_code(
    args: argparse.Namespace, summary: Summary, stopped: str | None, held: str | None, stderr: IO[str]
) -> int:
    """A copy's exit code, the same for every door: a stop or what an extension held back (each
    said in one line), then failures, then objects left pending."""
    if stopped:
        stderr.write(f"ferry: error: stopped after {plural(summary.total, 'object')}: {stopped}\n")
        return EXIT_FAILED
    if held:
        stderr.write(f"ferry: error: {held}\n")
        return EXIT_FAILED
    if summary.failed:
        return EXIT_FAILED
    if summary.pending and not args.dry_run:
        return EXIT_PENDING
    return EXIT_OK


def finish_reports(
    args: argparse.Namespace,
    summary: Summary,
    failures: list[CopyResult],
    report: ReportWriter | None,
    html_file: IO[str] | None,
) -> str | None:
    """Close the JSON Lines report and write the HTML page of a finished copy; why either
    could not be written, or None."""
    problem: str | None = None
    if report:
        try:
            report.close(summary)
        except OSError as error:
            problem = f"cannot write the report: {error}"
    if html_file:
        page = render_report_html(
            report_for_html(
                summary, failures, source=args.src, destination=args.dst, failures_report=args.report
            )
        )
        try:
            html_file.write(page)
            html_file.flush()
        except OSError as error:
            problem = problem or f"cannot write the HTML report: {error}"
    return problem


T = TypeVar("T")


def matched_pairs(
    client: Any, src: S3Url, dst: S3Url, options: JobOptions, filters: Filters
) -> Iterator[Pair]:
    """The (object, target) pairs to copy, read lazily; refused in one line, before anything
    is written, when SRC matches nothing (no object under it, or globs and --files-from that
    leave out every one): that is far more often a mistyped SRC or glob than a wish, and s5cmd
    (`no object found`) and rclone (`directory not found`) fail it too: exit 1, Ferry's code
    for a usage or configuration error (rclone's 3 is Ferry's "pending"). Size and age filters
    that leave nothing this time are a copy of nothing, exit 0: `--max-age 1d` run nightly may
    find nothing new, as rclone's does."""
    marks = options.policy.marks_prefix
    pairs = plan_pairs(client, src, dst, filters=filters, marks_prefix=marks)
    return first_or_refuse(
        pairs, client, src, filters, lambda relaxed: _any_pair(client, src, dst, relaxed, marks), marks
    )


def first_or_refuse(
    pairs: Iterator[T],
    client: Any,
    src: S3Url,
    filters: Filters,
    any_with: Callable[[Filters], bool],
    marks: str | None = None,
) -> Iterator[T]:
    """`pairs` as they come, or the one-line refusal when there are none (matched_pairs says
    when nothing is a typo and when it is a copy of nothing); `any_with` tells whether SRC
    holds anything under other filters. For every door that reads SRC from S3."""
    first = next(pairs, None)
    if first is None:
        relaxed = replace(filters, min_size=None, max_size=None, modified_from=None, modified_to=None)
        if filters.by_details and any_with(relaxed):
            return iter(())  # sizes or ages chose nothing this time: a copy of nothing, not a typo
        if is_ferrys_own(src.key, marks_prefixes(marks)):
            raise ConfigError(
                f"nothing matched s3://{src.bucket}/{src.key}: it is among Ferry's own upload marks, "
                "which are never copied"
            )
        raise ConfigError(nothing_matched(client, src, filters))
    return itertools.chain([first], pairs)


def _any_pair(client: Any, src: S3Url, dst: S3Url, filters: Filters, marks_prefix: str | None) -> bool:
    return next(plan_pairs(client, src, dst, filters=filters, marks_prefix=marks_prefix), None) is not None


def _print_summary(
    args: argparse.Namespace, summary: Summary, failures: list[CopyResult], stdout: IO[str], stderr: IO[str]
) -> None:
    if args.json:
        stdout.write(json.dumps(summary.to_dict()) + "\n")
        out = stderr
    else:
        out = stdout
    out.write((summary.dry_run_line() if args.dry_run else summary.line()) + "\n")
    if summary.details():
        out.write(summary.details() + "\n")
    said = set(summary.degradations)
    remaining = summary.failure_reasons.copy()
    shown = 0  # failed objects accounted for by the lines printed
    for result in failures:
        if result.reason in said:
            # A run-level reason (one sentence for every such object): one line, not one each.
            count = remaining.pop(result.reason, 0)
            if count:
                more = f" and {plural(count - 1, 'more object')}" if count > 1 else ""
                where = f"{_source_name(result)}{more}"
                out.write(f"  failed: {where}: see the note above\n")
                shown += count
            continue
        out.write(f"  failed: {_source_name(result)}: {result.reason}\n")
        shown += 1
    if summary.failed > shown:
        out.write(
            f"  ... and {plural(summary.failed - shown, 'more failure')}"
            + (f" (see {args.report})" if args.report else "")
            + "\n"
        )


def _dest_name(result: CopyResult) -> str:
    """Where an object landed as s3://bucket/key; a local file (a download's) by its path."""
    if result.dest_bucket is None:
        return result.dest_key
    return f"s3://{result.dest_bucket}/{result.dest_key}"


def _source_name(result: CopyResult) -> str:
    """An object as s3://bucket/key; a local file (an upload's source) by its path."""
    if result.source_bucket is None:
        return result.source_key
    return f"s3://{result.source_bucket}/{result.source_key}"
