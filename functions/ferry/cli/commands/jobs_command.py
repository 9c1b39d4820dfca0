"""`ferry job ...`: check a job spec offline, and start, watch, read, list and retry jobs on a
deployed stack, found by its name (`--stack`, CloudFormation outputs; no ARN copied by hand).

    ferry job validate FILE
    ferry job start  (SRC DST | --spec FILE) [--job-id ID] [options of a job spec]
    ferry job status JOB [--watch] [--json]
    ferry job report JOB [--failures] [--json] [--html FILE]
    ferry job list   [--status STATUS] [--max N] [--json]
    ferry job retry  JOB [--json]

Exit codes as `ferry copy`'s: 0 the job succeeded (or is running), 2 some object failed or
the job failed, 3 objects pending, 1 a usage or configuration error in one line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import time
from collections.abc import Callable, Mapping
from typing import IO, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from ferry.cli.commands.copy_command import _flag, given_alike
from ferry.cli.commands.job_retry import FAILED_HISTORIES, FAILED_OBJECTS, NOTHING, REDRIVE, retry_job
from ferry.cli.commands.job_runs import (
    JobClients,
    JobStatus,
    console_url,
    job_report,
    job_status,
    list_jobs,
    read_failures,
    start_job,
)
from ferry.cli.commands.local_jobs import run_local, wants_local
from ferry.cli.shared.parsing import EXIT_FAILED, EXIT_OK, EXIT_PENDING, job_id_of, read_json_file
from ferry.cli.shared.report import report_text, write_html
from ferry.cli.shared.stack_outputs import DEFAULT_STACK, StackOutputs
from ferry.counts import plural
from ferry.errors import ConfigError
from ferry.jobspec import JobSpec, parse_options, validate_job_spec
from ferry.limits import format_size
from ferry.s3.listing import parse_s3_url

FAILURES_SHOWN = 20


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The job options given on the command line, as a job spec's `options` fields."""
    options = {
        **given_alike(args),
        "skip_existing": False if args.no_skip_existing else None,
        "compare": args.compare,
        "preserve_tags": False if args.no_tags else None,
        "dry_run": True if args.dry_run else None,
        "all_versions": True if args.all_versions else None,
    }
    given = {k: v for k, v in options.items() if v is not None}
    parse_options(given, name=_flag)  # a wrong flag is named as the user wrote it
    return given


def run_job(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Dispatch `ferry job SUBCOMMAND`."""
    if args.job_command == "validate":
        return run_job_validate(args.spec, stdout)
    if args.job_command == "start":
        spec = validate_job_spec(spec_from_args(args))  # Prepare's validator, before any AWS setting
        return run_start(JobClients.create(args.region, args.profile), args, stdout, spec)
    if args.job_command in ("status", "report", "list") and wants_local(args):
        return run_local(args, stdout)
    clients = JobClients.create(args.region, args.profile)
    runs: dict[str, Callable[[JobClients, argparse.Namespace, IO[str]], int]] = {
        "status": run_status,
        "report": run_report,
        "list": run_list,
        "retry": run_retry,
    }
    return runs[args.job_command](clients, args, stdout)


def run_job_validate(path: str, stdout: IO[str]) -> int:
    """`ferry job validate FILE`: the same validation Prepare runs before any fan-out."""
    data = read_json_file(path)
    spec = validate_job_spec(data, default_job_id="EXECUTION-NAME")
    stdout.write(json.dumps(spec.to_dict(), indent=2) + "\n")
    return EXIT_OK


# -- start -----------------------------------------------------------------------------------


def spec_from_args(args: argparse.Namespace, now: dt.datetime | None = None) -> dict[str, Any]:
    """The job spec `ferry job start` sends: a --spec file or SRC DST, with the options given
    on the command line on top, and a job id."""
    if args.spec and (args.src or args.dst):
        raise ConfigError("give SRC DST or --spec FILE, not both")
    if args.spec:
        data = read_json_file(args.spec)
        if not isinstance(data, Mapping):
            raise ConfigError(f"{args.spec!r} must hold a JSON object (a job spec)")
        spec = dict(data)
    elif args.src and args.dst:
        src, dst = parse_s3_url(args.src, "SRC"), parse_s3_url(args.dst, "DST")
        spec = {
            "source": {"bucket": src.bucket, "prefix": src.key},
            "destination": {"bucket": dst.bucket, "prefix": dst.key},
        }
    else:
        raise ConfigError("give what to copy: SRC DST (s3://bucket/prefix), or --spec FILE")
    options = given_options(args)
    if options:
        current = spec.get("options", {})
        if not isinstance(current, Mapping):  # named as Prepare names it, not silently replaced
            raise ConfigError(f"options: must be an object, not {type(current).__name__}")
        spec["options"] = {**current, **options}
    moment = now or dt.datetime.now(dt.UTC)
    job_id = job_id_of(args.job_id, spec, args.spec)  # an empty one is refused, not replaced
    spec["job_id"] = job_id if job_id is not None else f"job-{moment:%Y%m%d-%H%M%S}"
    return spec


def run_start(clients: JobClients, args: argparse.Namespace, stdout: IO[str], spec: JobSpec) -> int:
    outputs = clients.outputs(args.stack)
    started = start_job(clients, outputs, spec)
    if args.json:
        stdout.write(json.dumps(started.to_dict()) + "\n")
        return EXIT_OK
    stdout.write(
        f"started job {started.job_id}\n"
        f"  execution: {started.execution_arn}\n"
        f"  console: {started.console_url}\n"
        f"  follow it: ferry job status {started.job_id}{_stack_flag(args)} --watch\n"
    )
    return EXIT_OK


def _stack_flag(args: argparse.Namespace) -> str:
    return "" if args.stack == DEFAULT_STACK else f" --stack {args.stack}"


# -- status ----------------------------------------------------------------------------------


def run_status(clients: JobClients, args: argparse.Namespace, stdout: IO[str]) -> int:
    outputs = clients.outputs(args.stack)
    console = Console(file=stdout, highlight=False)
    terminal = console.is_terminal and not args.json

    def fetch() -> JobStatus:
        return job_status(clients, outputs, args.job_id)

    if args.watch and terminal:
        status = _watch_with_bar(console, fetch, args.interval)
    else:
        status = fetch()
        while args.watch and status.running:
            time.sleep(args.interval)
            status = fetch()
        if terminal:
            _print_bar(console, status)
    if args.json:
        stdout.write(json.dumps(status.to_dict()) + "\n")
    else:
        stdout.write(status_text(status) + "\n")
    return _status_exit(status)


def _status_exit(status: JobStatus) -> int:
    if status.running or status.job_status == "SUCCEEDED" or status.execution_status == "SUCCEEDED":
        return EXIT_OK
    return EXIT_FAILED


def _progress(console: Console) -> Progress:
    """objects done of those listed, bytes copied, rates and ETA: rich's bar and counter, the
    rates and ETA computed from the ledger (they are averages since the job started)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("objects | {task.fields[bytes]} | {task.fields[rate]} | ETA {task.fields[eta]}"),
        console=console,
        auto_refresh=False,
    )


def _bar_fields(status: JobStatus) -> dict[str, Any]:
    eta = status.eta_seconds
    return {
        "total": status.listed,
        "completed": status.items_done,  # what `total` counts: objects, or an all_versions job's keys
        "bytes": format_size(status.counts["bytes_copied"]),
        "rate": f"{format_size(status.bytes_per_second)}/s, {status.objects_per_second:.1f} obj/s",
        "eta": _duration(eta) if eta is not None else "-",
    }


def _print_bar(console: Console, status: JobStatus) -> None:
    progress = _progress(console)
    fields = _bar_fields(status)
    task = progress.add_task(
        status.job_id, total=fields.pop("total"), completed=fields.pop("completed"), **fields
    )
    progress.update(task)
    console.print(progress.get_renderable())


def _watch_with_bar(console: Console, fetch: Callable[[], JobStatus], interval: float) -> JobStatus:
    status = fetch()
    with _progress(console) as progress:
        task: TaskID = progress.add_task(status.job_id, total=None, bytes="", rate="", eta="-")
        while True:
            progress.update(task, **_bar_fields(status))
            progress.refresh()
            if not status.running:
                return status
            time.sleep(interval)
            status = fetch()


def status_text(status: JobStatus) -> str:
    """The status in a few lines, the same on a terminal, in a pipe and in a log."""
    c = status.counts
    state = job_state(status)
    execution = status.execution_status + (f": {status.error}" if status.error else "")
    lines = [f"job {status.job_id}: {state} (execution {execution}), {_duration(status.seconds)}"]
    so_far = " so far" if status.running else ""
    if status.by_keys:  # the Map reads keys; the objects are their versions
        of = f" versions of {plural(status.items_done, 'key')}" + (
            "" if status.listed is None else f", of {plural(status.listed, 'key')} listed{so_far}"
        )
    else:
        of = "" if status.listed is None else f" of {status.listed} listed{so_far}"
    lines.append(
        f"  objects: {status.done}{of}: {c['copied']} copied, {c['skipped']} skipped, "
        f"{c['failed']} failed, {c['pending']} pending"
    )
    eta = status.eta_seconds
    lines.append(
        f"  bytes copied: {format_size(c['bytes_copied'])} at {format_size(status.bytes_per_second)}/s, "
        f"{status.objects_per_second:.1f} objects/s" + (f"; ETA {_duration(eta)}" if eta is not None else "")
    )
    if c["failed"]:
        lines.append(f"  failures so far: {c['failed']} (ferry job report {status.job_id} --failures)")
    if status.cause and not status.running:
        lines.append(f"  cause: {status.cause[:500]}")
    lines.append(f"  console: {status.to_dict()['console_url']}")
    return "\n".join(lines)


def job_state(status: JobStatus) -> str:
    """The job's state in one word: the ledger's, unless the execution ended without Finalize
    settling it (aborted, timed out, refused by Prepare), when the ledger still says RUNNING
    or has no record."""
    if status.job_status not in (None, "RUNNING") or status.running:
        return status.job_status or "STARTING"
    if status.error == "FerryJobRejected":
        return "REJECTED"
    return status.execution_status


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02}m"
    if minutes:
        return f"{minutes}m {secs:02}s"
    return f"{secs}s"


# -- report ----------------------------------------------------------------------------------


def run_report(clients: JobClients, args: argparse.Namespace, stdout: IO[str]) -> int:
    outputs = clients.outputs(args.stack)
    report = load_report(clients, outputs, args.job_id, failures=args.failures)
    if args.html:
        write_html(report, read_failures(clients, outputs, args.job_id), args.html)
    if args.json:
        stdout.write(json.dumps(report, ensure_ascii=False) + "\n")
    else:
        if not args.failures:  # the first few, as `ferry copy` prints them
            report["failures"] = list(
                itertools.islice(read_failures(clients, outputs, args.job_id), FAILURES_SHOWN)
            )
        stdout.write(report_text(report, args.job_id, every_failure=args.failures) + "\n")
    return _report_exit(report["summary"])


def load_report(
    clients: JobClients, outputs: StackOutputs, job_id: str, *, failures: bool = False
) -> dict[str, Any]:
    """The job's report as a dict ({"summary", "report", "failures_report"[, "failures"]}):
    the hook for other renderings of `ferry job report` (e.g. an HTML file)."""
    return job_report(clients, outputs, job_id, failures=failures)


def _report_exit(summary: Mapping[str, Any]) -> int:
    if summary.get("failed") or summary.get("status") == "FAILED":
        return EXIT_FAILED
    if summary.get("pending") and not summary.get("dry_run"):
        return EXIT_PENDING
    return EXIT_OK


# -- list ------------------------------------------------------------------------------------


def run_list(clients: JobClients, args: argparse.Namespace, stdout: IO[str]) -> int:
    if args.max < 1:
        raise ConfigError("--max must be at least 1")
    outputs = clients.outputs(args.stack)
    jobs = list_jobs(clients, outputs, status=args.status, limit=args.max)
    if args.json:
        stdout.write(json.dumps({"stack": outputs.stack, "jobs": jobs}) + "\n")
        return EXIT_OK
    if not jobs:
        stdout.write(
            f"no jobs in stack {outputs.stack}"
            + (f" with status {args.status}" if args.status else "")
            + "\n"
        )
        return EXIT_OK
    header = ("JOB", "EXECUTION", "JOB STATUS", "STARTED", "OBJECTS", "COPIED", "FAILED", "BYTES")
    rows = [
        (
            j["job_id"],
            j["execution_status"],
            j["job_status"] or "-",
            j["started_at"] or "-",
            *(str(j[k]) if j[k] is not None else "-" for k in ("objects", "copied", "failed")),
            format_size(j["bytes_copied"]) if j["bytes_copied"] is not None else "-",
        )
        for j in jobs
    ]
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        stdout.write("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() + "\n")
    return EXIT_OK


# -- retry -----------------------------------------------------------------------------------


def run_retry(clients: JobClients, args: argparse.Namespace, stdout: IO[str]) -> int:
    outputs = clients.outputs(args.stack)
    outcome = retry_job(clients, outputs, args.job_id)
    if args.json:
        stdout.write(json.dumps(outcome.to_dict()) + "\n")
        return EXIT_OK
    job, reason, flag = args.job_id, outcome.plan.reason, _stack_flag(args)
    if outcome.plan.action == NOTHING:
        stdout.write(f"job {job}: {reason}\n")
        return EXIT_OK
    if outcome.plan.action == REDRIVE:
        stdout.write(
            f"job {job}: {reason}: redriven; only what did not finish runs again\n"
            f"  console: {console_url(outcome.redriven_arn or '')}\n"
            f"  follow it: ferry job status {job}{flag} --watch\n"
        )
        return EXIT_OK
    started = outcome.started
    assert started is not None
    those = "that" if outcome.objects == 1 else "those"
    if outcome.plan.action == FAILED_OBJECTS:
        what = f"over {those} {plural(outcome.objects, 'object')} only\n  manifest: {outcome.manifest}"
    elif outcome.plan.action == FAILED_HISTORIES:
        what = f"over the histories of {those} {plural(outcome.objects, 'key')} only (options.include names them)"
    else:
        what = "over the same source (objects already identical at the destination are skipped)"
    stdout.write(
        f"job {job}: {reason}: started job {started.job_id} {what}\n"
        f"  console: {started.console_url}\n"
        f"  follow it: ferry job status {started.job_id}{flag} --watch\n"
    )
    return EXIT_OK
