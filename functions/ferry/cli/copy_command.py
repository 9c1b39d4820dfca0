"""`ferry copy`: copy a prefix or one object between any two S3 endpoints, verified, with a
progress bar on a terminal (ferry.cli.progress), a summary, and an optional JSON Lines report."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from contextlib import ExitStack
from typing import IO

from botocore.exceptions import BotoCoreError, ClientError

from ferry.cli.parsing import EXIT_FAILED, EXIT_OK, EXIT_PENDING, Parser
from ferry.cli.progress import Progress
from ferry.cli.ranges import add_memory_limit_argument, check_count, check_kms_region, memory_limit
from ferry.cli.report import ReportWriter, Summary, report_for_html
from ferry.clients import make_client
from ferry.engine.copier import Copier, client_pool_size
from ferry.errors import ConfigError, FerryError
from ferry.jobspec import JobOptions, parse_options
from ferry.lean_s3 import LEAN_ENV
from ferry.listing import check_bucket, check_overlap, parse_s3_url, plan_pairs
from ferry.models import CHECKSUM_ALGORITHMS, CopyResult, Endpoint, Status
from ferry.report_html import render_report_html


def _pairs(values: Sequence[str], what: str) -> dict[str, str]:
    result = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise ConfigError(f"{what} {value!r} must be written KEY=VALUE")
        result[key] = val
    return result


def add_copy_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """`ferry copy`'s arguments, under the root parser's subcommands."""
    copy = commands.add_parser(
        "copy", help="copy a prefix or one object", description="Copy SRC to DST (s3://bucket/prefix)."
    )
    copy.add_argument("src", metavar="SRC")
    copy.add_argument("dst", metavar="DST")
    where = copy.add_argument_group("endpoints and credentials")
    where.add_argument("--endpoint-url", help="S3 endpoint for both sides (an S3-compatible server)")
    where.add_argument("--source-endpoint-url")
    where.add_argument("--dest-endpoint-url")
    where.add_argument("--region", help="region for both sides")
    where.add_argument("--source-region")
    where.add_argument("--dest-region")
    where.add_argument("--source-profile", help="AWS profile for the source")
    where.add_argument("--dest-profile", help="AWS profile for the destination")
    where.add_argument("--source-role-arn", help="role to assume for the source")
    where.add_argument("--dest-role-arn", help="role to assume for the destination")
    where.add_argument("--source-requester-pays", action="store_true")
    where.add_argument("--dest-requester-pays", action="store_true")
    how = copy.add_argument_group("how to copy")
    how.add_argument("--mode", choices=["auto", "server-side", "stream"], default="auto")
    how.add_argument("--concurrency", type=int, help="objects copied at once (default: from CPUs and sizes)")
    how.add_argument("--part-concurrency", type=int, help="parts in flight across all objects")
    how.add_argument(
        "--no-lean-requests",
        action="store_true",
        help="send every request through botocore (default: the lean path for small-object requests; "
        "also FERRY_LEAN_REQUESTS=0)",
    )
    how.add_argument(
        "--part-size", help="multipart part size, e.g. 8MiB (default: the source's layout, else chosen)"
    )
    how.add_argument("--multipart-threshold", default="16MiB", help="stream objects above this in parts")
    add_memory_limit_argument(how)
    how.add_argument("--checksum-algorithm", type=str.upper, choices=CHECKSUM_ALGORITHMS)
    how.add_argument(
        "--marks-prefix",
        help="where the destination bucket holds the marks that let a crashed copy resume (default .ferry/uploads/)",
    )
    what = copy.add_argument_group("what to copy")
    what.add_argument("--include", action="append", default=[], metavar="GLOB")
    what.add_argument("--exclude", action="append", default=[], metavar="GLOB")
    what.add_argument(
        "--no-skip-existing", action="store_true", help="copy even when the destination is identical"
    )
    what.add_argument("--compare", choices=["checksum", "size-mtime"], default="checksum")
    what.add_argument("--restore", choices=["bulk", "standard", "expedited"], help="restore archived objects")
    what.add_argument("--restore-days", type=int, default=7)
    attrs = copy.add_argument_group("destination attributes (default: preserve the source's)")
    attrs.add_argument("--storage-class")
    attrs.add_argument(
        "--metadata", action="append", default=[], metavar="KEY=VALUE", help="replace user metadata"
    )
    attrs.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE", help="replace tags")
    attrs.add_argument("--no-tags", action="store_true", help="do not copy tags")
    attrs.add_argument("--kms-key-id", help="encrypt the destination with this KMS key")
    out = copy.add_argument_group("output")
    out.add_argument("--dry-run", action="store_true", help="list and compare; copy nothing")
    out.add_argument(
        "--report", metavar="FILE", help="JSON Lines report: one line per object, then a summary"
    )
    out.add_argument(
        "--report-html",
        metavar="FILE",
        help="the report as one HTML page (summary, charts, failures); opens with no network",
    )
    out.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    out.add_argument("--quiet", action="store_true", help="no progress bar")
    return copy


def parse_copy_args(argv: Sequence[str]) -> argparse.Namespace:
    """`ferry copy ARGS` parsed on its own, for callers that run a copy without the root
    parser (the demo)."""
    parser = Parser(prog="ferry")
    add_copy_parser(parser.add_subparsers(dest="command", required=True, parser_class=Parser))
    return parser.parse_args(["copy", *argv])


def endpoints(args: argparse.Namespace) -> tuple[Endpoint, Endpoint]:
    """Per-side options win over the shared --endpoint-url and --region."""

    def side(name: str) -> Endpoint:
        return Endpoint(
            endpoint_url=getattr(args, f"{name}_endpoint_url") or args.endpoint_url,
            region=getattr(args, f"{name}_region") or args.region,
            profile=getattr(args, f"{name}_profile"),
            role_arn=getattr(args, f"{name}_role_arn"),
            requester_pays=getattr(args, f"{name}_requester_pays"),
        )

    return side("source"), side("dest")


_FLAGS = {
    "skip_existing": "--no-skip-existing",
    "restore_tier": "--restore",
    "tags": "--tag",
    "preserve_tags": "--no-tags",
}


def _flag(field: str) -> str:
    return _FLAGS.get(field, "--" + field.replace("_", "-"))


def options_from(args: argparse.Namespace) -> JobOptions:
    """The CLI's options, validated by the same code as a pipeline job's `options`."""
    options = {
        "mode": args.mode,
        "part_size": args.part_size,
        "multipart_threshold": args.multipart_threshold,
        "checksum_algorithm": args.checksum_algorithm,
        "storage_class": args.storage_class,
        "metadata": _pairs(args.metadata, "--metadata") if args.metadata else None,
        "tags": _pairs(args.tag, "--tag") if args.tag else None,
        "preserve_tags": not args.no_tags,
        "kms_key_id": args.kms_key_id,
        "skip_existing": not args.no_skip_existing,
        "compare": args.compare,
        "restore_tier": args.restore,
        "restore_days": args.restore_days,
        "dry_run": args.dry_run,
        "marks_prefix": args.marks_prefix,
        "include": args.include,
        "exclude": args.exclude,
    }
    return parse_options({k: v for k, v in options.items() if v is not None}, name=_flag)


def run_copy(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """`ferry copy`: validate everything, then copy, report and summarise."""
    options = options_from(args)
    check_count(args.concurrency, "--concurrency")
    check_count(args.part_concurrency, "--part-concurrency")
    memory = memory_limit(args.memory_limit)
    src, dst = parse_s3_url(args.src, "SRC"), parse_s3_url(args.dst, "DST")
    source, destination = endpoints(args)
    check_kms_region(options.policy.dest_kms_key_id, destination.region, "--kms-key-id")
    if args.no_lean_requests:
        # For the whole run: every client this process makes (the Copier's too) reads it.
        os.environ[LEAN_ENV] = "0"
    pool = client_pool_size(args.concurrency, args.part_concurrency)
    source_client = make_client(source, pool)
    dest_client = make_client(destination, pool)
    check_bucket(source_client, src.bucket, "source")
    check_bucket(dest_client, dst.bucket, "destination")
    same_endpoint = (source.endpoint_url, source.partition) == (
        destination.endpoint_url,
        destination.partition,
    )
    check_overlap(source_client, src, dst, options, same_endpoint=same_endpoint)
    summary = Summary()
    with ExitStack() as stack:
        report = None
        if args.report:
            try:
                report_file = stack.enter_context(open(args.report, "w", encoding="utf-8"))  # noqa: SIM115
            except OSError as error:
                raise ConfigError(f"cannot write the report {args.report!r}: {error.strerror}") from error
            report = ReportWriter(report_file)
        html_file = (
            _open_for_writing(stack, args.report_html, "the HTML report") if args.report_html else None
        )
        copier = stack.enter_context(
            Copier(
                source,
                destination,
                options.policy,
                concurrency=args.concurrency,
                part_concurrency=args.part_concurrency,
                memory_limit=memory,
                source_client=source_client,
                dest_client=dest_client,
            )
        )
        failures: list[CopyResult] = []

        show = not args.quiet and stderr.isatty()
        progress = stack.enter_context(Progress(stderr, enabled=show))

        def on_result(result: CopyResult) -> None:
            summary.add(result)
            progress.add(result)
            if report:
                report.write(result)
            if result.status == Status.FAILED and len(failures) < 20:
                failures.append(result)

        pairs = progress.counting(plan_pairs(source_client, src, dst, options.include, options.exclude))
        stopped: str | None = None
        try:
            copier.copy_batch(pairs, on_result=on_result, collect=False)
        except (FerryError, ClientError, BotoCoreError, OSError) as error:
            # The listing or the report broke mid-way: what was done is still summarised.
            stopped = str(error)
        summary.degradations = copier.degradations
        summary.finish()
        if report:
            try:
                report.close(summary)
            except OSError as error:
                stopped = stopped or f"cannot write the report: {error}"
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
                stopped = stopped or f"cannot write the HTML report: {error}"
    _print_summary(args, summary, failures, stdout, stderr)
    if stopped:
        stderr.write(f"ferry: error: stopped after {summary.total} objects: {stopped}\n")
        return EXIT_FAILED
    if summary.failed:
        return EXIT_FAILED
    if summary.pending and not args.dry_run:
        return EXIT_PENDING
    return EXIT_OK


def _open_for_writing(stack: ExitStack, path: str, what: str) -> IO[str]:
    """Open an output file before copying anything, so a wrong path costs no copy."""
    try:
        return stack.enter_context(open(path, "w", encoding="utf-8"))  # noqa: SIM115
    except OSError as error:
        raise ConfigError(f"cannot write {what} {path!r}: {error.strerror}") from error


def _print_summary(
    args: argparse.Namespace, summary: Summary, failures: list[CopyResult], stdout: IO[str], stderr: IO[str]
) -> None:
    if args.json:
        stdout.write(json.dumps(summary.to_dict()) + "\n")
        out = stderr
    else:
        out = stdout
    prefix = "dry run, " if args.dry_run else ""
    out.write(f"{prefix}{summary.line()}\n")
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
                more = f" and {count - 1} more objects" if count > 1 else ""
                where = f"s3://{result.source_bucket}/{result.source_key}{more}"
                out.write(f"  failed: {where}: see the note above\n")
                shown += count
            continue
        out.write(f"  failed: s3://{result.source_bucket}/{result.source_key}: {result.reason}\n")
        shown += 1
    if summary.failed > shown:
        out.write(
            f"  ... and {summary.failed - shown} more failures"
            + (f" (see {args.report})" if args.report else "")
            + "\n"
        )
