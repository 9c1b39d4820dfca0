"""Recurring syncs (EventBridge Scheduler) and the alarms and dashboard, as the template says.

The stack is built in-process from TEST_CONTEXT plus two schedules and both alarm targets, with
cdk-nag registered as cdk/app.py registers it (an unacknowledged finding fails the synth), and
the written template goes through cfn-lint.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cdk_support import REPO, TEST_CONTEXT, load_app_module, plain, resources, statements

from ferry.errors import ConfigError

SCHEDULES = [
    {
        "name": "nightly",
        "schedule": "cron(0 2 * * ? *)",
        "timezone": "Europe/Berlin",
        "spec": {
            "source": {"bucket": "src-bucket", "prefix": "data/"},
            "destination": {"bucket": "dst-bucket", "prefix": "backup/"},
            "options": {"exclude": ["*.tmp"], "storage_class": "STANDARD_IA"},
        },
    },
    {
        "name": "every-90-min",
        "schedule": "rate(90 minutes)",
        "spec": {
            "source": {"bucket": "src-whole"},
            "destination": {"bucket": "dst-bucket", "prefix": "backup/w/"},
        },
    },
]
TOPIC_ARN = "arn:aws:sns:us-east-1:123456789012:ops-pager"
CONTEXT = {
    **TEST_CONTEXT,
    "schedules": SCHEDULES,
    "alarm_email": "ops@example.com",
    "alarm_topic_arn": TOPIC_ARN,
    "alarm_oldest_event_seconds": 1234,
    "alarm_replication_lag_seconds": 321,
}


def build(context: dict[str, Any], outdir: Path) -> Any:
    import aws_cdk as cdk

    app = cdk.App(
        outdir=str(outdir),
        context={"ferry": context, "aws:cdk:bundling-stacks": [], "aws:cdk:enable-path-metadata": True},
    )
    return app, load_app_module().build(app)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    from aws_cdk.assertions import Template

    out = tmp_path_factory.mktemp("cdk.out")
    app, stack = build(CONTEXT, out)
    template = Template.from_stack(stack).to_json()  # synthesizes: cdk-nag errors would fail here
    assembly = app.synth()
    return SimpleNamespace(
        stack=stack,
        template=template,
        template_file=Path(assembly.get_stack_artifact(stack.artifact_id).template_full_path),
    )


def by_prefix(template: dict[str, Any], kind: str, prefix: str) -> dict[str, Any]:
    found = {lid: r for lid, r in resources(template, kind).items() if lid.startswith(prefix)}
    assert len(found) == 1, (prefix, sorted(resources(template, kind)))
    return next(iter(found.values()))["Properties"]


def role_statements(template: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [st for lid, st in statements(template) if lid.startswith(prefix)]


# -- schedules ------------------------------------------------------------------------------


def test_each_schedule_fires_the_starter_with_its_spec_in_skip_existing_mode(built: SimpleNamespace) -> None:
    t = built.template
    starter_lid = next(
        lid for lid in resources(t, "AWS::Lambda::Function") if lid.startswith("RecurringSyncsStartScheduled")
    )
    nightly = by_prefix(t, "AWS::Scheduler::Schedule", "RecurringSyncsSchedulenightly")
    assert nightly["ScheduleExpression"] == "cron(0 2 * * ? *)"
    assert nightly["ScheduleExpressionTimezone"] == "Europe/Berlin"
    assert nightly["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert nightly["State"] == "ENABLED"
    target = nightly["Target"]
    assert target["Arn"] == {"Fn::GetAtt": [starter_lid, "Arn"]}
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 20}
    dlq_lid = target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
    assert resources(t, "AWS::SQS::Queue")[dlq_lid]["Properties"]["SqsManagedSseEnabled"] is True
    assert json.loads(target["Input"]) == {
        "schedule": "nightly",
        "scheduled_time": "<aws.scheduler.scheduled-time>",
        "spec": {
            "source": {"bucket": "src-bucket", "prefix": "data/"},
            "destination": {"bucket": "dst-bucket", "prefix": "backup/"},
            "options": {
                "mode": "auto",
                "storage_class": "STANDARD_IA",
                "include": [],
                "exclude": ["*.tmp"],
                "skip_existing": True,
                "compare": "checksum",
                "restore_days": 7,
                "preserve_tags": True,
                "multipart_threshold": 16 * 1024 * 1024,
                "dry_run": False,
                "marks_prefix": ".ferry/uploads/",
                "abort_uploads_after_seconds": 0,
            },
        },
    }
    rate = by_prefix(t, "AWS::Scheduler::Schedule", "RecurringSyncsScheduleevery90min")
    assert rate["ScheduleExpression"] == "rate(90 minutes)"
    assert rate["ScheduleExpressionTimezone"] == "Etc/UTC"
    assert json.loads(rate["Target"]["Input"])["spec"]["options"]["skip_existing"] is True


def test_the_scheduler_role_may_invoke_only_the_starter_and_fill_its_dead_letter_queue(
    built: SimpleNamespace,
) -> None:
    t = built.template
    role = by_prefix(t, "AWS::IAM::Role", "RecurringSyncsSchedulerRole")
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    got = sorted(
        ((st["Action"] if isinstance(st["Action"], str) else tuple(st["Action"])), st["Resource"])
        for st in role_statements(t, "RecurringSyncsSchedulerRole")
    )
    starter = plain(
        {
            "Fn::GetAtt": [
                next(
                    lid
                    for lid in resources(t, "AWS::Lambda::Function")
                    if lid.startswith("RecurringSyncsStartScheduled")
                ),
                "Arn",
            ]
        },
        t,
    )
    dlq = plain(
        {
            "Fn::GetAtt": [
                next(
                    lid
                    for lid in resources(t, "AWS::SQS::Queue")
                    if lid.startswith("RecurringSyncsDeadLetters")
                ),
                "Arn",
            ]
        },
        t,
    )
    assert got == [("lambda:InvokeFunction", starter), ("sqs:SendMessage", dlq)]


def test_the_starter_may_start_and_list_runs_of_the_parent_only(built: SimpleNamespace) -> None:
    t = built.template
    machine_lid = next(iter(resources(t, "AWS::StepFunctions::StateMachine")))
    got = role_statements(t, "RecurringSyncsStartScheduledRole")
    data = [st for st in got if not any(a.startswith(("logs:", "xray:", "sqs:")) for a in _actions(st))]
    assert data == [
        {
            "Action": ["states:StartExecution", "states:ListExecutions"],
            "Effect": "Allow",
            "Resource": plain({"Ref": machine_lid}, t),
            "Sid": "StartAndListRuns",
        }
    ]
    (send,) = [st for st in got if any(a.startswith("sqs:") for a in _actions(st))]
    assert send["Resource"] == plain({"Fn::GetAtt": [_schedules_dlq(t), "Arn"]}, t)
    assert "sqs:SendMessage" in _actions(send)
    data.append(send)
    others = [st for st in got if st not in data]
    assert {a for st in others for a in _actions(st)} == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
    }
    starter = by_prefix(t, "AWS::Lambda::Function", "RecurringSyncsStartScheduled")
    assert starter["Handler"] == "handlers.start_scheduled.handler"
    # no reserved concurrency: it fails deployments where the account quota is 100 or less
    assert "ReservedConcurrentExecutions" not in starter
    assert starter["Environment"]["Variables"]["FERRY_STATE_MACHINE_ARN"] == {"Ref": machine_lid}


def _schedules_dlq(t: dict[str, Any]) -> str:
    return next(lid for lid in resources(t, "AWS::SQS::Queue") if lid.startswith("RecurringSyncsDeadLetters"))


def test_a_fire_the_starter_fails_on_lands_in_the_dead_letter_queue(built: SimpleNamespace) -> None:
    """Scheduler invokes the starter asynchronously: its retry policy and dead-letter queue
    cover the Invoke call only. When the function itself fails, Lambda retries twice and then
    discards the event (Lambda developer guide, invocation-async-error-handling) unless the
    function has an on-failure destination: the schedules' dead-letter queue, whose alarm fires."""
    t = built.template
    (config,) = resources(t, "AWS::Lambda::EventInvokeConfig").values()
    props = config["Properties"]
    starter = next(
        lid for lid in resources(t, "AWS::Lambda::Function") if lid.startswith("RecurringSyncsStartScheduled")
    )
    assert props["FunctionName"] == {"Ref": starter}
    assert props["Qualifier"] == "$LATEST"
    assert props["DestinationConfig"]["OnFailure"]["Destination"] == {
        "Fn::GetAtt": [_schedules_dlq(t), "Arn"]
    }
    assert props["MaximumRetryAttempts"] == 2
    assert props["MaximumEventAgeInSeconds"] == 3600


def _actions(st: dict[str, Any]) -> list[str]:
    return [st["Action"]] if isinstance(st["Action"], str) else st["Action"]


def test_no_schedules_means_no_scheduler_resources(tmp_path: Path) -> None:
    from aws_cdk.assertions import Template

    _, stack = build(TEST_CONTEXT, tmp_path)
    t = Template.from_stack(stack).to_json()
    assert resources(t, "AWS::Scheduler::Schedule") == {}
    assert not [lid for lid in resources(t, "AWS::Lambda::Function") if "StartScheduled" in lid]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schedule": "cron(0 2 * * *)"}, "schedules[nightly].schedule: 'cron(0 2 * * *)' has 5 fields"),
        ({"schedule": "at(2026-12-01T00:00:00)"}, "runs once; a recurring sync needs cron(...) or rate(...)"),
        ({"schedule": "rate(1 hours)"}, "write 'rate(1 hour)'"),
        (
            {"timezone": "Mars/Olympus"},
            "schedules[nightly].timezone: 'Mars/Olympus' is not an IANA time zone",
        ),
        (
            {
                "spec": {
                    "source": {"bucket": "src-bucket", "prefix": "data/"},
                    "destination": {"bucket": "dst-bucket", "prefix": "backup/"},
                    "options": {"mode": "fast"},
                }
            },
            "schedules[nightly].spec.options.mode: 'fast' is not one of",
        ),
        (
            {
                "spec": {
                    "job_id": "x",
                    "source": {"bucket": "src-bucket"},
                    "destination": {"bucket": "dst-bucket"},
                }
            },
            "schedules[nightly].spec.job_id: remove it",
        ),
        (
            {
                "spec": {
                    "source": {"bucket": "src-bucket", "prefix": "data/"},
                    "destination": {"bucket": "dst-bucket", "prefix": "backup/"},
                    "options": {"skip_existing": False},
                }
            },
            "copies only what changed",
        ),
        (
            {
                "spec": {
                    "source": {"bucket": "elsewhere"},
                    "destination": {"bucket": "dst-bucket", "prefix": "backup/"},
                }
            },
            "s3://elsewhere/ is not inside any configured 'sources' location",
        ),
        ({"name": "night_ly"}, "schedules[0].name: 'night_ly' must be 1-40 letters, digits or '-'"),
    ],
)
def test_a_wrong_schedule_fails_the_synth_naming_it(
    change: dict[str, Any], message: str, tmp_path: Path
) -> None:
    schedule = {**SCHEDULES[0], **change}
    with pytest.raises(ConfigError) as raised:
        build({**TEST_CONTEXT, "schedules": [schedule]}, tmp_path)
    assert message in str(raised.value)


def test_cdk_synth_prints_one_line_for_a_bad_schedule(tmp_path: Path) -> None:
    context = {**TEST_CONTEXT, "schedules": [{**SCHEDULES[0], "schedule": "rate(0 minutes)"}]}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env["CDK_CONTEXT_JSON"] = json.dumps({"ferry": context})
    env["CDK_OUTDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, str(REPO / "cdk" / "app.py")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "ferry: configuration error: schedules[nightly].schedule: 'rate(0 minutes)': the rate must be 1 or more"
    )
    assert "Traceback" not in done.stderr


# -- alarms and dashboard --------------------------------------------------------------------


def alarms(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {lid: r["Properties"] for lid, r in resources(template, "AWS::CloudWatch::Alarm").items()}


def test_failed_executions_alarm_sums_failed_timed_out_and_aborted(built: SimpleNamespace) -> None:
    t = built.template
    machine_lid = next(iter(resources(t, "AWS::StepFunctions::StateMachine")))
    (alarm,) = [a for lid, a in alarms(t).items() if lid.startswith("MonitoringFailedExecutions")]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    expression = next(m for m in alarm["Metrics"] if "Expression" in m)
    assert expression["Expression"] == "failed + timedOut + aborted"
    used = {
        m["Id"]: (
            m["MetricStat"]["Metric"]["Namespace"],
            m["MetricStat"]["Metric"]["MetricName"],
            m["MetricStat"]["Stat"],
            m["MetricStat"]["Metric"]["Dimensions"],
        )
        for m in alarm["Metrics"]
        if "MetricStat" in m
    }
    dims = [{"Name": "StateMachineArn", "Value": {"Ref": machine_lid}}]
    assert used == {
        "failed": ("AWS/States", "ExecutionsFailed", "Sum", dims),
        "timedOut": ("AWS/States", "ExecutionsTimedOut", "Sum", dims),
        "aborted": ("AWS/States", "ExecutionsAborted", "Sum", dims),
    }


def test_every_alarm_notifies_both_topics(built: SimpleNamespace) -> None:
    t = built.template
    topic_lid = next(iter(resources(t, "AWS::SNS::Topic")))
    (subscription,) = resources(t, "AWS::SNS::Subscription").values()
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == "ops@example.com"
    found = alarms(t)
    assert len(found) >= 3
    for lid, alarm in found.items():
        assert sorted(json.dumps(a, sort_keys=True) for a in alarm["AlarmActions"]) == sorted(
            json.dumps(a, sort_keys=True) for a in [TOPIC_ARN, {"Ref": topic_lid}]
        ), lid


def test_the_schedules_dead_letter_queue_and_the_starter_have_alarms(built: SimpleNamespace) -> None:
    t = built.template
    found = alarms(t)
    (dlq,) = [a for lid, a in found.items() if lid.startswith("MonitoringDeadLettersschedules")]
    dlq_lid = next(
        lid for lid in resources(t, "AWS::SQS::Queue") if lid.startswith("RecurringSyncsDeadLetters")
    )
    assert (dlq["Namespace"], dlq["MetricName"], dlq["Statistic"]) == (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        "Maximum",
    )
    assert dlq["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq_lid, "QueueName"]}}]
    assert (dlq["Threshold"], dlq["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    (errors,) = [a for lid, a in found.items() if lid.startswith("MonitoringScheduledStartErrors")]
    assert (errors["Namespace"], errors["MetricName"], errors["Threshold"]) == ("AWS/Lambda", "Errors", 1)


def test_queue_and_lag_alarms_and_the_dashboard_from_replication_queues(tmp_path: Path) -> None:
    """The replication queues come from another module (stack.replication_queues): here a
    stand-in stack gives two, with the replication names, to the same function the stack calls."""
    import aws_cdk as cdk
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_sqs as sqs
    from aws_cdk import aws_stepfunctions as sfn
    from aws_cdk.assertions import Template

    from ferry_cdk.monitoring import add_monitoring

    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "Monitored")
    machine = sfn.StateMachine(
        stack, "Machine", definition_body=sfn.DefinitionBody.from_chainable(sfn.Pass(stack, "P"))
    )
    queues = []
    for name in ("photos", "logs"):
        dlq = sqs.Queue(stack, f"{name}Dlq")
        queues.append(
            (
                name,
                sqs.Queue(
                    stack,
                    f"{name}Queue",
                    dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=5),
                ),
                dlq,
            )
        )
    worker = lambda_.Function(
        stack,
        "Worker",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="x.h",
        code=lambda_.Code.from_inline("x"),
    )
    add_monitoring(
        stack,
        state_machine=machine,
        queues=queues,
        replication_names=["photos", "logs"],
        functions={"Worker": worker},
        service="ferry",
        schedule_names=["nightly"],
        oldest_event_seconds=1234,
        lag_seconds=321,
    )
    t = Template.from_stack(stack).to_json()
    found = alarms(t)
    assert found  # no topic given: alarms without actions
    assert all("AlarmActions" not in a for a in found.values())
    (oldest,) = [a for lid, a in found.items() if lid.startswith("MonitoringOldestEventphotos")]
    assert (oldest["MetricName"], oldest["Statistic"], oldest["Threshold"], oldest["ComparisonOperator"]) == (
        "ApproximateAgeOfOldestMessage",
        "Maximum",
        1234,
        "GreaterThanThreshold",
    )
    assert oldest["Dimensions"][0]["Value"]["Fn::GetAtt"][0].startswith("photosQueue")
    dlq_alarms = [a for lid, a in found.items() if lid.startswith("MonitoringDeadLetters")]
    assert sorted(a["Dimensions"][0]["Value"]["Fn::GetAtt"][0][:7] for a in dlq_alarms) == [
        "logsDlq",
        "photosD",
    ]
    (lag,) = [a for lid, a in found.items() if lid.startswith("MonitoringReplicationLaglogs")]
    assert (lag["Namespace"], lag["MetricName"], lag["ExtendedStatistic"], lag["Threshold"]) == (
        "Ferry",
        "ReplicationLag",
        "p99",
        321,
    )
    # Exactly the dimensions ferry.pipeline.replication.lag emits (test_replication_end_to_end pins those).
    assert sorted((d["Name"], d["Value"]) for d in lag["Dimensions"]) == [("Replication", "logs")]

    (dashboard,) = resources(t, "AWS::CloudWatch::Dashboard").values()
    body = json.loads(plain(dashboard["Properties"]["DashboardBody"], t))
    metrics = [m for w in body["widgets"] if w["type"] == "metric" for m in w["properties"]["metrics"]]
    named = {(m[0], m[1]) for m in metrics if isinstance(m[0], str) and not m[0].startswith("...")}
    assert {
        ("AWS/States", "ExecutionsStarted"),
        ("AWS/States", "ExecutionsSucceeded"),
        ("AWS/States", "ExecutionsFailed"),
        ("Ferry", "ReplicationLag"),
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible"),
        ("AWS/SQS", "ApproximateAgeOfOldestMessage"),
        ("Ferry", "ScheduledStartSkipped"),
        ("AWS/Lambda", "Errors"),
        ("AWS/Lambda", "Throttles"),
    } <= named
    lag_lines = [m for m in metrics if m[:2] == ["Ferry", "ReplicationLag"]]
    assert sorted((m[m.index("Replication") + 1], m[-1]["stat"]) for m in lag_lines) == [
        ("logs", "p50"), ("logs", "p99"), ("photos", "p50"), ("photos", "p99"),
    ]  # fmt: skip


def test_the_stack_dashboard_names_the_skipped_metric_per_schedule(built: SimpleNamespace) -> None:
    t = built.template
    (dashboard,) = resources(t, "AWS::CloudWatch::Dashboard").values()
    assert plain(dashboard["Properties"]["DashboardName"], t) == "Ferry-us-east-1"
    body = json.loads(plain(dashboard["Properties"]["DashboardBody"], t))
    metrics = [m for w in body["widgets"] if w["type"] == "metric" for m in w["properties"]["metrics"]]
    skipped = sorted(tuple(m[:6]) for m in metrics if m[:2] == ["Ferry", "ScheduledStartSkipped"])
    assert skipped == [
        ("Ferry", "ScheduledStartSkipped", "Schedule", "every-90-min", "service", "ferry"),
        ("Ferry", "ScheduledStartSkipped", "Schedule", "nightly", "service", "ferry"),
    ]
    functions = {m[3] for m in metrics if m[:2] == ["AWS/Lambda", "Errors"]}
    assert len(functions) == 6  # Prepare, ListVersions, CopyBatch, RecordFailure, Finalize, StartScheduled


def test_no_alarm_fires_on_a_hand_over_and_the_dashboard_shows_hand_overs(built: SimpleNamespace) -> None:
    """A CopyBatch pass that hands over raises FerryHandOver, which Lambda counts in the
    function's Errors metric: no alarm may watch that metric (directly or in metric math),
    and the dashboard plots the hand-overs the handler publishes beside the errors."""
    from ferry.pipeline.batches import HAND_OVER_METRIC

    t = built.template
    copy_batch = next(
        lid
        for lid, r in resources(t, "AWS::Lambda::Function").items()
        if r["Properties"].get("Handler") == "handlers.copy_batch.handler"
    )
    for lid, alarm in alarms(t).items():
        watched = [alarm] + [m["MetricStat"]["Metric"] for m in alarm.get("Metrics", []) if "MetricStat" in m]
        for metric in watched:
            names = json.dumps(metric.get("Dimensions", []))
            assert not (metric.get("MetricName") == "Errors" and copy_batch in names), lid
    (dashboard,) = resources(t, "AWS::CloudWatch::Dashboard").values()
    body = json.loads(plain(dashboard["Properties"]["DashboardBody"], t))
    metrics = [m for w in body["widgets"] if w["type"] == "metric" for m in w["properties"]["metrics"]]
    assert [tuple(m[:4]) for m in metrics if m[:2] == ["Ferry", HAND_OVER_METRIC]] == [
        ("Ferry", HAND_OVER_METRIC, "service", "ferry")
    ]


# -- the linters on this template --------------------------------------------------------------


def test_cfn_lint_finds_no_error_in_schedules_and_alarms(built: SimpleNamespace) -> None:
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    done = subprocess.run(
        [str(cfn_lint), "--format", "json", str(built.template_file)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    findings = json.loads(done.stdout or "[]")
    errors = [f for f in findings if f["Level"] == "Error"]
    assert errors == [], json.dumps(errors, indent=1)


def test_cdk_nag_acknowledgments_for_the_new_resources_carry_reasons(built: SimpleNamespace) -> None:
    """The synth above would have failed on an unacknowledged finding; these are the ones
    acknowledged on the new resources, each with its reason in the template."""
    t = built.template
    acknowledged = sorted(
        (lid.rstrip("0123456789ABCDEF"), rule["id"])
        for lid, r in t["Resources"].items()
        if lid.startswith(("RecurringSyncs", "Monitoring"))
        for rule in r.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
        if rule["id"].startswith("AwsSolutions-")
    )
    assert acknowledged == [
        ("MonitoringAlarmTopic", "AwsSolutions-SNS2"),
        ("RecurringSyncsDeadLetters", "AwsSolutions-SQS3"),
        ("RecurringSyncsStartScheduled", "AwsSolutions-L1"),
        # X-Ray's actions take no resource (the reason says so; nag.py grants nothing else this way)
        ("RecurringSyncsStartScheduledRoleDefaultPolicy", "AwsSolutions-IAM5[Resource::*]"),
    ]
