"""`ferry job list|status|report --local`: the jobs `ferry run` ran on this machine, read from
its SQLite ledger (the default one, or `--ledger PATH`), as the same commands read a deployed
stack's. An unfinished job (INTERRUPTED, or RUNNING after its run died) says how to resume it.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Mapping
from typing import IO, Any

from ferry.cli.shared.parsing import EXIT_FAILED, EXIT_OK, EXIT_PENDING
from ferry.cli.shared.report import report_text, write_html
from ferry.cli.shared.state_dir import ledger_path
from ferry.counts import plural
from ferry.errors import ConfigError
from ferry.pipeline.ledger.contract import INTERRUPTED, RUNNING
from ferry.pipeline.ledger.sqlite import SQLiteLedger

FAILURES_SHOWN = 20


def wants_local(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "local", False) or getattr(args, "ledger", None))


def open_ledger(args: argparse.Namespace) -> SQLiteLedger:
    path = ledger_path(args)  # the file `ferry run` writes by default, or --ledger
    if not path.is_file():
        raise ConfigError(f"no ledger at {str(path)!r}: no job has run here with it (give --ledger PATH)")
    return SQLiteLedger(path)


def run_local(args: argparse.Namespace, stdout: IO[str]) -> int:
    ledger = open_ledger(args)
    try:
        if args.job_command == "list":
            return _list(ledger, args, stdout)
        job = ledger.job(args.job_id)
        if job is None:
            raise ConfigError(f"no job {args.job_id!r} in the ledger {str(ledger.path)!r}")
        if args.job_command == "status":
            return _status(ledger, job, args, stdout)
        return _report(ledger, job, args, stdout)
    finally:
        ledger.close()


def _counts(ledger: SQLiteLedger, job: Mapping[str, Any]) -> dict[str, Any]:
    """A finished job's totals, else what its batches recorded so far."""
    if "objects" in job:
        return dict(job)
    return {**job, **ledger.tally(job["job_id"]).to_dict()}


def _line(job: Mapping[str, Any]) -> str:
    return (
        f"{job['job_id']}  {job['status']}  started {job.get('started_at', '')}  "
        f"{plural(job.get('objects', 0), 'object')}: {job.get('copied', 0)} copied, {job.get('skipped', 0)} skipped, "
        f"{job.get('failed', 0)} failed, {job.get('pending', 0)} pending"
    )


def _list(ledger: SQLiteLedger, args: argparse.Namespace, stdout: IO[str]) -> int:
    if args.max < 1:
        raise ConfigError("--max must be at least 1")
    jobs = [_counts(ledger, job) for job in ledger.jobs() if not args.status or job["status"] == args.status]
    jobs = jobs[: args.max]
    for job in jobs:
        job.pop("spec", None)
        job.pop("report", None)
    if args.json:
        stdout.write(json.dumps({"ledger": str(ledger.path), "jobs": jobs}) + "\n")
    elif not jobs:
        stdout.write(
            f"no jobs in {ledger.path}" + (f" with status {args.status}" if args.status else "") + "\n"
        )
    else:
        stdout.write("".join(_line(job) + "\n" for job in jobs))
    return EXIT_OK


def _status(ledger: SQLiteLedger, job: Mapping[str, Any], args: argparse.Namespace, stdout: IO[str]) -> int:
    counts = _counts(ledger, job)
    unfinished = job["status"] in (RUNNING, INTERRUPTED)
    if args.json:
        counts.pop("spec", None)
        counts.pop("report", None)
        stdout.write(json.dumps(counts) + "\n")
    else:
        stdout.write(_line(counts) + "\n")
        if unfinished:
            stdout.write(
                f"  unfinished: resume it with the command its run printed, or: ferry run JOB.json "
                f"--ledger {ledger.path} --resume {job['job_id']} (and the same endpoint options)\n"
            )
        elif job.get("report"):
            stdout.write(f"  report: {json.loads(job['report']).get('report')}\n")
    if unfinished:
        return EXIT_PENDING
    return EXIT_FAILED if counts.get("failed") or job["status"] == "FAILED" else EXIT_OK


def _report(ledger: SQLiteLedger, job: Mapping[str, Any], args: argparse.Namespace, stdout: IO[str]) -> int:
    if not job.get("report"):
        raise ConfigError(
            f"job {job['job_id']!r} is {job['status']}: it has no report yet (ferry job status {job['job_id']} --local)"
        )
    summary = json.loads(job["report"])
    failures = (f.to_dict() for f in ledger.failures(job["job_id"]))
    shown = list(failures if args.failures else itertools.islice(failures, FAILURES_SHOWN))
    report = {
        "summary": summary,
        "report": summary.get("report"),
        "failures_report": summary.get("failures_report"),
        "failures": shown,
    }
    if args.html:  # the page Finalize wrote beside summary.json, rendered again from the ledger
        write_html(report, (f.to_dict() for f in ledger.failures(job["job_id"])), args.html)
    if args.json:
        stdout.write(json.dumps(report, ensure_ascii=False) + "\n")
    else:
        stdout.write(report_text(report, job["job_id"], every_failure=args.failures) + "\n")
    if summary.get("failed") or summary.get("status") == "FAILED":
        return EXIT_FAILED
    return EXIT_PENDING if summary.get("pending") else EXIT_OK
