"""Recurring syncs: one EventBridge Scheduler schedule per configured `schedules` entry, each
invoking the scheduled-start Lambda (handlers/start_scheduled.py) with its name, the fire's
scheduled time and its stored job spec; the Lambda starts the parent state machine unless the
schedule's previous run is still going (ferry.pipeline.scheduled says how).

Scheduler's execution role may invoke that one function (its unqualified ARN) and send to the
schedules' dead-letter queue, nothing else; the function may StartExecution and ListExecutions
on the parent state machine only, and send to the same dead-letter queue.

Scheduler invokes the function asynchronously: its retry policy and dead-letter queue cover
the Invoke call only (throttled, refused). A fire the function itself fails on is Lambda's to
retry: twice, then the event is discarded unless the function has an on-failure destination
(Lambda developer guide, invocation-async-error-handling). So the function's own async
configuration sends such a fire to the schedules' dead-letter queue too: no fire is lost
without a message and an alarm. Retrying is safe: a fire starts at most one run (its
execution name).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from ferry.pipeline.scheduled import Schedule

from . import nag

# Scheduler retries a fire it could not deliver (a throttled or failed Invoke) with backoff for up
# to this long, then puts it in the dead-letter queue (Scheduler API reference, RetryPolicy:
# MaximumEventAgeInSeconds 60 to 86400, MaximumRetryAttempts 0 to 185). An hour late is still a
# useful nightly sync; the fire's name keeps its scheduled time, so a late start is visible.
MAX_EVENT_AGE = cdk.Duration.hours(1)
RETRY_ATTEMPTS = 20
# Lambda's own retries of a fire the function failed on (0 to 2; PutFunctionEventInvokeConfig)
# and how long a fire may wait in Lambda's async queue (throttled): the same hour as above.
FUNCTION_RETRY_ATTEMPTS = 2


class LambdaParts(Protocol):
    """What the stack shares with every function it makes (code asset, layer, runtime)."""

    lambda_code: lambda_.Code
    lambda_layer: lambda_.ILayerVersion
    lambda_runtime: lambda_.Runtime
    lambda_architecture: lambda_.Architecture
    retention: logs.RetentionDays
    worker_env: dict[str, str]


@dataclass
class RecurringSyncs:
    function: lambda_.Function
    dead_letter_queue: sqs.Queue
    role: iam.Role
    schedules: dict[str, scheduler.Schedule]


def add_recurring_syncs(
    scope: Construct, parts: LambdaParts, state_machine: sfn.StateMachine, schedules: tuple[Schedule, ...]
) -> RecurringSyncs | None:
    """The schedules, their starter function, role and dead-letter queue; None when there are none."""
    if not schedules:
        return None
    root = Construct(scope, "RecurringSyncs")
    function = _starter(root, parts, state_machine)
    dead_letters = sqs.Queue(
        root,
        "DeadLetters",
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=cdk.Duration.days(14),
    )
    nag.ack(
        dead_letters,
        "AwsSolutions-SQS3",
        "This queue is itself the dead-letter queue of the recurring-sync schedules: it holds fires "
        "EventBridge Scheduler could not deliver and fires the starter failed on, for inspection; an "
        "alarm fires on its first message.",
    )
    _send_failed_fires(function, dead_letters)
    role = iam.Role(
        root,
        "SchedulerRole",
        assumed_by=iam.ServicePrincipal(
            "scheduler.amazonaws.com",
            conditions={"StringEquals": {"aws:SourceAccount": cdk.Stack.of(scope).account}},
        ),
        description="EventBridge Scheduler: invoke Ferry's scheduled-start function",
    )
    role.add_to_policy(
        iam.PolicyStatement(
            sid="InvokeScheduledStart", actions=["lambda:InvokeFunction"], resources=[function.function_arn]
        )
    )
    made = {}
    for schedule in schedules:
        time_zone = cdk.TimeZone.of(schedule.timezone) if schedule.timezone else None
        made[schedule.name] = scheduler.Schedule(
            root,
            f"Schedule-{schedule.name}",
            description=f"Ferry recurring sync '{schedule.name}'",
            schedule=scheduler.ScheduleExpression.expression(schedule.expression, time_zone),
            time_window=scheduler.TimeWindow.off(),
            target=_Target(
                function,
                input=scheduler.ScheduleTargetInput.from_object(
                    schedule.target_input(scheduler.ContextAttribute.scheduled_time)
                ),
                dead_letter_queue=dead_letters,
                max_event_age=MAX_EVENT_AGE,
                retry_attempts=RETRY_ATTEMPTS,
                role=role,
            ),
        )
    return RecurringSyncs(function, dead_letters, role, made)


class _Target(targets.LambdaInvoke):
    """LambdaInvoke without its invoke grant, which covers `<function>:*` (every version and
    alias) too: the role above names the function's own ARN only. The base target still grants
    sqs:SendMessage on the dead-letter queue, which Scheduler needs to put a fire there."""

    def _add_target_action_to_role(self, role: iam.IRole) -> None:
        return None


def _send_failed_fires(function: lambda_.Function, dead_letters: sqs.Queue) -> None:
    """Lambda's on-failure destination for the asynchronous invokes Scheduler makes: a fire
    the function failed on (after Lambda's retries) or that waited too long is recorded in the
    dead-letter queue, with the request and the error, instead of being discarded."""
    function.configure_async_invoke(
        on_failure=destinations.SqsDestination(dead_letters),
        retry_attempts=FUNCTION_RETRY_ATTEMPTS,
        max_event_age=MAX_EVENT_AGE,
    )


def _starter(root: Construct, parts: LambdaParts, state_machine: sfn.StateMachine) -> lambda_.Function:
    log_group = logs.LogGroup(root, "StartScheduledLogs", retention=parts.retention)
    role = iam.Role(
        root,
        "StartScheduledRole",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description="Ferry scheduled-start function",
    )
    log_group.grant_write(role)
    function = lambda_.Function(
        root,
        "StartScheduled",
        description="Ferry: starts a recurring sync unless its previous run is still going",
        runtime=parts.lambda_runtime,
        architecture=parts.lambda_architecture,
        handler="handlers.start_scheduled.handler",
        code=parts.lambda_code,
        layers=[parts.lambda_layer],
        memory_size=256,
        timeout=cdk.Duration.minutes(1),
        environment={
            "FERRY_STATE_MACHINE_ARN": state_machine.state_machine_arn,
            "POWERTOOLS_SERVICE_NAME": parts.worker_env["POWERTOOLS_SERVICE_NAME"],
            "POWERTOOLS_METRICS_NAMESPACE": parts.worker_env["POWERTOOLS_METRICS_NAMESPACE"],
        },
        tracing=lambda_.Tracing.ACTIVE,
        log_group=log_group,
        role=role,
    )
    function.add_to_role_policy(
        iam.PolicyStatement(
            sid="StartAndListRuns",
            actions=["states:StartExecution", "states:ListExecutions"],
            resources=[state_machine.state_machine_arn],
        )
    )
    nag.ack(
        function,
        "AwsSolutions-L1",
        "The scheduled-start function runs the lambda_runtime setting, the Python version the "
        "dependency layer is built and tested for, like every other Ferry function; a newer runtime "
        "is taken by changing that one setting.",
    )
    return function
