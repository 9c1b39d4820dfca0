"""Pipeline jobs on a deployed stack, as data: start one, ask how far it is, read its report,
list the recent ones. `ferry job ...` (jobs_command.py) prints what these return.

A job is one execution of the stack's parent state machine, named by its job id. Its
progress is in three places, each read with the call that owns it:
- the execution (DescribeExecution): RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED;
- the Distributed Map's Map Run (ListMapRuns, DescribeMapRun): `itemCounts.total` is how many
  items (objects) the Map has read so far (API reference, MapRunItemCounts);
- the ledger (DynamoLedger.tally): what the workers recorded, objects and bytes.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.exceptions import ClientError

from ferry.cli.shared.stack_outputs import StackOutputs, find_stack_outputs
from ferry.errors import ConfigError, error_code
from ferry.jobspec import JobSpec, check_spec_not_overlapping
from ferry.pipeline.job_reports import job_prefix
from ferry.pipeline.ledger.dynamodb import DynamoLedger

# Console hosts per partition; the path is the Step Functions console's execution page.
# (Not verifiable offline: the console's URL scheme is not part of any API reference.)
_CONSOLE_HOSTS = {
    "aws": "{region}.console.aws.amazon.com",
    "aws-cn": "console.amazonaws.cn",
    "aws-us-gov": "console.amazonaws-us-gov.com",
}


@dataclass
class JobClients:
    """The AWS clients the job commands use, all in one session (profile and region)."""

    cloudformation: Any
    stepfunctions: Any
    dynamodb: Any
    s3: Any

    @classmethod
    def create(cls, region: str | None = None, profile: str | None = None) -> JobClients:
        session = boto3.Session(profile_name=profile, region_name=region)
        if not session.region_name:
            raise ConfigError("no AWS region: give --region (the stack's region) or set AWS_REGION")
        return cls(
            cloudformation=session.client("cloudformation"),
            stepfunctions=session.client("stepfunctions"),
            dynamodb=session.client("dynamodb"),
            s3=session.client("s3"),
        )

    def outputs(self, stack: str) -> StackOutputs:
        return find_stack_outputs(self.cloudformation, stack)


def console_url(execution_arn: str) -> str:
    """The execution's page in the Step Functions console, in the execution's own region."""
    parts = execution_arn.split(":")
    partition, region = parts[1], parts[3]
    host = _CONSOLE_HOSTS.get(partition, _CONSOLE_HOSTS["aws"]).format(region=region)
    return f"https://{host}/states/home?region={region}#/v2/executions/details/{execution_arn}"


# -- start -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartedJob:
    job_id: str
    execution_arn: str

    @property
    def console_url(self) -> str:
        return console_url(self.execution_arn)

    def to_dict(self) -> dict[str, str]:
        return {"job_id": self.job_id, "execution_arn": self.execution_arn, "console_url": self.console_url}


def start_job(clients: JobClients, outputs: StackOutputs, spec: JobSpec) -> StartedJob:
    """Start the parent state machine on a validated spec; the execution is named by the job
    id, so a job id is used once (Step Functions refuses a second execution of one name with
    other input, ExecutionAlreadyExists; the ledger refuses a second job with that id)."""
    check_spec_not_overlapping(spec)  # Prepare's own rule, before anything starts
    try:
        response = clients.stepfunctions.start_execution(
            stateMachineArn=outputs.state_machine_arn, name=spec.job_id, input=json.dumps(spec.to_dict())
        )
    except ClientError as error:
        if error_code(error) == "ExecutionAlreadyExists":
            raise ConfigError(
                f"a job {spec.job_id!r} already exists in stack {outputs.stack!r}: give another --job-id "
                f"(ferry job status {spec.job_id} shows the existing one)"
            ) from error
        raise
    return StartedJob(spec.job_id, response["executionArn"])


# -- status ----------------------------------------------------------------------------------


@dataclass
class JobStatus:
    """Where a job is: the execution, the Map Run's item counts, and the ledger's counts."""

    job_id: str
    execution_arn: str
    execution_status: str
    job_status: str | None  # the ledger's: RUNNING, then SUCCEEDED, PARTIAL or FAILED
    started: dt.datetime | None
    stopped: dt.datetime | None
    counts: dict[str, int]  # objects, copied, skipped, failed, pending, bytes_copied
    batches: int
    listed: int | None  # items the Map Run has read (None before the Map starts)
    # The Map items settled, where an item is not one object (an all_versions job's keys,
    # each standing for its versions); None when each item is one object.
    items: int | None = None
    map_run: dict[str, Any] | None = None
    error: str | None = None
    cause: str | None = None
    now: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    @property
    def running(self) -> bool:
        return self.execution_status in ("RUNNING", "PENDING_REDRIVE")

    @property
    def done(self) -> int:
        return self.counts["objects"]

    @property
    def by_keys(self) -> bool:
        """The Map's items are keys, not objects: progress is weighed in keys."""
        return self.items is not None and self.items != self.done

    @property
    def items_done(self) -> int:
        """The Map items settled: what `listed` counts."""
        return self.items if self.items is not None else self.done

    @property
    def seconds(self) -> float:
        if self.started is None:
            return 0.0
        end = self.stopped or self.now
        return max(0.0, (end - self.started).total_seconds())

    @property
    def objects_per_second(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def bytes_per_second(self) -> float:
        return self.counts["bytes_copied"] / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """Time left at the average rate so far, for the objects listed so far; None when
        the job has ended or nothing is known yet."""
        items_per_second = self.items_done / self.seconds if self.seconds > 0 else 0.0
        if not self.running or not self.listed or items_per_second <= 0:
            return None
        return max(0, self.listed - self.items_done) / items_per_second

    def to_dict(self) -> dict[str, Any]:
        eta = self.eta_seconds
        return {
            "job_id": self.job_id,
            "execution_arn": self.execution_arn,
            "execution_status": self.execution_status,
            "job_status": self.job_status,
            "started_at": _iso(self.started),
            "stopped_at": _iso(self.stopped),
            "listed": self.listed,
            "done": self.done,
            "items": self.items_done,
            **self.counts,
            "batches": self.batches,
            "seconds": round(self.seconds, 1),
            "objects_per_second": round(self.objects_per_second, 2),
            "bytes_per_second": round(self.bytes_per_second),
            "eta_seconds": None if eta is None else round(eta),
            "map_run": self.map_run,
            "error": self.error,
            "cause": self.cause,
            "console_url": console_url(self.execution_arn),
        }


def job_execution_arn(outputs: StackOutputs, ledger: DynamoLedger, job_id: str) -> tuple[str, dict | None]:
    """The job's execution (recorded by Prepare; else the one named by the job id) and its
    ledger record, if Prepare has written one."""
    record = ledger.job(job_id)
    arn = (record or {}).get("execution_arn") or outputs.execution_arn(job_id)
    return arn, record


def describe_execution(clients: JobClients, outputs: StackOutputs, arn: str, job_id: str) -> dict[str, Any]:
    try:
        return clients.stepfunctions.describe_execution(executionArn=arn)
    except ClientError as error:
        if error_code(error) == "ExecutionDoesNotExist":
            raise ConfigError(
                f"no job {job_id!r} in stack {outputs.stack!r}: ferry job list --stack {outputs.stack} "
                "shows the recent ones"
            ) from error
        raise


def job_status(clients: JobClients, outputs: StackOutputs, job_id: str) -> JobStatus:
    ledger = DynamoLedger(clients.dynamodb, outputs.table)
    arn, record = job_execution_arn(outputs, ledger, job_id)
    described = describe_execution(clients, outputs, arn, job_id)
    tally = ledger.tally(job_id)
    map_run = latest_map_run(clients.stepfunctions, arn)
    listed = None
    if map_run is not None:
        total = (map_run.get("itemCounts") or {}).get("total")
        listed = int(total) if total is not None else None
    return JobStatus(
        job_id=job_id,
        execution_arn=arn,
        execution_status=described["status"],
        job_status=(record or {}).get("status"),
        started=described.get("startDate"),
        stopped=described.get("stopDate"),
        counts=tally.counts.to_dict(),
        batches=tally.batches,
        listed=listed,
        items=tally.items,
        map_run=map_run,
        error=described.get("error"),
        cause=described.get("cause"),
    )


def latest_map_run(stepfunctions: Any, execution_arn: str) -> dict[str, Any] | None:
    """The execution's latest Map Run as DescribeMapRun tells it (status, itemCounts), or None
    before the Distributed Map has started."""
    runs = stepfunctions.list_map_runs(executionArn=execution_arn).get("mapRuns") or []
    if not runs:
        return None
    latest = max(runs, key=lambda r: r.get("startDate") or dt.datetime.min.replace(tzinfo=dt.UTC))
    described = stepfunctions.describe_map_run(mapRunArn=latest["mapRunArn"])
    return {
        "map_run_arn": latest["mapRunArn"],
        "status": described.get("status"),
        "itemCounts": described.get("itemCounts") or {},
    }


# -- report ----------------------------------------------------------------------------------


def summary_key(job_id: str) -> str:
    return f"{job_prefix(job_id)}summary.json"


def failures_key(job_id: str) -> str:
    return f"{job_prefix(job_id)}failures.jsonl"


def read_summary(clients: JobClients, outputs: StackOutputs, job_id: str) -> dict[str, Any] | None:
    """The summary.json Finalize wrote, or None when there is none (yet)."""
    try:
        body = clients.s3.get_object(Bucket=outputs.report_bucket, Key=summary_key(job_id))["Body"]
    except ClientError as error:
        if error_code(error) in ("NoSuchKey", "404"):
            return None
        raise
    summary: dict[str, Any] = json.loads(body.read())
    return summary


def read_failures(clients: JobClients, outputs: StackOutputs, job_id: str) -> Iterator[dict[str, Any]]:
    """failures.jsonl, a line at a time (a million failures are never all in memory)."""
    try:
        body = clients.s3.get_object(Bucket=outputs.report_bucket, Key=failures_key(job_id))["Body"]
    except ClientError as error:
        if error_code(error) in ("NoSuchKey", "404"):
            return
        raise
    for line in body.iter_lines():
        if line.strip():
            yield json.loads(line)


def job_report(
    clients: JobClients, outputs: StackOutputs, job_id: str, *, failures: bool = False
) -> dict[str, Any]:
    """The job's report as one dict: Finalize's summary, where it is, and (if asked) every
    failure. What `ferry job report` prints, and what an HTML rendering would take."""
    summary = read_summary(clients, outputs, job_id)
    if summary is None:
        status = job_status(clients, outputs, job_id)  # says "no job X" when there is none
        if status.running:
            raise ConfigError(
                f"job {job_id!r} is still running: its report is written when it ends "
                f"(ferry job status {job_id} --watch)"
            )
        raise ConfigError(
            f"job {job_id!r} ended {status.execution_status} without a report ({status.error or 'no error'}"
            f"{': ' + status.cause[:300] if status.cause else ''}); see {console_url(status.execution_arn)}"
        )
    report: dict[str, Any] = {
        "summary": summary,
        "report": f"s3://{outputs.report_bucket}/{summary_key(job_id)}",
        "failures_report": f"s3://{outputs.report_bucket}/{failures_key(job_id)}",
    }
    if failures:
        report["failures"] = list(read_failures(clients, outputs, job_id))
    return report


# -- list ------------------------------------------------------------------------------------


def list_jobs(
    clients: JobClients, outputs: StackOutputs, *, status: str | None = None, limit: int = 20
) -> list[dict[str, Any]]:
    """The most recent executions (newest first), with the ledger's status and counts where
    Prepare recorded the job: Finalize's totals once it ended, the running tally before."""
    ledger = DynamoLedger(clients.dynamodb, outputs.table)
    paginator = clients.stepfunctions.get_paginator("list_executions")
    kwargs: dict[str, Any] = {"stateMachineArn": outputs.state_machine_arn}
    if status:
        kwargs["statusFilter"] = status
    jobs: list[dict[str, Any]] = []
    for page in paginator.paginate(**kwargs, PaginationConfig={"MaxItems": limit}):
        for execution in page.get("executions", []):
            jobs.append(_listed_job(ledger, execution))
    return jobs[:limit]


def _listed_job(ledger: DynamoLedger, execution: Mapping[str, Any]) -> dict[str, Any]:
    job_id = execution["name"]
    record = ledger.job(job_id)
    entry: dict[str, Any] = {
        "job_id": job_id,
        "execution_status": execution["status"],
        "job_status": (record or {}).get("status"),
        "started_at": _iso(execution.get("startDate")),
        "stopped_at": _iso(execution.get("stopDate")),
        "objects": None,
        "copied": None,
        "failed": None,
        "bytes_copied": None,
    }
    if record is not None:
        counts = record if "objects" in record else ledger.tally(job_id).counts.to_dict()
        entry.update({k: counts.get(k) for k in ("objects", "copied", "failed", "bytes_copied")})
    return entry


def _iso(moment: Any) -> str | None:
    if isinstance(moment, dt.datetime):
        return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return None
