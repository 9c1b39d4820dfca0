"""A recurring sync's fire (handlers/start_scheduled.py) against moto's Step Functions.

moto keeps an execution RUNNING until it is stopped (its interpreter is off here), which is what
"the previous run is still going" needs; StopExecution ends it. moto answers StartExecution with
the same name as AWS documents: the same execution again while it is open with the same input,
ExecutionAlreadyExists once it is closed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from test_parent_workflow import parent, put_sources  # noqa: F401 - `parent` is the harness fixture

from conftest import PIPELINE_TABLE, FakeLambdaContext
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from ferry.pipeline.locations import Location
from ferry.pipeline.scheduled import execution_name, is_scheduled_fire, parse_schedules

SPEC = {
    "source": {"bucket": "src", "prefix": "in/"},
    "destination": {"bucket": "dst", "prefix": "c/"},
    "options": {"exclude": ["*.tmp"], "skip_existing": True},
}
T1, T2, T3 = "2026-11-22T02:00:00Z", "2026-11-23T02:00:00Z", "2026-11-24T02:00:00Z"


def stored_spec() -> dict[str, Any]:
    """The spec as the CDK app stores it in the schedule's input (validated, normalised)."""
    (schedule,) = parse_schedules(
        [{"name": "nightly", "schedule": "cron(0 2 * * ? *)", "spec": SPEC}],
        [Location("src")],
        [Location("dst")],
    )
    return dict(schedule.spec)


def fire_event(
    scheduled_time: str, schedule: str = "nightly", spec: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {"schedule": schedule, "scheduled_time": scheduled_time, "spec": spec or stored_spec()}


class Machine:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sfn = boto3.client("stepfunctions", region_name="us-east-1")
        iam = boto3.client("iam", region_name="us-east-1")
        role = iam.create_role(RoleName="ferry-jobs", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        definition = {"StartAt": "Wait", "States": {"Wait": {"Type": "Pass", "End": True}}}
        self.arn = self.sfn.create_state_machine(
            name="Ferry-jobs", definition=json.dumps(definition), roleArn=role
        )["stateMachineArn"]
        monkeypatch.setenv("FERRY_STATE_MACHINE_ARN", self.arn)

    def executions(self, status: str | None = None) -> list[dict[str, Any]]:
        kwargs = {"statusFilter": status} if status else {}
        return self.sfn.list_executions(stateMachineArn=self.arn, **kwargs)["executions"]

    def finish(self, name: str) -> None:
        (execution,) = [e for e in self.executions() if e["name"] == name]
        self.sfn.stop_execution(executionArn=execution["executionArn"])

    def input_of(self, name: str) -> dict[str, Any]:
        (execution,) = [e for e in self.executions() if e["name"] == name]
        return json.loads(self.sfn.describe_execution(executionArn=execution["executionArn"])["input"])


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Machine]:
    from moto import mock_aws

    from handlers import start_scheduled

    for name, value in {
        "POWERTOOLS_SERVICE_NAME": "ferry",
        "POWERTOOLS_METRICS_NAMESPACE": "Ferry",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "AWS_XRAY_SDK_ENABLED": "false",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        start_scheduled._stepfunctions.cache_clear()
        yield Machine(monkeypatch)
        start_scheduled._stepfunctions.cache_clear()


@pytest.fixture
def invoke(capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> Any:
    """Run the handler: its result, its EMF documents (printed to stdout) and its log records."""
    from handlers import start_scheduled

    def run(event: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
        capsys.readouterr()
        caplog.clear()
        result = start_scheduled.handler(event, FakeLambdaContext())
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
        emf = [line for line in lines if "_aws" in line]
        logs = [
            {"level": r.levelname, "message": r.getMessage()} for r in caplog.records if r.name == "ferry"
        ]
        return result, emf, logs

    return run


def test_a_first_fire_starts_one_run_in_skip_existing_mode_with_the_stored_spec(machine, invoke) -> None:
    spec = stored_spec()
    spec["options"]["skip_existing"] = False  # even a hand-edited schedule input copies only what changed

    result, emf, logs = invoke(fire_event(T1, spec=spec))

    assert result == {"action": "started", "execution_name": "nightly_20261122T020000Z"}
    (execution,) = machine.executions()
    assert execution["name"] == "nightly_20261122T020000Z" and execution["status"] == "RUNNING"
    started = machine.input_of(execution["name"])
    assert started == {**stored_spec(), "options": {**stored_spec()["options"], "skip_existing": True}}
    assert started["source"] == {"bucket": "src", "prefix": "in/"} and started["options"]["exclude"] == [
        "*.tmp"
    ]
    assert "job_id" not in started  # the execution's name is the job id
    assert emf == []
    assert [line["message"] for line in logs] == ["schedule nightly: started nightly_20261122T020000Z"]


def test_a_fire_while_the_previous_run_is_still_running_is_skipped_counted_and_logged(
    machine, invoke
) -> None:
    invoke(fire_event(T1))

    result, emf, logs = invoke(fire_event(T2))

    assert result == {"action": "skipped", "execution_name": "nightly_20261123T020000Z"}
    assert [e["name"] for e in machine.executions()] == ["nightly_20261122T020000Z"]
    (document,) = emf
    assert document["ScheduledStartSkipped"] == [1.0] or document["ScheduledStartSkipped"] == 1.0
    (directive,) = document["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "Ferry"
    assert directive["Metrics"] == [{"Name": "ScheduledStartSkipped", "Unit": "Count"}]
    dimensions = {name: document[name] for name in directive["Dimensions"][0]}
    assert dimensions == {"service": "ferry", "Schedule": "nightly"}
    (line,) = logs
    assert line["level"] == "WARNING"
    assert line["message"] == (
        "schedule nightly: start of nightly_20261123T020000Z skipped, the previous run "
        "nightly_20261122T020000Z is still running"
    )


def test_the_skipped_metric_is_the_one_the_dashboard_and_alarms_read(machine, invoke) -> None:
    from ferry_cdk.monitoring import skipped_metric

    invoke(fire_event(T1))
    _, emf, _ = invoke(fire_event(T2))

    (document,) = emf
    (directive,) = document["_aws"]["CloudWatchMetrics"]
    emitted = {name: document[name] for name in directive["Dimensions"][0]}
    metric = skipped_metric("nightly", "ferry")
    assert (directive["Namespace"], directive["Metrics"][0]["Name"]) == (metric.namespace, metric.metric_name)
    assert emitted == metric.dimensions


def test_a_retried_fire_never_starts_twice(machine, invoke) -> None:
    invoke(fire_event(T1))

    retried, emf, _ = invoke(fire_event(T1))  # its run is still going
    assert retried == {"action": "already_started", "execution_name": "nightly_20261122T020000Z"}
    assert emf == []  # a retry is not a skipped start
    machine.finish("nightly_20261122T020000Z")
    late, emf, logs = invoke(fire_event(T1))  # its run has ended: ExecutionAlreadyExists

    assert late == {"action": "already_started", "execution_name": "nightly_20261122T020000Z"}
    assert emf == []
    assert "already started" in logs[0]["message"]
    assert [e["name"] for e in machine.executions()] == ["nightly_20261122T020000Z"]


def test_a_fire_after_the_previous_run_finished_starts_again(machine, invoke) -> None:
    invoke(fire_event(T1))
    invoke(fire_event(T2))  # skipped
    machine.finish("nightly_20261122T020000Z")

    result, emf, _ = invoke(fire_event(T3))

    assert result == {"action": "started", "execution_name": "nightly_20261124T020000Z"}
    assert emf == []
    assert {e["name"]: e["status"] for e in machine.executions()} == {
        "nightly_20261122T020000Z": "ABORTED",
        "nightly_20261124T020000Z": "RUNNING",
    }


def test_another_schedules_run_or_a_job_does_not_hold_a_schedule_back(machine, invoke) -> None:
    """`nightly-2_...` starts with `nightly` but not with `nightly_`; a hand-started job whose
    name merely contains the schedule's name is no run of it either."""
    invoke(fire_event(T1, schedule="nightly-2"))
    machine.sfn.start_execution(stateMachineArn=machine.arn, name="nightly-adhoc", input="{}")

    result, emf, _ = invoke(fire_event(T1))

    assert result["action"] == "started" and emf == []
    assert len(machine.executions("RUNNING")) == 3


def test_execution_names_are_valid_job_ids_and_one_per_scheduled_time() -> None:
    from ferry.jobspec import parse_job_spec

    assert execution_name("nightly", "2026-03-29T01:30:00Z") == "nightly_20260329T013000Z"
    assert execution_name("nightly", "2026-03-29T03:30:00+02:00") == "nightly_20260329T013000Z"
    name = execution_name("x" * 40, "2026-12-31T23:59:59Z")
    assert len(name) <= 80
    assert parse_job_spec({**SPEC}, default_job_id=name).job_id == name


def test_an_input_without_a_scheduled_time_fails_in_one_sentence(machine, invoke) -> None:
    from ferry.errors import ConfigError

    with pytest.raises(
        ConfigError, match=r"scheduled_time: '<aws.scheduler.scheduled-time>' is not an ISO 8601 time"
    ):
        invoke(fire_event("<aws.scheduler.scheduled-time>"))
    assert machine.executions() == []


# -- end to end: the started run executed by the parent harness ------------------------------


def wait_for(harnessed: Any, name: str) -> dict[str, Any]:
    """The execution `name` once it has ended (the harness runs it in moto's interpreter)."""
    import time

    deadline = time.monotonic() + 120
    (execution,) = [
        e
        for e in harnessed.sfn.list_executions(stateMachineArn=harnessed.machine_arn)["executions"]
        if e["name"] == name
    ]
    while time.monotonic() < deadline:
        described = harnessed.sfn.describe_execution(executionArn=execution["executionArn"])
        if described["status"] != "RUNNING":
            return described
        time.sleep(0.1)
    raise AssertionError(f"{name} still RUNNING after 120 s")


def test_a_nightly_sync_run_by_the_parent_harness_copies_only_what_changed(parent, monkeypatch) -> None:  # noqa: F811
    from handlers import start_scheduled

    monkeypatch.setenv("FERRY_STATE_MACHINE_ARN", parent.machine_arn)
    start_scheduled._stepfunctions.cache_clear()
    s3 = parent.pipeline.s3
    sources = put_sources(s3, "in/", 30)
    s3.put_object(Bucket="src", Key="in/scratch.tmp", Body=b"excluded by the spec")

    first = start_scheduled.handler(fire_event(T1), FakeLambdaContext())
    assert first == {"action": "started", "execution_name": "nightly_20261122T020000Z"}
    assert wait_for(parent, first["execution_name"])["status"] == "SUCCEEDED"
    report = parent.report(first["execution_name"])
    # scratch.tmp is listed and skipped by the spec's exclude: every listed object is counted
    listed = len(sources) + 1
    assert (report["objects"], report["copied"], report["skipped"], report["failed"]) == (
        listed,
        len(sources),
        1,
        0,
    )

    changed = sorted(sources)[:3]
    for key in changed:
        s3.put_object(Bucket="src", Key=key, Body=b"changed since last night\n")
    for key in ("in/new-1.txt", "in/new-2.txt"):
        s3.put_object(Bucket="src", Key=key, Body=b"new today\n")

    second = start_scheduled.handler(fire_event(T2), FakeLambdaContext())
    assert second == {"action": "started", "execution_name": "nightly_20261123T020000Z"}
    assert wait_for(parent, second["execution_name"])["status"] == "SUCCEEDED"
    report = parent.report(second["execution_name"])
    listed += 2
    assert (report["objects"], report["copied"], report["skipped"], report["failed"]) == (
        listed,
        5,
        listed - 5,
        0,
    )
    for key in changed:
        assert s3.get_object(Bucket="dst", Key="c/" + key[3:])["Body"].read() == b"changed since last night\n"
    assert s3.get_object(Bucket="dst", Key="c/new-2.txt")["Body"].read() == b"new today\n"
    assert "KeyCount" in s3.list_objects_v2(Bucket="dst", Prefix="c/scratch") and not s3.list_objects_v2(
        Bucket="dst", Prefix="c/scratch"
    ).get("Contents")


def test_a_fire_that_finds_nothing_tonight_succeeds_where_the_same_job_started_by_hand_is_refused(
    parent,  # noqa: F811
    monkeypatch,
) -> None:
    """A nightly sync of a prefix that is empty tonight is a sync of nothing: its run succeeds
    with 0 objects. The same spec started by hand (`ferry job start` sends a job id) is far more
    often a typo: Prepare refuses it as `ferry copy` refuses a SRC that matches nothing, before
    the job is recorded."""
    from handlers import start_scheduled

    monkeypatch.setenv("FERRY_STATE_MACHINE_ARN", parent.machine_arn)
    start_scheduled._stepfunctions.cache_clear()
    parent.pipeline.s3.put_object(Bucket="src", Key="inbox/a.txt", Body=b"elsewhere")

    fired = start_scheduled.handler(fire_event(T1), FakeLambdaContext())
    assert wait_for(parent, fired["execution_name"])["status"] == "SUCCEEDED"
    report = parent.report(fired["execution_name"])
    assert (report["objects"], report["copied"], report["failed"]) == (0, 0, 0)

    by_hand = parent.run({**stored_spec(), "job_id": "by-hand"}, "by-hand")
    assert by_hand["status"] == "FAILED"
    assert by_hand["error"] == "FerryJobRejected"
    assert by_hand["cause"] == (
        "source: nothing matched s3://src/in/: no object under it; did you mean s3://src/inbox/?"
    )
    assert DynamoLedger(parent.pipeline.dynamodb, PIPELINE_TABLE).job("by-hand") is None


def test_only_a_schedules_fire_is_taken_for_one() -> None:
    """The marks a fire carries, all of them: an execution (an ARN), named `<schedule>_<time>`
    as execution_name names it, of a spec without a job id."""
    name = execution_name("nightly", T1)
    fire = {"spec": stored_spec(), "execution_name": name, "execution_arn": f"arn:...:{name}"}
    assert is_scheduled_fire(fire)
    assert not is_scheduled_fire({**fire, "spec": {**stored_spec(), "job_id": name}})  # ferry job start
    assert not is_scheduled_fire({k: v for k, v in fire.items() if k != "execution_arn"})  # ferry run
    assert not is_scheduled_fire({**fire, "execution_name": "nightly-20261122"})
