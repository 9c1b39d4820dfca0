"""`ferry job retry JOB`: copy again what a job did not copy, the cheapest way that works.

Three ways, chosen by `plan_retry` from how the execution ended:

- REDRIVE the execution (RedriveExecution) when it stopped mid-way: ABORTED or TIMED_OUT.
  A redrive "continues the failed execution from the unsuccessful step", keeps the steps that
  succeeded, and for a Distributed Map whose Map Run did not finish redrives the Map Run's
  unsuccessful child executions only. It is allowed for Standard executions that FAILED,
  TIMED_OUT or were ABORTED in the last 14 days, and not after the history limit or the
  maximum execution time (DescribeExecution's `redriveStatus` says NOT_REDRIVABLE, with a
  `redriveStatusReason`) (Step Functions API reference: RedriveExecution,
  DescribeExecution.redriveStatus / redriveStatusReason).
  A Ferry execution that FAILED ended at one of its Fail states after Finalize (or Prepare)
  settled the job: every Map error is caught and Finalize runs. Redriving it would only
  re-enter that Fail state, so a FAILED execution is never redriven.
- A NEW JOB OVER THE FAILED OBJECTS when Finalize wrote the report: failures.jsonl becomes a
  JSON Lines manifest (`{"bucket", "key", "version_id"}` per line) in the report bucket, and
  job `<job>-retry-N` copies those objects only, with the same destination, prefixes and
  options (so every key lands where the first job would have put it).
- A NEW JOB OVER THE FAILED KEYS' HISTORIES for an all_versions job: a history is listed from
  the source bucket, never named by a manifest (the validator refuses all_versions with
  source.manifest), so job `<job>-retry-N` is the same all_versions job with options.include
  naming the failed keys exactly (glob characters escaped). When they are too many for a job
  spec, the retry is a new job over the same source (below): versions already at the
  destination are found by its history and not copied again.
- A NEW JOB OVER THE SAME SOURCE when the job ended without a report and cannot be redriven:
  nothing says which objects were done, and objects already identical at the destination are
  skipped (unless the job asked for skip_existing false).

Every retry's spec goes through the one validator (`validate_job_spec`) before it is started,
so a retry Prepare would refuse is refused here, with the reason, and nothing is started.
"""

from __future__ import annotations

import datetime as dt
import glob
import hashlib
import json
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ferry.cli.commands.job_runs import (
    JobClients,
    StartedJob,
    describe_execution,
    job_execution_arn,
    read_failures,
    read_summary,
    start_job,
)
from ferry.cli.shared.stack_outputs import StackOutputs
from ferry.counts import plural
from ferry.errors import ConfigError, error_code
from ferry.jobspec import MAX_SPEC_BYTES, JobSpec, SpecError, parse_job_spec, validate_job_spec
from ferry.pipeline.job_reports import job_prefix
from ferry.pipeline.ledger.dynamodb import DynamoLedger

REDRIVE_DAYS = 14  # RedriveExecution: executions that ended in the last 14 days
REDRIVE = "redrive"
FAILED_OBJECTS = "failed-objects"
FAILED_HISTORIES = "failed-histories"
SAME_SOURCE = "same-source"
NOTHING = "nothing"
_RETRY_SUFFIX = re.compile(r"-retry-\d+$")
_MAX_JOB_ID = 80  # a job id is its execution's name: 1-80 characters (Step Functions quotas)
# Room kept for `-retry-N` up to N = 999, so that every retry of one job shares its base.
_RETRY_ROOM = len("-retry-999")
_HASH_CHARS = 8


@dataclass(frozen=True)
class RetryPlan:
    action: str  # REDRIVE, FAILED_OBJECTS, FAILED_HISTORIES, SAME_SOURCE or NOTHING
    reason: str


def plan_retry(
    described: Mapping[str, Any], summary: Mapping[str, Any] | None, now: dt.datetime
) -> RetryPlan:
    """How to retry a job, from its DescribeExecution answer and Finalize's summary (None
    when there is none). Raises ConfigError when there is nothing a retry could do."""
    status = described["status"]
    if status in ("RUNNING", "PENDING_REDRIVE"):
        raise ConfigError("the job is still running: retry it once it has ended (ferry job status --watch)")
    if status == "FAILED" and described.get("error") == "FerryJobRejected":
        raise ConfigError(
            f"the job was refused before anything was copied: {(described.get('cause') or '')[:500]}; "
            "fix that and start it again (ferry job start)"
        )
    if status in ("ABORTED", "TIMED_OUT"):
        allowed, why = redrivable(described, now)
        if allowed:
            return RetryPlan(REDRIVE, f"the execution was {status.lower().replace('_', ' ')} mid-way")
        return RetryPlan(
            SAME_SOURCE,
            f"the execution was {status.lower().replace('_', ' ')} before its report was written and "
            f"cannot be redriven ({why})",
        )
    if summary is None:
        return RetryPlan(
            SAME_SOURCE,
            f"the execution {status.lower()} ({described.get('error') or 'no error given'}) without a report",
        )
    if int(summary.get("failed") or 0) > 0:
        return RetryPlan(
            FAILED_OBJECTS,
            f"{summary['failed']} of {plural(int(summary.get('objects') or 0), 'object')} failed",
        )
    if summary.get("status") == "SUCCEEDED":
        return RetryPlan(NOTHING, "every object was copied or skipped: nothing to retry")
    if int(summary.get("pending") or 0) > 0 and summary.get("status") != "FAILED":
        return RetryPlan(
            NOTHING,
            f"no object failed; {summary['pending']} are pending (archive restores in progress): "
            "start the job again once they are restored",
        )
    return RetryPlan(SAME_SOURCE, f"the job is {summary.get('status')} with no failed object listed")


def redrivable(described: Mapping[str, Any], now: dt.datetime) -> tuple[bool, str]:
    """RedriveExecution's conditions as DescribeExecution shows them."""
    if described.get("redriveStatus") == "NOT_REDRIVABLE":
        return False, described.get("redriveStatusReason") or "Step Functions says NOT_REDRIVABLE"
    stopped = described.get("stopDate")
    if isinstance(stopped, dt.datetime) and now - stopped > dt.timedelta(days=REDRIVE_DAYS):
        return False, f"it ended more than {REDRIVE_DAYS} days ago"
    return True, ""


@dataclass(frozen=True)
class RetryOutcome:
    job_id: str
    plan: RetryPlan
    started: StartedJob | None = None  # the new job, when one was started
    redriven_arn: str | None = None
    manifest: str | None = None  # s3:// URL of the failed objects' manifest
    objects: int | None = None  # objects in that manifest; keys named by an all_versions retry

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "action": self.plan.action,
            "reason": self.plan.reason,
            "redriven_execution_arn": self.redriven_arn,
            "new_job": self.started.to_dict() if self.started else None,
            "manifest": self.manifest,
            "manifest_objects": self.objects,
        }


def retry_job(
    clients: JobClients, outputs: StackOutputs, job_id: str, *, now: dt.datetime | None = None
) -> RetryOutcome:
    """Plan the retry, then do it; returns what was done."""
    ledger = DynamoLedger(clients.dynamodb, outputs.table)
    arn, _record = job_execution_arn(outputs, ledger, job_id)
    described = describe_execution(clients, outputs, arn, job_id)
    summary = read_summary(clients, outputs, job_id)
    plan = plan_retry(described, summary, now or dt.datetime.now(dt.UTC))
    if plan.action == NOTHING:
        return RetryOutcome(job_id, plan)
    if plan.action == REDRIVE:
        try:
            clients.stepfunctions.redrive_execution(executionArn=arn)
            return RetryOutcome(job_id, plan, redriven_arn=arn)
        except ClientError as error:
            if error_code(error) != "ExecutionNotRedrivable":
                raise
            plan = RetryPlan(SAME_SOURCE, f"Step Functions refused the redrive: {error}")
    spec = _original_spec(described, ledger, job_id)
    new_id = next_retry_id(job_id, lambda candidate: _taken(clients, outputs, ledger, candidate))
    if plan.action == FAILED_OBJECTS and (spec.get("options") or {}).get("all_versions"):
        keys = failed_history_keys(read_failures(clients, outputs, job_id), spec)
        if keys is not None:
            started = start_job(clients, outputs, histories_retry_spec(spec, new_id, keys))
            return RetryOutcome(job_id, RetryPlan(FAILED_HISTORIES, plan.reason), started, objects=len(keys))
        plan = RetryPlan(
            SAME_SOURCE, f"{plan.reason}; their keys are too many to name in a job spec's options.include"
        )
    if plan.action == FAILED_OBJECTS:
        manifest_key = f"{job_prefix(new_id)}input/failed-objects.jsonl"
        count = write_failed_manifest(
            clients.s3, outputs.report_bucket, manifest_key, read_failures(clients, outputs, job_id)
        )
        spec["source"] = {
            **spec["source"],
            "manifest": {"bucket": outputs.report_bucket, "key": manifest_key, "format": "jsonl"},
        }
        spec["job_id"] = new_id
        started = start_job(clients, outputs, validate_job_spec(spec))
        return RetryOutcome(
            job_id, plan, started, manifest=f"s3://{outputs.report_bucket}/{manifest_key}", objects=count
        )
    spec["job_id"] = new_id
    return RetryOutcome(job_id, plan, start_job(clients, outputs, validate_job_spec(spec)))


def failed_history_keys(failures: Iterable[Mapping[str, Any]], spec: Mapping[str, Any]) -> list[str] | None:
    """The keys, relative to source.prefix, whose histories an all_versions job failed to copy
    (failures.jsonl has a line per failed version or key), each once, in the order listed. None
    when they cannot all be named in the retry's spec: more than a spec holds (read no further,
    so memory stays within one spec), or a failure that names no key under source.prefix."""
    prefix = str((spec.get("source") or {}).get("prefix") or "")
    # Measured as the validator measures a spec (jobspec.check_spec_size), with room for the
    # include list itself and for the retry's longer job id.
    bare = {**spec, "options": {**(spec.get("options") or {}), "include": []}}
    used = len(json.dumps(bare, ensure_ascii=False, separators=(",", ":")).encode()) + _RETRY_ROOM
    room = MAX_SPEC_BYTES - used
    keys: dict[str, None] = {}
    for failure in failures:
        key = str(failure.get("key") or "")
        if not key.startswith(prefix) or key == prefix:
            return None
        relative = glob.escape(key[len(prefix) :])
        if relative in keys:
            continue
        room -= len(json.dumps(relative, ensure_ascii=False).encode()) + 1
        if room < 0:
            return None
        keys[relative] = None
    return list(keys)


def histories_retry_spec(spec: Mapping[str, Any], new_id: str, include: list[str]) -> JobSpec:
    """The all_versions job again, as `new_id`, over the keys `include` names (escaped globs,
    so each matches its own key only); the original's excludes still hold (the keys passed
    them), and so does everything else the first job was given."""
    options = {**(spec.get("options") or {}), "include": include}
    return validate_job_spec({**spec, "job_id": new_id, "options": options})


def next_retry_id(job_id: str, taken: Callable[[str], bool]) -> str:
    """`<job>-retry-N`, N the first number not used yet; a retry of a retry counts on
    (`photos-retry-1` -> `photos-retry-2`)."""
    base = retry_base(_RETRY_SUFFIX.sub("", job_id))
    n = 1
    while True:
        candidate = f"{base}-retry-{n}"
        if len(candidate) > _MAX_JOB_ID:
            raise ConfigError(
                f"job id {candidate!r} would be longer than {_MAX_JOB_ID} characters: start the retry "
                "yourself with ferry job start --spec and a shorter --job-id"
            )
        if not taken(candidate):
            return candidate
        n += 1


def retry_base(base: str) -> str:
    """What `-retry-N` is appended to: the job id itself when the suffix fits in 80 characters,
    else its head and a hash of the whole id. A replication's job id is 73 characters (a name
    of up to 40, '-', 32 hex digits), too long for the suffix; the hash keeps two long ids
    that share their head apart, and a retry of a retry keeps the same base (it fits)."""
    if len(base) + _RETRY_ROOM <= _MAX_JOB_ID:
        return base
    digest = hashlib.sha256(base.encode()).hexdigest()[:_HASH_CHARS]
    return f"{base[: _MAX_JOB_ID - _RETRY_ROOM - _HASH_CHARS - 1]}-{digest}"


def write_failed_manifest(s3: Any, bucket: str, key: str, failures: Iterable[Mapping[str, Any]]) -> int:
    """failures.jsonl rows as a JSON Lines manifest the Distributed Map reads (`bucket`, `key`,
    `version_id`); spooled to disk past 8 MiB, so any number of failures fits. Returns the
    number of objects written."""
    count = 0
    with tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024) as spool:
        for failure in failures:
            row = {"bucket": failure.get("bucket"), "key": failure["key"]}
            if failure.get("version_id"):
                row["version_id"] = failure["version_id"]
            spool.write(json.dumps({k: v for k, v in row.items() if v}, ensure_ascii=False).encode() + b"\n")
            count += 1
        if count == 0:
            raise ConfigError("the job's failures.jsonl lists no object: nothing to retry")
        spool.seek(0)
        s3.upload_fileobj(spool, bucket, key, ExtraArgs={"ContentType": "application/x-ndjson"})
    return count


def _original_spec(described: Mapping[str, Any], ledger: DynamoLedger, job_id: str) -> dict[str, Any]:
    """The job's normalised spec: the ledger's (what Prepare accepted), else the execution's
    input (Prepare never ran)."""
    record = ledger.job(job_id)
    if record is not None:
        return dict(record["spec"])
    try:
        return parse_job_spec(json.loads(described.get("input") or "{}"), default_job_id=job_id).to_dict()
    except (ValueError, SpecError) as error:
        raise ConfigError(f"cannot retry {job_id!r}: its input is not a job spec ({error})") from error


def _taken(clients: JobClients, outputs: StackOutputs, ledger: DynamoLedger, job_id: str) -> bool:
    if ledger.job(job_id) is not None:
        return True
    try:
        clients.stepfunctions.describe_execution(executionArn=outputs.execution_arn(job_id))
    except ClientError as error:
        if error_code(error) == "ExecutionDoesNotExist":
            return False
        raise
    return True
