"""`ferry run JOB.json`: a pipeline job run on this machine, with the pipeline's own code
(ferry.pipeline.local_run), against any S3 endpoint; the ledger in a SQLite file (default) or
the stack's DynamoDB table (`--table`). The same summary, report format and exit codes as
`ferry copy`.

For another report (an HTML page): `run_report(services, job_id, summary, seconds)` returns
the dict `--report` and `--json` write (`{"summary": {...}, "objects": [...]}`, the summary as
`ferry copy --json`'s plus the job's id, status, and where its files are).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ferry.cli.shared.arguments import add_run_parser
from ferry.cli.shared.clients import ClientMaker
from ferry.cli.shared.parsing import EXIT_FAILED, EXIT_OK, EXIT_PENDING, Parser, job_id_of, read_json_file
from ferry.cli.shared.progress import Progress
from ferry.cli.shared.ranges import check_kms_region, memory_limit
from ferry.cli.shared.report import Summary, failure_line
from ferry.cli.shared.sides import endpoints
from ferry.cli.shared.signals import StopOnSignals
from ferry.cli.shared.state_dir import default_state_dir, ledger_path
from ferry.counts import plural
from ferry.errors import ConfigError, error_code
from ferry.limits import parse_size
from ferry.models import CopyResult, Status, check_endpoint_url
from ferry.pipeline.ledger.contract import INTERRUPTED, JobExists, Ledger
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from ferry.pipeline.ledger.sqlite import SQLiteLedger
from ferry.pipeline.local_reports import LocalReports
from ferry.pipeline.local_run import LAMBDA_SECONDS, job_rows, local_settings, run_job
from ferry.pipeline.services import Services
from ferry.pipeline.settings import WorkerSettings
from ferry.s3.clients import make_client

SHOWN_FAILURES = 20
# A pass hands over as a CopyBatch Lambda does, before its timeout (the parser shows 810 s).
DEFAULT_PASS_SECONDS = LAMBDA_SECONDS - 90


def parse_run_args(argv: list[str]) -> argparse.Namespace:
    """`ferry run ARGS` parsed on its own, for callers without the root parser (the demo)."""
    parser = Parser(prog="ferry")
    add_run_parser(parser.add_subparsers(dest="command", required=True, parser_class=Parser))
    return parser.parse_args(["run", *argv])


def run_run(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """`ferry run`: Prepare, the Map, the batches, Finalize; then the summary and exit code."""
    spec = read_json_file(args.spec)
    job_id = job_id_of(args.resume or args.job_id, spec, args.spec)  # a resume names its job
    job_id = job_id if isinstance(job_id, str) else None  # else the spec's own, named by Prepare
    if args.job_id and isinstance(spec, dict):
        spec = {**spec, "job_id": args.job_id}  # the option names the job, over the spec's own
    seconds = pass_seconds(args)
    options = spec.get("options") if isinstance(spec, Mapping) else None
    # A spec of the wrong shape is named by Prepare's validator (run_job), field by field.
    kms_key = options.get("kms_key_id") if isinstance(options, Mapping) else None
    settings = worker_settings(args, kms_key_ids=(kms_key,) if isinstance(kms_key, str) and kms_key else ())
    source, destination = endpoints(args)
    check_kms_region(kms_key if isinstance(kms_key, str) else None, destination.region, "options.kms_key_id")
    ledger, state_dir = _ledger(args)
    replication = spec.get("replication") if isinstance(spec, Mapping) else None
    if isinstance(replication, Mapping) and replication.get("deletes") is True and not args.table:
        raise ConfigError(
            "replication.deletes: the copy records deletes rely on live in the DynamoDB ledger: "
            "run with --table NAME, or without replication.deletes"
        )
    reports = LocalReports(args.report_dir or state_dir)
    show = not args.quiet and stderr.isatty()
    summary = Summary()
    with Progress(stderr, enabled=show) as progress:
        clients = ClientMaker(make_client).sides(source, destination, share=False)
        services = Services(
            s3=clients.source,
            dynamodb=ledger.client if isinstance(ledger, DynamoLedger) else None,
            settings=settings,
            source=source,
            destination=destination,
            ledger_store=ledger,
            report_store=reports,
            destination_s3=clients.dest,
            on_result=progress.add,
            on_part=progress.part_done if progress.enabled else None,
            reads_any_region=True,
        )
        with StopOnSignals(stderr) as signals:
            try:
                final = run_job(
                    spec,
                    services,
                    job_id=job_id,
                    pass_seconds=seconds,
                    on_listed=lambda listing: progress.listed(listing.objects, complete=listing.complete),
                    journal_root=reports.root,
                    resume=bool(args.resume),
                )
            except JobExists as error:
                raise ConfigError(
                    f"{error}; to run the spec again, give it a new id with --job-id NEW_ID"
                ) from error
    if final["status"] == INTERRUPTED:
        if isinstance(ledger, SQLiteLedger):
            ledger.close()
        return _interrupted(final, signals.received or signal.SIGINT, stderr)
    dry_run = bool(final.get("dry_run"))
    summary.dry_run = dry_run  # its JSON counts what it would copy apart from pending
    data = run_report(services, final["job_id"], final, summary)
    if args.report:
        _write_report(args.report, data)
    if args.json:
        stdout.write(json.dumps(data["summary"]) + "\n")
    _print(summary, final, services, stdout if not args.json else stderr)
    if isinstance(ledger, SQLiteLedger):
        ledger.close()
    # The Map's items against what the ledger settled: objects, or an all_versions job's keys.
    if final.get("map_error") or final.get("keys", final["objects"]) != final["objects_read_by_map"]:
        stderr.write(f"ferry: error: {final['cause']}\n")
        return EXIT_FAILED
    if final["failed"]:
        return EXIT_FAILED
    if final["pending"] and not dry_run:  # a dry run's pending are what it would have copied
        return EXIT_PENDING
    return EXIT_OK


def _interrupted(final: Mapping[str, Any], signum: int, stderr: IO[str]) -> int:
    """An interrupted run's last words: what is recorded, and the command that finishes it."""
    done = final.get("copied", 0) + final.get("skipped", 0) + final.get("failed", 0)
    stderr.write(
        f"job {final['job_id']}: INTERRUPTED; {done} of the {plural(final['read'], 'object')} handed out are recorded. "
        f"Resume with:\n  {resume_command(sys.argv[1:], final['job_id'])}\n"
    )
    return 128 + signum


def resume_command(argv: list[str], job_id: str) -> str:
    """This run's command line with `--resume JOB_ID` (and without a --job-id or --resume it had)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--resume", "--job-id"):
            skip = True
            continue
        if arg.startswith(("--resume=", "--job-id=")):
            continue
        kept.append(arg)
    return shlex.join(["ferry", *kept, "--resume", job_id])


def worker_settings(args: argparse.Namespace, kms_key_ids: tuple[str, ...] = ()) -> WorkerSettings:
    """The pipeline's settings for this run: its defaults, with the options given here."""
    return local_settings(
        max_items_per_batch=args.max_items_per_batch,
        max_input_bytes_per_batch=_size(args.max_input_bytes_per_batch),
        concurrency=args.batch_concurrency,
        large_object_threshold=_size(args.large_object_threshold),
        max_passes=args.max_passes,
        memory_limit=memory_limit(args.memory_limit),
        kms_key_ids=kms_key_ids,
        table_name=args.table or "",
    )


def pass_seconds(args: argparse.Namespace) -> float:
    """How long a CopyBatch pass runs before it hands over (as on Lambda, by default)."""
    seconds = DEFAULT_PASS_SECONDS if args.pass_seconds is None else args.pass_seconds
    if seconds <= 0:
        raise ConfigError("--pass-seconds must be more than 0")
    return float(seconds)


def run_report(
    services: Services, job_id: str, final: Mapping[str, Any], summary: Summary | None = None
) -> dict[str, Any]:
    """A finished job's report data: `summary` (ferry copy's summary fields, counted from the
    recorded object results, plus the job's id, status, ledger totals and report files) and
    `objects` (every object's result, as a line of `--report`: an iterator that reads the
    batch reports again, so no list of a job's objects is ever held). `summary`, if given, is
    the running Summary whose clock started with the job; it is filled here."""
    summary = summary or Summary()
    for row in job_rows(services, job_id):
        summary.add(_result_of(row))
    summary.finish()
    data = summary.to_dict()
    for name in (
        "job_id",
        "status",
        "batches",
        "objects_read_by_map",
        "all_versions",
        "keys",
        "report",
        "failures_report",
        "report_html",
        "cause",
    ):
        if name in final:
            data[name] = final[name]
    return {"summary": data, "objects": job_rows(services, job_id)}


def _result_of(row: Mapping[str, Any]) -> CopyResult:
    """A report line back to the result it was written from (CopyResult.to_dict's inverse)."""
    names = {f.name for f in dataclasses.fields(CopyResult)}
    values = {k: v for k, v in row.items() if k in names}
    values["source_key"] = row["key"]
    values["status"] = Status(row["status"])
    values.setdefault("dest_key", "")
    return CopyResult(**values)


def _print(summary: Summary, final: Mapping[str, Any], services: Services, out: IO[str]) -> None:
    out.write((summary.dry_run_line() if final.get("dry_run") else summary.line()) + "\n")
    if summary.details():
        out.write(summary.details() + "\n")
    shown = 0
    for failure in services.ledger.failures(final["job_id"]):
        if shown == SHOWN_FAILURES:
            break
        out.write(failure_line(failure.bucket, failure.key, failure.reason) + "\n")
        shown += 1
    if final["failed"] > shown:
        more = plural(final["failed"] - shown, "more failure")
        out.write(f"  ... and {more} (see {final['failures_report']})\n")
    page = f"; page: {final['report_html']}" if final.get("report_html") else ""
    out.write(f"job {final['job_id']}: {final['status']}; report: {final['report']}{page}\n")


def _write_report(path: str, data: Mapping[str, Any]) -> None:
    try:
        with open(path, "w", encoding="utf-8") as file:
            for row in data["objects"]:
                file.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            file.write(json.dumps({"summary": data["summary"]}) + "\n")
    except OSError as error:
        raise ConfigError(f"cannot write the report {path!r}: {error.strerror}") from error


def _size(text: str | None) -> int | None:
    return parse_size(text) if text else None


def _ledger(args: argparse.Namespace) -> tuple[Ledger, Path]:
    """The ledger the user chose, and the folder the job reports go to by default."""
    if not args.table:
        path = ledger_path(args)
        return SQLiteLedger(path), path.parent
    region = args.table_region or args.region or args.source_region
    if args.table_endpoint_url:
        check_endpoint_url(args.table_endpoint_url)
    client = boto3.client(
        "dynamodb",
        region_name=region,
        endpoint_url=args.table_endpoint_url,
        config=Config(retries={"max_attempts": 10, "mode": "adaptive"}),
    )
    try:
        client.describe_table(TableName=args.table)
    except ClientError as error:
        if error_code(error) == "ResourceNotFoundException":
            raise ConfigError(
                f"--table: no DynamoDB table {args.table!r} in {client.meta.region_name}: give the stack's "
                "TableName output (and --table-region if it lives elsewhere)"
            ) from error
        raise ConfigError(f"--table {args.table}: {error}") from error
    except BotoCoreError as error:
        raise ConfigError(f"--table {args.table}: {error}") from error
    return DynamoLedger(client, args.table), default_state_dir()
