"""Recurring syncs: the `schedules` configuration, and what one schedule fire does.

Each configured schedule becomes an EventBridge Scheduler schedule (cdk/ferry_cdk/schedules.py)
that invokes the scheduled-start Lambda (handlers/start_scheduled.py) with
`{"schedule": name, "scheduled_time": "<aws.scheduler.scheduled-time>", "spec": {...}}`;
Scheduler replaces the placeholder with the fire's time, e.g. `2022-03-22T18:59:43Z`
(EventBridge Scheduler User Guide, managing-schedule-context-attributes.html).

One fire starts one job, in skip-existing mode (a nightly sync copies only what changed), named
`<schedule>_<scheduled time>`: the name is also the job id, unique per fire. A fire skips its
start while an execution of the same schedule is still RUNNING.

How "still running" is found: ListExecutions(statusFilter=RUNNING) on the parent state machine,
newest first, looking for names starting with `<schedule>_` (schedule names cannot hold `_`, so
one schedule's prefix never matches another's). Chosen over a ledger lock item because the
state machine is the only authority on whether a run is going: a lock would need releasing on
every way an execution ends (failed, timed out, aborted by hand, Finalize never reached), and a
lock left behind would stop the schedule for good. ListExecutions is eventually consistent
("results are best effort and may not reflect very recent updates", ListExecutions API
reference); two fires of a schedule are at least a minute apart (Scheduler's finest rate),
which leaves a window only for a late retried fire that lands within moments of the next one:
both could then start. The starter is not limited to one instance (reserved concurrency 1) to
close it: reserving concurrency fails the deployment in accounts whose Lambda concurrency quota
is 100 or less (Lambda keeps 100 unreserved; "Configuring reserved concurrency", Lambda guide),
as new accounts' often is.

Retries: StartExecution with the same name and the same input while that execution is open
succeeds and returns it again; once it is closed it answers ExecutionAlreadyExists (StartExecution
API reference, `name`). The input is a pure function of the schedule and its scheduled time, so a
retried invocation (Scheduler's retry policy, or Lambda's own retries should Scheduler invoke
asynchronously, which its documentation does not say) never starts a second run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from botocore.exceptions import ClientError

from ferry.errors import ConfigError
from ferry.jobspec import validate_job_spec

SCHEDULE_NAME = re.compile(r"[A-Za-z0-9-]{1,40}")
NAME_SEPARATOR = "_"  # not allowed in a schedule name: `<name>_` is one schedule's prefix only
_RATE = re.compile(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)")
_CRON = re.compile(r"cron\(([^()]+)\)")
SKIPPED_METRIC = "ScheduledStartSkipped"


class _Place(Protocol):
    bucket: str
    prefix: str

    def covers(self, bucket: str, key_or_prefix: str) -> bool: ...


@dataclass(frozen=True)
class Schedule:
    """One recurring sync: when (a Scheduler expression and its time zone) and what (a job spec,
    stored normalised, in skip-existing mode, without a job id: each run is named per fire)."""

    name: str
    expression: str
    spec: Mapping[str, Any]
    timezone: str | None = None

    def target_input(self, scheduled_time: str) -> dict[str, Any]:
        """The event Scheduler sends for one fire (`scheduled_time` is the placeholder in CDK)."""
        return {"schedule": self.name, "scheduled_time": scheduled_time, "spec": dict(self.spec)}


def parse_schedules(
    data: Any, sources: Sequence[_Place], destinations: Sequence[_Place]
) -> tuple[Schedule, ...]:
    """Validate the `schedules` setting at synth time: a wrong one fails `cdk synth` naming it."""
    if not isinstance(data, list):
        raise ConfigError("schedules: must be a list of {name, schedule, timezone, spec} objects")
    schedules = tuple(
        parse_schedule(item, f"schedules[{i}]", sources, destinations) for i, item in enumerate(data)
    )
    names = [s.name for s in schedules]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"schedules: the name {duplicates[0]!r} is used twice; names must be unique")
    return schedules


def parse_schedule(
    data: Any, where: str, sources: Sequence[_Place], destinations: Sequence[_Place]
) -> Schedule:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: give an object with name, schedule, spec (and optional timezone)")
    unknown = sorted(set(data) - {"name", "schedule", "timezone", "spec"})
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown field; use name, schedule, timezone and spec")
    name = data.get("name")
    if not isinstance(name, str) or not SCHEDULE_NAME.fullmatch(name):
        raise ConfigError(f"{where}.name: {name!r} must be 1-40 letters, digits or '-'")
    where = f"schedules[{name}]"
    expression = check_expression(data.get("schedule"), f"{where}.schedule")
    timezone = data.get("timezone")
    if timezone is not None:
        timezone = check_timezone(timezone, f"{where}.timezone")
    spec = scheduled_spec(data.get("spec"), where, sources, destinations)
    return Schedule(name, expression, spec, timezone)


def check_expression(value: Any, where: str) -> str:
    """A recurring Scheduler expression: `rate(N unit)` or a six-field `cron(...)`
    (Scheduler User Guide, schedule-types.html); `at(...)` is one-time, not a sync."""
    if not isinstance(value, str):
        raise ConfigError(f"{where}: give 'cron(0 2 * * ? *)' or 'rate(6 hours)'")
    value = value.strip()
    rate = _RATE.fullmatch(value)
    if rate:
        number, unit = int(rate.group(1)), rate.group(2)
        if number < 1:
            raise ConfigError(f"{where}: {value!r}: the rate must be 1 or more")
        if (number == 1) != (not unit.endswith("s")):
            fixed = f"rate({number} {unit.rstrip('s') if number == 1 else unit + 's'})"
            raise ConfigError(f"{where}: {value!r}: write {fixed!r} (singular unit for 1, plural otherwise)")
        return value
    cron = _CRON.fullmatch(value)
    if cron:
        fields = cron.group(1).split()
        if len(fields) != 6:
            raise ConfigError(
                f"{where}: {value!r} has {len(fields)} fields; a Scheduler cron has six: minutes hours "
                "day-of-month month day-of-week year, e.g. 'cron(0 2 * * ? *)'"
            )
        if "?" not in (fields[2], fields[4]):
            raise ConfigError(
                f"{where}: {value!r}: day-of-month or day-of-week must be '?', e.g. 'cron(0 2 * * ? *)'"
            )
        return value
    if value.startswith("at("):
        raise ConfigError(f"{where}: {value!r} runs once; a recurring sync needs cron(...) or rate(...)")
    raise ConfigError(f"{where}: {value!r} is not 'cron(...)' or 'rate(N minutes|hours|days)'")


def check_timezone(value: Any, where: str) -> str:
    import zoneinfo  # here: only the CDK app checks a time zone; Prepare imports this module too

    try:
        zoneinfo.ZoneInfo(value)
    except (TypeError, ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise ConfigError(f"{where}: {value!r} is not an IANA time zone such as 'Europe/Berlin'") from None
    return value


def scheduled_spec(
    data: Any, where: str, sources: Sequence[_Place], destinations: Sequence[_Place]
) -> dict[str, Any]:
    """The job spec a schedule starts, validated with the very code Prepare runs, forced into
    skip-existing mode, and checked to lie inside the configured locations (else every run would
    only be rejected by Prepare, at night)."""
    if isinstance(data, Mapping) and "job_id" in data:
        raise ConfigError(
            f"{where}.spec.job_id: remove it; each run is named '<schedule>_<scheduled time>' (a job id is used once)"
        )
    options = data.get("options", {}) if isinstance(data, Mapping) else {}
    if isinstance(options, Mapping) and options.get("skip_existing") is False:
        raise ConfigError(
            f"{where}.spec.options.skip_existing: a recurring sync copies only what changed; remove "
            "'skip_existing: false'"
        )
    try:
        spec = validate_job_spec(data, default_job_id="scheduled")
    except ConfigError as error:
        raise ConfigError(f"{where}.spec.{error}") from None
    listed = spec.source_bucket and not spec.manifest
    if listed and not any(s.covers(spec.source_bucket, spec.source_prefix) for s in sources):
        raise ConfigError(
            f"{where}.spec.source: s3://{spec.source_bucket}/{spec.source_prefix} is not inside any "
            "configured 'sources' location: add it there, or fix the spec"
        )
    if not any(d.covers(spec.destination_bucket, spec.destination_prefix) for d in destinations):
        raise ConfigError(
            f"{where}.spec.destination: s3://{spec.destination_bucket}/{spec.destination_prefix} is not "
            "inside any configured 'destinations' location: add it there, or fix the spec"
        )
    return forced_skip_existing(spec.to_dict())


def forced_skip_existing(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec without a job id and with `options.skip_existing` true."""
    result = {k: v for k, v in spec.items() if k != "job_id"}
    result["options"] = {**dict(spec.get("options") or {}), "skip_existing": True}
    return result


# -- one fire ------------------------------------------------------------------------------


def execution_name(schedule: str, scheduled_time: str) -> str:
    """`nightly_20261122T020000Z`: unique per fire, the same for every retry of it, and a valid
    execution name and job id (no ':'; at most 40 + 1 + 16 characters)."""
    moment = parse_scheduled_time(scheduled_time)
    return f"{schedule}{NAME_SEPARATOR}{moment.strftime('%Y%m%dT%H%M%SZ')}"


_FIRE_NAME = re.compile(rf"{SCHEDULE_NAME.pattern}{NAME_SEPARATOR}\d{{8}}T\d{{6}}Z")


def is_scheduled_fire(event: Mapping[str, Any]) -> bool:
    """Whether Prepare's event is a schedule's fire: an execution of the state machine (it has
    an execution ARN; `ferry run` has none) named as `execution_name` names a fire, whose spec
    carries no job id (a schedule's never does, the fire names the run; `ferry job start`
    always sends one). Such a run may find nothing under its prefix tonight, legitimately."""
    spec = event.get("spec")
    name = event.get("execution_name")
    return (
        bool(event.get("execution_arn"))
        and isinstance(spec, Mapping)
        and "job_id" not in spec
        and isinstance(name, str)
        and _FIRE_NAME.fullmatch(name) is not None
    )


def parse_scheduled_time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ConfigError(
            f"scheduled_time: {value!r} is not a time; the schedule's input must pass <aws.scheduler.scheduled-time>"
        )
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"scheduled_time: {value!r} is not an ISO 8601 time such as 2022-03-22T18:59:43Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


@dataclass(frozen=True)
class FireOutcome:
    """What a fire did: `started` (a new run), `already_started` (a retry of this fire), or
    `skipped` (the previous run of the schedule is still going: `running` names it)."""

    action: str
    schedule: str
    execution_name: str
    execution_arn: str | None = None
    running: str | None = None

    def log_line(self) -> str:
        if self.action == "skipped":
            return (
                f"schedule {self.schedule}: start of {self.execution_name} skipped, the previous run "
                f"{self.running} is still running"
            )
        if self.action == "already_started":
            return f"schedule {self.schedule}: {self.execution_name} was already started by an earlier attempt of this fire"
        return f"schedule {self.schedule}: started {self.execution_name}"


def fire(event: Mapping[str, Any], stepfunctions: Any, state_machine_arn: str) -> FireOutcome:
    """Start this fire's run unless the schedule's previous run is still RUNNING."""
    schedule = event.get("schedule")
    if not isinstance(schedule, str) or not SCHEDULE_NAME.fullmatch(schedule):
        raise ConfigError(f"schedule: {schedule!r} is not a schedule name; the input is set by the CDK app")
    name = execution_name(schedule, event.get("scheduled_time"))
    spec = event.get("spec")
    if not isinstance(spec, Mapping):
        raise ConfigError(f"spec: schedule {schedule} carries no job spec; deploy it with the CDK app")
    running = running_executions(stepfunctions, state_machine_arn, schedule)
    if name in running:
        return FireOutcome("already_started", schedule, name, running[name])
    if running:
        newest = next(iter(running))
        return FireOutcome("skipped", schedule, name, running=newest)
    body = json.dumps(forced_skip_existing(spec), sort_keys=True, separators=(",", ":"))
    try:
        arn = stepfunctions.start_execution(stateMachineArn=state_machine_arn, name=name, input=body)[
            "executionArn"
        ]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
            raise
        # This fire's run exists and has ended (or is open with another input): never twice.
        return FireOutcome("already_started", schedule, name)
    return FireOutcome("started", schedule, name, arn)


def running_executions(stepfunctions: Any, state_machine_arn: str, schedule: str) -> dict[str, str]:
    """This schedule's RUNNING executions, name -> ARN, newest first (ListExecutions' order)."""
    prefix = f"{schedule}{NAME_SEPARATOR}"
    found: dict[str, str] = {}
    pages = stepfunctions.get_paginator("list_executions").paginate(
        stateMachineArn=state_machine_arn, statusFilter="RUNNING", PaginationConfig={"PageSize": 1000}
    )
    for page in pages:
        for execution in page.get("executions", []):
            if execution["name"].startswith(prefix):
                found[execution["name"]] = execution["executionArn"]
    return found
