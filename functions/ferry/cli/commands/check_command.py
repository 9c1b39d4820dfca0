"""`ferry check SRC DST`: compare two prefixes without copying anything.

Every key either side holds (after the filters) is missing on the destination, missing on the
source, different, identical or unreadable, with the evidence that decided (a checksum, an
ETag or the size: engine/compare/comparison.py). The differences are printed, every key goes to the
JSON Lines report, and the summary to the HTML page.

Exit codes: 0 the two sides match; 2 they differ (or some key could not be read to compare);
1 bad input, or a listing that failed (nothing was decided).

Either side may be a local folder (local_check.py makes the sides): its files are compared
with the other side's objects by the objects' own checksums or MD5 ETags, computed over the
files as they are read.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import IO, Any

from botocore.exceptions import BotoCoreError, ClientError

from ferry.cli.commands.local_check import local_sides
from ferry.cli.shared.clients import ClientMaker
from ferry.cli.shared.filter_options import filters_from
from ferry.cli.shared.parsing import EXIT_FAILED, EXIT_OK, EXIT_USAGE, open_for_writing
from ferry.cli.shared.report import unmatched_names_note
from ferry.cli.shared.sides import endpoints
from ferry.counts import plural
from ferry.engine.compare.check import KeyCheck, Verdict, check_objects, check_sides
from ferry.engine.compare.side_listing import Entry, S3Side
from ferry.errors import ConfigError, FerryError
from ferry.filters import Filters
from ferry.jobspec import JobOptions, parse_options
from ferry.local.paths import is_local
from ferry.models import SourceObject
from ferry.reports.report_html import render_check_html
from ferry.reports.report_stats import iso_time
from ferry.s3.clients import make_client
from ferry.s3.listing import Prefix, S3Url, object_or_prefix, parse_s3_url, single_object

SHOWN = 50  # differences kept for the HTML page; the report has every key
_WORDS = {
    Verdict.MISSING_ON_DESTINATION: "missing on destination",
    Verdict.MISSING_ON_SOURCE: "missing on source",
    Verdict.DIFFERENT: "differs",
    Verdict.UNREADABLE: "unreadable",
}


@dataclass
class CheckSummary:
    """Counts that add up: every key in exactly one verdict."""

    verdicts: Counter[str] = field(default_factory=Counter)
    identical_by: Counter[str] = field(default_factory=Counter)
    differences: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    seconds: float = 0.0
    stopped: str | None = None
    # --files-from: how many names it lists, and those neither side's listing matched.
    files_from: dict[str, Any] | None = None

    def add(self, check: KeyCheck) -> None:
        self.verdicts[str(check.verdict)] += 1
        if check.verdict == Verdict.IDENTICAL:
            self.identical_by[check.evidence or "size"] += 1
        elif len(self.differences) < SHOWN:
            self.differences.append(check.to_dict())

    @property
    def keys(self) -> int:
        return sum(self.verdicts.values())

    @property
    def matched(self) -> bool:
        return self.keys == self.verdicts[Verdict.IDENTICAL] and self.stopped is None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"keys": self.keys}
        data.update({str(v).replace("-", "_"): self.verdicts[str(v)] for v in Verdict})
        data["identical_by"] = dict(self.identical_by)
        data["match"] = self.matched
        data["seconds"] = round(self.seconds, 3)
        if self.files_from is not None:
            data["files_from"] = self.files_from
        if self.stopped:
            data["stopped"] = self.stopped
        return data

    def line(self) -> str:
        return (
            f"{plural(self.keys, 'key')}: {self.verdicts[Verdict.IDENTICAL]} identical, "
            f"{self.verdicts[Verdict.DIFFERENT]} different, "
            f"{self.verdicts[Verdict.MISSING_ON_DESTINATION]} missing on destination, "
            f"{self.verdicts[Verdict.MISSING_ON_SOURCE]} missing on source, "
            f"{self.verdicts[Verdict.UNREADABLE]} unreadable"
        )

    def details(self) -> list[str]:
        lines = []
        if self.identical_by:
            how = ", ".join(f"{k} {v}" for k, v in self.identical_by.most_common())
            lines.append(f"  identical by: {how}")
        if self.identical_by.get("size"):
            lines.append(
                f"  note: {plural(self.identical_by['size'], 'key')} identical by size alone (no comparable "
                "checksum or ETag): not proved identical byte for byte"
            )
        if self.files_from and self.files_from["unmatched"]:
            lines.append(unmatched_names_note(self.files_from["names"], self.files_from["unmatched"]))
        return lines


DEFAULT_HEAD_CONCURRENCY = 16  # HEADs at once when a comparison needs them


def check_options(args: argparse.Namespace) -> JobOptions:
    """The options `ferry check` shares with `ferry copy` (globs, the marks folder left out)."""
    given = {"include": args.include, "exclude": args.exclude, "marks_prefix": args.marks_prefix}
    return parse_options(
        {k: v for k, v in given.items() if v is not None}, name=lambda f: "--" + f.replace("_", "-")
    )


def head_concurrency(args: argparse.Namespace) -> int:
    return args.concurrency or DEFAULT_HEAD_CONCURRENCY


def run_check(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """`ferry check`: validate, list both sides, compare, report."""
    options = check_options(args)
    filters = filters_from(args, options.include, options.exclude)
    if args.concurrency is not None and args.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    threads = head_concurrency(args)
    checks: Callable[[], Iterator[KeyCheck]]
    if is_local(args.src) or is_local(args.dst):
        left, right = local_sides(args, filters, options.policy.marks_prefix)
        checks = partial(check_sides, left, right, threads=threads)
    else:
        if args.follow_symlinks:
            raise ConfigError("--follow-symlinks applies to a local folder: SRC and DST are both s3://")
        src, dst = parse_s3_url(args.src, "SRC"), parse_s3_url(args.dst, "DST")
        source, destination = endpoints(args)
        clients = ClientMaker(make_client).checked_sides(source, destination, src, dst)
        marks = options.policy.marks_prefix
        s3_left = S3Side.of(clients.source, src.bucket, src.key, "source", filters, marks)
        s3_right = S3Side.of(clients.dest, dst.bucket, dst.key, "destination", filters, marks)
        checks = partial(_checks, s3_left, s3_right, src, dst, filters, threads)
    summary = CheckSummary()
    out = stderr if args.json else stdout
    with ExitStack() as stack:
        report = open_for_writing(stack, args.report, "the report") if args.report else None
        html = open_for_writing(stack, args.report_html, "the HTML report") if args.report_html else None
        try:
            for check in checks():
                summary.add(check)
                if report:
                    report.write(json.dumps(check.to_dict(), ensure_ascii=False) + "\n")
                if check.verdict != Verdict.IDENTICAL:
                    out.write(_line(check))
        except (FerryError, ClientError, BotoCoreError, OSError) as error:
            summary.stopped = str(error)
        if summary.stopped is None and filters.keys is not None:  # both listings went to their end
            summary.files_from = {"names": len(filters.keys), "unmatched": filters.keys.unmatched()}
        summary.seconds = time.time() - summary.started
        if report:
            report.write(json.dumps({"summary": summary.to_dict()}) + "\n")
        if html:
            html.write(render_check_html(_for_html(summary, args)))
    if args.json:
        stdout.write(json.dumps(summary.to_dict()) + "\n")
    out.write(summary.line() + "\n")
    for line in summary.details():
        out.write(line + "\n")
    if summary.stopped:
        stderr.write(
            f"ferry: error: the check stopped after {plural(summary.keys, 'key')}: {summary.stopped}\n"
        )
        return EXIT_USAGE
    return EXIT_OK if summary.matched else EXIT_FAILED


def _checks(
    left: S3Side, right: S3Side, src: S3Url, dst: S3Url, filters: Filters, threads: int
) -> Iterator[KeyCheck]:
    """Every key of two prefixes; or, when SRC names an object, that object against the one
    `ferry copy` would write (DST's key, or DST's folder and the object's name)."""
    source = object_or_prefix(left.client, src, filters)
    if isinstance(source, Prefix):
        yield from check_sides(left, right, threads=threads)
        return
    if not source.admitted:
        return
    name = source.name
    theirs = single_object(right.client, S3Url(dst.bucket, source.key_in(dst.key)))
    yield check_objects(left, _entry(source.found, name), right, _entry(theirs, name) if theirs else None)


def _entry(obj: SourceObject, name: str) -> Entry:
    return Entry(name, obj.key, obj.size, obj.etag, obj.last_modified)


def _line(check: KeyCheck) -> str:
    detail = (
        f" ({check.evidence}: {check.detail})"
        if check.evidence
        else (f" ({check.detail})" if check.detail else "")
    )
    return f"{_WORDS[check.verdict]}: {check.relative_key}{detail}\n"


def _for_html(summary: CheckSummary, args: argparse.Namespace) -> dict[str, Any]:
    """What report_html.render_check_html draws: the JSON summary, where, when, and the first
    differences (the JSON Lines report, if asked for, has them all)."""
    report = summary.to_dict()
    report.update(
        source=args.src,
        destination=args.dst,
        started_at=iso_time(summary.started),
        finished_at=iso_time(summary.started + summary.seconds),
        differences=summary.differences,
    )
    if args.report:
        report["differences_report"] = args.report
    return report
