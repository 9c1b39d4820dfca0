"""Alarms and a CloudWatch dashboard: failures nobody would otherwise notice.

Alarms (each notifies the optional SNS topics; state is visible on the dashboard either way):
- a dead-letter queue holds a message (ApproximateNumberOfMessagesVisible >= 1): an S3 event
  the starter could not handle, or a schedule fire Scheduler could not deliver;
- an execution of the parent state machine failed, timed out or was aborted (AWS/States
  ExecutionsFailed + ExecutionsTimedOut + ExecutionsAborted >= 1 in 5 minutes);
- the oldest queued S3 event is older than `alarm_oldest_event_seconds` (ApproximateAgeOfOldestMessage):
  the starter is not keeping up, or not running;
- replication lag p99 above `alarm_replication_lag_seconds` (Ferry/ReplicationLag per Replication);
- the scheduled-start function failed: a recurring sync that did not start.

No alarm watches the CopyBatch function's Lambda `Errors`: a pass that hands work over raises
FerryHandOver, which Lambda counts there. The dashboard plots Ferry/PassesHandedOver (one per
hand-over, emitted by the handler) beside the functions' errors, so the rest stand out.

CloudWatch matches a metric only by its full dimension set, so each alarm names exactly the
dimensions its emitter writes: `ScheduledStartSkipped` carries Powertools' `service` dimension
besides `Schedule`; `ReplicationLag` is emitted with `Replication` alone (ferry.pipeline.replication.lag).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from ferry.pipeline.scheduled import SKIPPED_METRIC
from ferry.pipeline.settings import PipelineSettings

from . import nag
from .schedules import RecurringSyncs

NAMESPACE = "Ferry"
LAG_METRIC = "ReplicationLag"
HAND_OVER_METRIC = "PassesHandedOver"  # ferry.pipeline.batches.HAND_OVER_METRIC (a test pins it)
PERIOD = cdk.Duration.minutes(5)


@dataclass
class Monitoring:
    alarms: dict[str, cw.Alarm] = field(default_factory=dict)
    topics: list[sns.ITopic] = field(default_factory=list)
    dashboard: cw.Dashboard | None = None


def lag_metric(replication: str, statistic: str, service: str, label: str | None = None) -> cw.Metric:
    """No unit filter: an alarm on a unit would miss data emitted with another one. No `service`
    dimension either: the workers emit the lag with `Replication` alone (ferry.pipeline.replication.lag),
    and CloudWatch matches a metric only by its full set of dimensions."""
    return cw.Metric(
        namespace=NAMESPACE,
        metric_name=LAG_METRIC,
        dimensions_map={"Replication": replication},
        statistic=statistic,
        period=PERIOD,
        label=label,
    )


def skipped_metric(schedule: str, service: str, label: str | None = None) -> cw.Metric:
    return cw.Metric(
        namespace=NAMESPACE,
        metric_name=SKIPPED_METRIC,
        dimensions_map={"service": service, "Schedule": schedule},
        statistic="Sum",
        period=PERIOD,
        label=label,
    )


def add_monitoring(
    scope: Construct,
    *,
    state_machine: sfn.StateMachine,
    queues: Sequence[tuple[str, sqs.IQueue, sqs.IQueue]],
    replication_names: Sequence[str],
    functions: Mapping[str, lambda_.IFunction],
    service: str,
    dead_letter_queues: Sequence[tuple[str, sqs.IQueue]] = (),
    schedule_names: Sequence[str] = (),
    scheduled_start: lambda_.IFunction | None = None,
    oldest_event_seconds: int = 900,
    lag_seconds: int = 900,
    alarm_email: str | None = None,
    alarm_topic_arn: str | None = None,
) -> Monitoring:
    """Alarms on `queues` ((name, queue, its dead-letter queue); possibly none), on the extra
    `dead_letter_queues`, on the state machine's failed runs and on each replication's lag, and
    one dashboard of it all."""
    root = Construct(scope, "Monitoring")
    result = Monitoring(topics=_topics(root, alarm_email, alarm_topic_arn))

    def alarm(name: str, description: str, **props: object) -> None:
        made = cw.Alarm(
            root,
            f"{name}Alarm",
            alarm_description=f"Ferry: {description}",
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            evaluation_periods=1,
            **props,  # type: ignore[arg-type]
        )
        for topic in result.topics:
            made.add_alarm_action(cw_actions.SnsAction(topic))
        result.alarms[name] = made

    every_dlq = [(name, dlq) for name, _, dlq in queues] + list(dead_letter_queues)
    for name, dlq in every_dlq:
        alarm(
            f"DeadLetters-{name}",
            f"{name}: messages in the dead-letter queue (undelivered events or fires); read them, fix, redrive",
            metric=dlq.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
            threshold=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        )
    for name, queue, _ in queues:
        alarm(
            f"OldestEvent-{name}",
            f"{name}: the oldest queued S3 event is older than {oldest_event_seconds} s; the starter is behind or failing",
            metric=queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum"),
            threshold=oldest_event_seconds,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
    alarm(
        "FailedExecutions",
        "a job failed, timed out or was aborted; see the execution's cause and the job's failures.jsonl",
        metric=cw.MathExpression(
            expression="failed + timedOut + aborted",
            using_metrics={
                "failed": state_machine.metric_failed(period=PERIOD, statistic="Sum"),
                "timedOut": state_machine.metric_timed_out(period=PERIOD, statistic="Sum"),
                "aborted": state_machine.metric_aborted(period=PERIOD, statistic="Sum"),
            },
            period=PERIOD,
            label="failed + timed out + aborted",
        ),
        threshold=1,
        comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    )
    for name in replication_names:
        alarm(
            f"ReplicationLag-{name}",
            f"{name}: replication lag p99 above {lag_seconds} s",
            metric=lag_metric(name, "p99", service),
            threshold=lag_seconds,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
    if scheduled_start is not None:
        alarm(
            "ScheduledStartErrors",
            "the scheduled-start function failed: a recurring sync may not have started; see its logs",
            metric=scheduled_start.metric_errors(period=PERIOD, statistic="Sum"),
            threshold=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        )
    result.dashboard = _dashboard(
        root, state_machine, queues, every_dlq, replication_names, functions, schedule_names, service, result
    )
    return result


def _topics(root: Construct, email: str | None, topic_arn: str | None) -> list[sns.ITopic]:
    """`alarm_topic_arn`: an SNS topic you own (chat, paging, several addresses); `alarm_email`:
    a topic Ferry creates with that address subscribed (AWS mails a confirmation link first)."""
    topics: list[sns.ITopic] = []
    if topic_arn:
        topics.append(sns.Topic.from_topic_arn(root, "AlarmTopicGiven", topic_arn))
    if email:
        topic = sns.Topic(root, "AlarmTopic", display_name="Ferry alarms", enforce_ssl=True)
        topic.add_subscription(subscriptions.EmailSubscription(email))
        nag.ack(
            topic,
            "AwsSolutions-SNS2",
            "The topic carries only CloudWatch alarm notifications (alarm name, state and metric), no "
            "object data; CloudWatch cannot publish to a topic encrypted with the AWS managed SNS key, "
            "and a customer managed key would add a standing monthly charge for no protected data.",
        )
        topics.append(topic)
    return topics


def _dashboard(
    root: Construct,
    state_machine: sfn.StateMachine,
    queues: Sequence[tuple[str, sqs.IQueue, sqs.IQueue]],
    dead_letter_queues: Sequence[tuple[str, sqs.IQueue]],
    replication_names: Sequence[str],
    functions: Mapping[str, lambda_.IFunction],
    schedule_names: Sequence[str],
    service: str,
    monitoring: Monitoring,
) -> cw.Dashboard:
    def graph(title: str, left: list[cw.IMetric], right: list[cw.IMetric] | None = None) -> cw.GraphWidget:
        return cw.GraphWidget(title=title, left=left, right=right or [], width=12, height=6)

    widgets: list[cw.IWidget] = [
        cw.AlarmStatusWidget(title="Alarms", alarms=list(monitoring.alarms.values()), width=24, height=3),
        graph(
            "Executions (jobs)",
            [
                state_machine.metric_started(period=PERIOD, statistic="Sum", label="started"),
                state_machine.metric_succeeded(period=PERIOD, statistic="Sum", label="succeeded"),
                state_machine.metric_failed(period=PERIOD, statistic="Sum", label="failed"),
                state_machine.metric_timed_out(period=PERIOD, statistic="Sum", label="timed out"),
                state_machine.metric_aborted(period=PERIOD, statistic="Sum", label="aborted"),
            ],
        ),
    ]
    if replication_names:
        widgets.append(
            graph(
                "Replication lag (seconds, p50 and p99)",
                [lag_metric(n, s, service, f"{n} {s}") for n in replication_names for s in ("p50", "p99")],
            )
        )
    if queues:
        widgets.append(
            graph(
                "Queued S3 events: depth (left), oldest age in seconds (right)",
                [
                    q.metric_approximate_number_of_messages_visible(period=PERIOD, label=f"{n} depth")
                    for n, q, _ in queues
                ],
                [
                    q.metric_approximate_age_of_oldest_message(
                        period=PERIOD, statistic="Maximum", label=f"{n} oldest"
                    )
                    for n, q, _ in queues
                ],
            )
        )
    if dead_letter_queues:
        widgets.append(
            graph(
                "Dead-letter queues: messages",
                [
                    d.metric_approximate_number_of_messages_visible(
                        period=PERIOD, statistic="Maximum", label=n
                    )
                    for n, d in dead_letter_queues
                ],
            )
        )
    if schedule_names:
        widgets.append(
            graph(
                "Scheduled starts skipped (previous run still going)",
                [skipped_metric(n, service, f"{n} skipped") for n in schedule_names],
            )
        )
    widgets.append(
        graph(
            "Lambda errors (left; CopyBatch's include its hand-overs) and throttles (right)",
            [
                *(
                    f.metric_errors(period=PERIOD, statistic="Sum", label=f"{n} errors")
                    for n, f in functions.items()
                ),
                cw.Metric(
                    namespace=NAMESPACE,
                    metric_name=HAND_OVER_METRIC,
                    dimensions_map={"service": service},
                    statistic="Sum",
                    period=PERIOD,
                    label="CopyBatch hand-overs (FerryHandOver, not failures)",
                ),
            ],
            [
                f.metric_throttles(period=PERIOD, statistic="Sum", label=f"{n} throttles")
                for n, f in functions.items()
            ],
        )
    )
    # Dashboard names are global to the account: the region keeps two regions' stacks apart.
    dashboard = cw.Dashboard(
        root,
        "Dashboard",
        dashboard_name=f"{cdk.Stack.of(root).stack_name}-{cdk.Stack.of(root).region}",
        default_interval=cdk.Duration.days(1),
    )
    dashboard.add_widgets(widgets[0])
    for i in range(1, len(widgets), 2):
        dashboard.add_widgets(*widgets[i : i + 2])
    return dashboard


class _Stack(Protocol):
    """What `monitor_stack` reads of FerryStack (a protocol: this module stays below stack.py)."""

    settings: PipelineSettings
    state_machine: sfn.StateMachine
    functions: dict[str, lambda_.Function]
    worker_env: dict[str, str]
    recurring_syncs: RecurringSyncs | None


def monitor_stack(stack: _Stack) -> Monitoring:
    """The stack's alarms and dashboard. Call it after every queue and function exists:
    `stack.replication_queues` ((name, queue, dead-letter queue) per replication) may be absent."""
    s = stack.settings
    syncs = stack.recurring_syncs
    functions: dict[str, lambda_.IFunction] = dict(stack.functions)
    functions.update(getattr(stack, "extra_functions", {}))
    replications = getattr(stack, "replication_queues", {})
    functions.update({f"Start-{name}": pieces.starter for name, pieces in replications.items()})
    if syncs:
        functions["StartScheduled"] = syncs.function
    return add_monitoring(
        cast(Construct, stack),
        state_machine=stack.state_machine,
        queues=[(name, pieces.queue, pieces.dlq) for name, pieces in replications.items()],
        replication_names=[r.name for r in getattr(s, "replications", ())],
        functions=functions,
        service=stack.worker_env["POWERTOOLS_SERVICE_NAME"],
        dead_letter_queues=[("schedules", syncs.dead_letter_queue)] if syncs else [],
        schedule_names=[sch.name for sch in s.schedules],
        scheduled_start=syncs.function if syncs else None,
        oldest_event_seconds=s.alarm_oldest_event_seconds,
        lag_seconds=s.alarm_replication_lag_seconds,
        alarm_email=s.alarm_email,
        alarm_topic_arn=s.alarm_topic_arn,
    )
