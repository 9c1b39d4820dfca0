"""The job's record: a running summary and a JSON Lines report, one line per object.

Counts always add up: every result lands in exactly one of copied, skipped, failed, pending
(and, for a sync that deletes, deleted: each delete is deleted, skipped, failed or pending).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from ferry.counts import Counts, plural
from ferry.engine.run.outcome import WOULD_COPY, WOULD_DELETE, WOULD_MARK, WOULD_RESTORE
from ferry.errors import ConfigError
from ferry.filters import NamedKeys
from ferry.limits import format_size
from ferry.models import CopyResult, Status
from ferry.reports.report_html import FAILURES_SHOWN as HTML_FAILURES_SHOWN
from ferry.reports.report_html import render_report_html
from ferry.reports.report_stats import ReportStats, Timeline, iso_time


@dataclass
class Summary(Counts):
    strategies: Counter[str] = field(default_factory=Counter)
    verified_by: Counter[str] = field(default_factory=Counter)
    # What the run learned an endpoint lacks and what it did instead, each said once.
    degradations: list[str] = field(default_factory=list)
    failure_reasons: Counter[str] = field(default_factory=Counter)
    # A sync with --delete: its deletes are counted beside the copies (`deleted`, and the
    # deletes not made under skipped, failed or pending).
    deleting: bool = False
    deleted: int = 0
    # Archived sources skipped because no --restore was asked: said, not silently counted.
    needs_restore: int = 0
    # A dry run's pending results, by what the run would have done (engine.run.outcome's words).
    would_copy: int = 0
    would_copy_bytes: int = 0
    would_restore: int = 0
    would_mark: int = 0  # --all-versions: delete markers a dry run would add
    would_delete: int = 0  # ferry sync --delete: objects a dry run would delete
    # A dry run: its JSON and report count what it would do apart from `pending` (which means
    # a restore under way), so the counts still add up to `objects`.
    dry_run: bool = False
    # --files-from: how many names it lists, and those no listed object matched (every one).
    files_from: dict[str, Any] | None = None
    started: float = field(default_factory=time.monotonic)
    seconds: float = 0.0
    # For the HTML report's charts: fixed-size counters, nothing kept per object.
    stats: ReportStats = field(default_factory=ReportStats)
    timeline: Timeline = field(default_factory=Timeline)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, result: CopyResult) -> None:
        with self._lock:
            self.count(result)
            if result.status == Status.COPIED:
                self.strategies[result.strategy or "unknown"] += 1
                self.verified_by[result.verified_by or "unverified"] += 1
            elif result.status == Status.FAILED:
                self.failure_reasons[result.reason or ""] += 1
            elif result.status == Status.SKIPPED and (result.reason or "").startswith("needs restore"):
                self.needs_restore += 1
            elif result.status == Status.PENDING:
                self._count_dry_run(result)
            self.stats.add(result)
            self.timeline.add(time.time(), 1, result.bytes if result.status == Status.COPIED else 0)
            self.seconds = time.monotonic() - self.started

    def _count_dry_run(self, result: CopyResult) -> None:
        reason = result.reason or ""
        if reason.startswith(WOULD_COPY):
            self.would_copy += 1
            self.would_copy_bytes += result.bytes
        elif reason.startswith(WOULD_RESTORE):
            self.would_restore += 1
        elif reason.startswith(WOULD_MARK):
            self.would_mark += 1

    def add_delete(self, status: str, reason: str | None = None) -> None:
        """One delete's outcome: deleted, skipped (kept, with the reason), failed or pending."""
        with self._lock:
            if status == "deleted":
                self.deleted += 1
            elif (reason or "").startswith(WOULD_DELETE):
                self.would_delete += 1
                self.pending += 1
            elif status == Status.SKIPPED:
                self.skipped += 1
            elif status == Status.FAILED:
                self.failed += 1
                self.failure_reasons[reason or ""] += 1
            else:
                self.pending += 1

    @property
    def total(self) -> int:
        return super().total + self.deleted

    def counts(self) -> dict[str, int]:
        counts = super().counts()
        return {**counts, "deleted": self.deleted} if self.deleting else counts

    def finish(self) -> Summary:
        self.seconds = time.monotonic() - self.started
        self.timeline.extend_to(time.time())
        return self

    @property
    def throughput(self) -> float:
        return self.bytes_copied / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        counts: dict[str, Any] = self.counts()
        if self.dry_run:
            counts = {**counts, "pending": self.pending - self._would(), **self.dry_run_dict()}
        return {
            **counts,
            "seconds": round(self.seconds, 3),
            "bytes_per_second": round(self.throughput),
            "strategies": dict(self.strategies),
            "verified_by": dict(self.verified_by),
            "degradations": list(self.degradations),
            **({"files_from": self.files_from} if self.files_from is not None else {}),
            "bytes": self.stats.to_dict()["bytes"],
            "sizes": self.stats.size_histogram(),
            "timeline": self.timeline.to_dict(),
        }

    def details(self) -> str:
        """How the copied objects were copied and proved, e.g. `server-side 307, ...`, and
        each degradation of the run, once."""
        lines = []
        if self.copied:
            how = ", ".join(f"{k} {v}" for k, v in self.strategies.most_common())
            proof = ", ".join(f"{k} {v}" for k, v in self.verified_by.most_common())
            lines += [f"  copied by: {how}", f"  verified by: {proof}"]
            if self.verified_by.get(SIZE_ONLY):
                lines.append(size_only_note(self.verified_by[SIZE_ONLY]))
        if self.needs_restore:
            lines.append(
                f"  skipped: {plural(self.needs_restore, 'archived object')} (an archive storage class): "
                "restore first, or run with --restore bulk|standard|expedited"
            )
        lines += [f"  note: {sentence}" for sentence in self.degradations]
        if self.files_from and self.files_from["unmatched"]:
            lines.append(unmatched_names_note(self.files_from["names"], self.files_from["unmatched"]))
        return "\n".join(lines)

    def note_files_from(self, names: NamedKeys | None) -> None:
        """What `--files-from` named and no listed object matched, once the listing is done."""
        if names is not None:
            self.files_from = {"names": len(names), "unmatched": names.unmatched()}

    def dry_run_dict(self) -> dict[str, Any]:
        """What `--json` adds for a dry run: what the run would have done."""
        return {
            "dry_run": True,
            "would_copy": self.would_copy,
            "would_copy_bytes": self.would_copy_bytes,
            "would_skip": self.skipped,
            "would_restore": self.would_restore,
            **({"would_add_delete_markers": self.would_mark} if self.would_mark else {}),
            **({"would_delete": self.would_delete} if self.deleting else {}),
        }

    def _would(self) -> int:
        """A dry run's results filed as pending that are what it would do, not a restore."""
        return self.would_copy + self.would_restore + self.would_mark + self.would_delete

    def dry_run_line(self) -> str:
        """A dry run's summary: what it would do, not the pending its results are filed as."""
        would = self._would()
        return dry_run_line(
            self.total,
            f"would copy {self.would_copy} ({format_size(self.would_copy_bytes)})",
            self.skipped,
            self.failed,
            would_restore=self.would_restore,
            would_mark=self.would_mark,
            would_delete=self.would_delete if self.deleting else None,
            pending=self.pending - would,
        )

    def line(self) -> str:
        deleted = f", {self.deleted} deleted" if self.deleting else ""
        return (
            f"{plural(self.total, 'object')}: {self.copied} copied, {self.skipped} skipped, {self.failed} failed, "
            f"{self.pending} pending{deleted} | {format_size(self.bytes_copied)} in {self.seconds:.1f}s "
            f"({format_size(self.throughput)}/s)"
        )


SIZE_ONLY = "size"  # verified_by of a copy only its size could prove (engine/proofs/verify.py)


def size_only_note(copies: int) -> str:
    """What `verified by: size N` does not say: those copies are not proved byte for byte
    (the same words `ferry check` uses for keys matched on size alone)."""
    return (
        f"  note: {plural(copies, 'object')} verified by size alone (no checksum or ETag comparable "
        "with the source's): not proved identical byte for byte"
    )


UNMATCHED_SHOWN = 10  # names the summary shows; the report's summary has every one


def unmatched_names_note(listed: int, unmatched: list[str]) -> str:
    """`note: 2 of the 5 names --files-from lists match no object: a.txt, b.txt`."""
    shown = ", ".join(unmatched[:UNMATCHED_SHOWN])
    more = len(unmatched) - UNMATCHED_SHOWN
    rest = f" and {more} more (the report lists them)" if more > 0 else ""
    return (
        f"  note: {len(unmatched)} of the {plural(listed, 'name')} --files-from lists "
        f"{'matches' if len(unmatched) == 1 else 'match'} no object: "
        f"{shown}{rest}"
    )


def failure_line(bucket: str | None, key: str | None, reason: str | None) -> str:
    """`  failed: s3://bucket/key: reason`; a manifest row that named no object has no place
    to show (its reason names the manifest instead of `s3:///`)."""
    if not key:
        return f"  failed: {reason}"
    return f"  failed: s3://{bucket or ''}/{key}: {reason}"


def dry_run_line(
    total: int,
    would_copy: str,
    skipped: int,
    failed: int,
    *,
    would_restore: int = 0,
    would_mark: int = 0,
    would_delete: int | None = None,
    pending: int = 0,
) -> str:
    """`dry run: 3 objects: would copy 2 (12 B), would skip 1, 0 failed; nothing was written`:
    the same words for `ferry copy --dry-run`, `ferry run` and `ferry job report` of a dry run."""
    said = [would_copy, f"would skip {skipped}"]
    if would_restore:
        said.append(f"would restore {would_restore}")
    if would_mark:
        said.append(f"would add {plural(would_mark, 'delete marker')}")
    if would_delete is not None:  # ferry sync --delete
        said.append(f"would delete {would_delete}")
    if pending:  # restores already in progress: a real run would wait for them too
        said.append(f"{pending} pending")
    said.append(f"{failed} failed")
    return f"dry run: {plural(total, 'object')}: {', '.join(said)}; nothing was written"


def report_for_html(
    summary: Summary,
    failures: list[CopyResult],
    *,
    source: str,
    destination: str,
    failures_report: str | None = None,
) -> dict[str, Any]:
    """The dict ferry.reports.report_html renders for a copy on this machine: the JSON summary plus
    where from and to, when, and the first failures kept (the rest are counted, not listed)."""
    report = summary.to_dict()
    report.update(
        source=source,
        destination=destination,
        started_at=report["timeline"]["start"],
        finished_at=iso_time(summary.timeline.start + summary.seconds),
        failures=[
            {
                "key": r.source_key,
                "bucket": r.source_bucket,
                "reason": r.reason,
                "version_id": r.source_version_id or r.version_id,
            }
            for r in failures
        ],
        failures_more=max(summary.failed - len(failures), 0),
    )
    if failures_report:
        report["failures_report"] = failures_report
    return report


class ReportWriter:
    """JSON Lines: one object per line (key, status, reason, ...), then one summary line."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def write(self, result: CopyResult) -> None:
        line = json.dumps(result.to_dict(), ensure_ascii=False, default=str)
        with self._lock:
            self._stream.write(line + "\n")

    def write_record(self, record: Mapping[str, Any]) -> None:
        """A line that is not a copy's (a sync's delete), in the same file."""
        line = json.dumps(record, ensure_ascii=False, default=str)
        with self._lock:
            self._stream.write(line + "\n")

    def close(self, summary: Summary) -> None:
        with self._lock:
            self._stream.write(json.dumps({"summary": summary.to_dict()}) + "\n")
            self._stream.flush()


def report_text(report: Mapping[str, Any], job_id: str, *, every_failure: bool) -> str:
    """Finalize's summary printed as `ferry copy` prints its own."""
    s = report["summary"]
    lines = [f"job {job_id}: {s.get('status')}", _counts_line(s)]
    source, destination = s.get("source") or {}, s.get("destination") or {}
    if source or destination:
        where = f"s3://{source.get('bucket', '')}/{source.get('prefix', '')}"
        if source.get("manifest"):
            m = source["manifest"]
            where = f"the {m.get('format')} manifest s3://{m.get('bucket')}/{m.get('key')}"
        lines.append(
            f"  from {where} to s3://{destination.get('bucket', '')}/{destination.get('prefix', '')}"
        )
    if s.get("started_at"):
        lines.append(f"  started: {s['started_at']}")
    if s.get("map_error"):
        lines.append(
            f"  note: the Distributed Map stopped: {s['map_error'].get('error')}: {s['map_error'].get('cause')}"
        )
    if (s.get("concurrency") or {}).get("note"):
        lines.append(f"  note: {s['concurrency']['note']}")
    read = s.get("objects_read_by_map")
    if read is not None and read != s.get("objects"):
        lines.append(
            f"  note: the Map read {plural(read, 'object')} but the ledger accounts for {s.get('objects')}"
        )
    if s.get("lost_in_unfinished_batches"):
        lines.append(
            f"  note: the failures include {plural(s['lost_in_unfinished_batches'], 'object')} of batches "
            "that did not finish"
        )
    failures = report.get("failures") or []
    for failure in failures:
        lines.append(failure_line(failure.get("bucket"), failure.get("key"), failure.get("reason")))
    more = int(s.get("failed") or 0) - len(failures)
    if more > 0 and not every_failure:
        lines.append(
            f"  ... and {plural(more, 'more failure')} (ferry job report {job_id} --failures, or {report['failures_report']})"
        )
    lines.append(f"  report: {report['report']}")
    if s.get("failed"):
        lines.append(f"  failures: {report['failures_report']} (ferry job retry {job_id} copies them again)")
    return "\n".join(lines)


def _counts_line(s: Mapping[str, Any]) -> str:
    """The counts as `ferry copy` says them; a dry run's as what it would have done."""
    if s.get("dry_run"):  # its pending objects are those it would copy, or restore first
        would = f"would copy or restore {s.get('pending', 0)}"
        return dry_run_line(s.get("objects", 0), would, s.get("skipped", 0), s.get("failed", 0))
    return (
        f"{plural(s.get('objects', 0), 'object')}: {s.get('copied', 0)} copied, {s.get('skipped', 0)} skipped, "
        f"{s.get('failed', 0)} failed, {s.get('pending', 0)} pending | "
        f"{format_size(s.get('bytes_copied') or 0)} copied in {plural(s.get('batches', 0), 'batch')}"
    )


def write_html(report: Mapping[str, Any], failures: Iterable[Mapping[str, Any]], path: str) -> None:
    """The same page Finalize writes beside summary.json, rendered here from the summary and
    the first failures (failures.jsonl's rows for a job on AWS, the ledger's for one `ferry
    run` ran; read lazily: the rest are counted, not loaded). For `ferry job report --html`."""
    summary = report["summary"]
    shown = list(itertools.islice(failures, HTML_FAILURES_SHOWN))
    page = render_report_html(
        {
            **summary,
            "failures": shown,
            "failures_more": int(summary.get("failed", 0)) - len(shown),
            "failures_report": report["failures_report"],
        }
    )
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(page)
    except OSError as error:
        raise ConfigError(f"cannot write {path!r}: {error.strerror}") from error
