"""Continuous replication: per configured replication, S3 events -> a queue -> one job per batch.

    EventBridge rule (default bus, "Object Created" in the source bucket under its prefix)
      -> SQS queue (SSE-SQS, TLS only; dead-letter queue after MAX_RECEIVE_COUNT receives)
      -> starter Lambda (event source mapping: batch_size, batch_window_seconds,
         max_concurrent_batches, ReportBatchItemFailures)
      -> one manifest in the report bucket, one parent execution.

The stack does not own the source bucket: sending its events to EventBridge is the user's one
call (README, "Continuous replication"). The starter may start executions of this stack's
state machine and write event manifests under `jobs/<replication name>-*/`, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from ferry.pipeline.replication.config import (
    MANIFEST_NAME,
    STARTER_TIMEOUT_WITH_DELETES_SECONDS,
    Replication,
    event_key_prefixes,
)
from ferry.pipeline.settings import PipelineSettings

from . import nag
from .access import bucket_arn, iam_escape, statement
from .deletes import deleted_detail_types, deletes_statements
from .reach import location_reach_statements

# A manifest of up to 10,000 rows and one StartExecution, and the look-ups of keys with two
# spellings that fit: the starter holds a batch within this (its context's remaining time is its
# deadline) and returns what it could not look up as batch item failures (starter_lookups).
STARTER_TIMEOUT_SECONDS = 120
# With deletes on, each deletion is a few sequential requests (HEAD source, HEAD destination,
# GetItem, DeleteObject, DeleteItem): Lambda's longest timeout (STARTER_TIMEOUT_WITH_DELETES_SECONDS),
# and batch_size is bounded for it (replication.config). A batch that still runs out returns
# whole to the queue; every step is safe to repeat (a deleted key is then "already absent").
STARTER_MEMORY_MB = 1024  # a batch's payload is up to 6 MB of JSON (Lambda's invoke limit)
# AWS recommends a maxReceiveCount of at least 5 for queues Lambda reads, so that a batch
# throttled or failed a few times does not reach the dead-letter queue (Lambda developer guide,
# SQS error handling; seen here only second-hand, not on the page itself).
MAX_RECEIVE_COUNT = 5
# A standard queue's message expires counting from its first send, also in the dead-letter
# queue (SQS developer guide, setting-up-dead-letter-queue-retention): the dead-letter queue
# keeps SQS's longest, 14 days, and the events queue half of it, so a message that waited its
# whole time in the events queue still has 7 days in the dead-letter queue to be read and
# redriven. The oldest-event alarm fires long before an event waits 7 days.
DLQ_RETENTION = cdk.Duration.days(14)
QUEUE_RETENTION = cdk.Duration.days(7)


class FerryStack(Protocol):
    """What this module reads of the stack (a protocol, so it imports nothing above it)."""

    settings: PipelineSettings
    report_bucket: s3.Bucket
    table: dynamodb.Table
    state_machine: sfn.StateMachine
    functions: dict[str, lambda_.Function]
    retention: logs.RetentionDays
    lambda_code: lambda_.Code
    lambda_layer: lambda_.LayerVersion
    lambda_runtime: lambda_.Runtime
    lambda_architecture: lambda_.Architecture
    node: Any

    def resolve(self, obj: Any) -> Any: ...


@dataclass(frozen=True)
class ReplicationQueues:
    """A replication's pieces, for alarms and dashboards: its queue and dead-letter queue."""

    queue: sqs.Queue
    dlq: sqs.Queue
    rule: events.Rule
    starter: lambda_.Function


def add_replications(stack: FerryStack) -> dict[str, ReplicationQueues]:
    """Every configured replication's rule, queues and starter, by replication name."""
    built = {r.name: _replication(stack, r) for r in stack.settings.replications}
    if built:
        # Prepare checks each job's manifest (HeadObject) before the Map reads it.
        prepare = stack.functions["Prepare"]
        manifests = [_manifest_arn(stack, r) for r in stack.settings.replications]
        prepare.add_to_role_policy(statement("ReadEventManifests", ["s3:GetObject"], manifests))
        for r in stack.settings.replications:
            _acknowledge_manifests(stack, prepare, r, "reads")
    return built


def event_pattern(replication: Replication) -> events.EventPattern:
    """S3's "Object Created" events of the source bucket, under the source prefix ("Object
    Deleted" too when the replication's deletes are on: ferry_cdk.deletes).

    S3's classic notifications URL-encode keys (spaces as '+'); the EventBridge page does not
    say, and a captured event has been seen with ':' left as is. So the prefix is matched in
    both forms (the same when encoding leaves it alone): a wrong guess must not drop every
    event under the prefix. The starter checks every form of the key again
    (ferry.pipeline.replication.event_keys) and fails an event none of whose forms is under the prefix.
    """
    detail: dict[str, Any] = {"bucket": {"name": [replication.source.bucket]}}
    if replication.source.prefix:
        forms = event_key_prefixes(replication.source.prefix)
        detail["object"] = {"key": [{"prefix": form} for form in forms]}
    return events.EventPattern(
        source=["aws.s3"], detail_type=["Object Created", *deleted_detail_types(replication)], detail=detail
    )


def _replication(stack: FerryStack, r: Replication) -> ReplicationQueues:
    scope = Construct(stack, f"Replication-{r.name}")  # type: ignore[arg-type]
    dlq = sqs.Queue(
        scope,
        "DeadLetters",
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=DLQ_RETENTION,
    )
    queue = sqs.Queue(
        scope,
        "Events",
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=QUEUE_RETENTION,
        # At least six times the function's timeout (plus the batching window): Lambda may
        # retry a throttled batch within it (Lambda developer guide, services-sqs-configure.html).
        visibility_timeout=cdk.Duration.seconds(6 * _timeout(r) + r.batch_window_seconds),
        dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=MAX_RECEIVE_COUNT),
    )
    rule = events.Rule(
        scope,
        "ObjectCreated",
        description=f"Ferry replication {r.name}: new objects in s3://{r.source.bucket}/{r.source.prefix}",
        event_pattern=event_pattern(r),
    )
    # Events EventBridge cannot deliver to the queue (after its retries) land in the
    # dead-letter queue too: nothing is lost without a trace.
    rule.add_target(targets.SqsQueue(queue, dead_letter_queue=dlq))
    starter = _starter(stack, scope, r)
    starter.add_event_source(
        event_sources.SqsEventSource(
            queue,
            batch_size=r.batch_size,
            max_batching_window=cdk.Duration.seconds(r.batch_window_seconds)
            if r.batch_window_seconds
            else None,
            report_batch_item_failures=True,
            # A burst waits in the queue for a bounded number of starters, in full batches,
            # instead of spreading into many small ones, each a whole job.
            max_concurrency=r.max_concurrent_batches,
        )
    )
    return ReplicationQueues(queue=queue, dlq=dlq, rule=rule, starter=starter)


def _starter(stack: FerryStack, scope: Construct, r: Replication) -> lambda_.Function:
    log_group = logs.LogGroup(scope, "StarterLogs", retention=stack.retention)
    role = iam.Role(
        scope,
        "StarterRole",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=f"Ferry replication {r.name}: starts one job per event batch",
    )
    log_group.grant_write(role)
    starter = lambda_.Function(
        scope,
        "Starter",
        description=f"Ferry: replication {r.name}, one job per batch of S3 events",
        runtime=stack.lambda_runtime,
        architecture=stack.lambda_architecture,
        handler="handlers.start_replication.handler",
        code=stack.lambda_code,
        layers=[stack.lambda_layer],
        memory_size=STARTER_MEMORY_MB,
        timeout=cdk.Duration.seconds(_timeout(r)),
        environment={
            "FERRY_REPLICATION": r.to_environment(),  # its locations whole: how to reach them too
            **({"FERRY_TABLE": stack.table.table_name} if r.deletes else {}),  # the copy records
            "FERRY_REPORT_BUCKET": stack.report_bucket.bucket_name,
            "FERRY_STATE_MACHINE_ARN": stack.state_machine.state_machine_arn,
            "POWERTOOLS_SERVICE_NAME": "ferry",
            "POWERTOOLS_METRICS_NAMESPACE": "Ferry",
        },
        tracing=lambda_.Tracing.ACTIVE,
        log_group=log_group,
        role=role,
    )
    starter.add_to_role_policy(
        statement("StartJobs", ["states:StartExecution"], [stack.state_machine.state_machine_arn])
    )
    starter.add_to_role_policy(statement("WriteEventManifests", ["s3:PutObject"], [_manifest_arn(stack, r)]))
    nag.ack(
        starter,
        "AwsSolutions-L1",
        f"The starter runs the lambda_runtime setting ({stack.settings.lambda_runtime}), like every Ferry "
        "function: the dependency layer is built and tested for that Python version.",
    )
    _acknowledge_manifests(stack, starter, r, "writes")
    if r.deletes:
        _grant_deletes(stack, starter, r)
    else:
        _grant_key_listing(stack, starter, r)
    return starter


def _grant_key_listing(stack: FerryStack, starter: lambda_.Function, r: Replication) -> None:
    """Listing the source under its prefix, and reaching it as the workers do: an event key
    with two possible spellings is resolved against the source (ferry.pipeline.replication.event_keys).
    With deletes on, the delete grants hold this already."""
    source = r.source
    starter.add_to_role_policy(
        iam.PolicyStatement(
            sid="ResolveEventKeys",
            actions=["s3:ListBucket"],
            resources=[bucket_arn(source.bucket)],
            conditions=(
                {"StringLike": {"s3:prefix": [iam_escape(source.prefix) + "*"]}} if source.prefix else None
            ),
        )
    )
    for st in location_reach_statements(stack, (source,), stack.settings):  # type: ignore[arg-type]
        starter.add_to_role_policy(st)


def _timeout(r: Replication) -> int:
    return STARTER_TIMEOUT_WITH_DELETES_SECONDS if r.deletes else STARTER_TIMEOUT_SECONDS


def _grant_deletes(stack: FerryStack, starter: lambda_.Function, r: Replication) -> None:
    """What apply_deletes needs (ferry_cdk.deletes: the prefixes' objects, listings limited to
    them, the copy records) and how to reach the two locations (ferry_cdk.reach: their role or
    secret), acknowledging the two prefix wildcards by name."""
    for st in (
        *deletes_statements(r, table_arn=stack.table.table_arn),
        *location_reach_statements(stack, (r.source, r.destination), stack.settings),  # type: ignore[arg-type]
    ):
        starter.add_to_role_policy(st)
    policy = starter.role.node.try_find_child("DefaultPolicy") if starter.role else None
    if policy is None:
        return
    for side, loc, actions in (
        ("source", r.source, "reads (is the key back? which version does a delete marker hide?)"),
        (
            "destination",
            r.destination,
            "reads and deletes (plain deletes: a versioned destination keeps every version)",
        ),
    ):
        flat = nag._flat_sub(f"arn:<AWS::Partition>:s3:::{loc.bucket}/{iam_escape(loc.prefix)}*")
        nag.ack(
            policy,
            f"AwsSolutions-IAM5[Resource::{flat}]",
            f"Objects under replication {r.name}'s {side} s3://{loc.bucket}/{loc.prefix}: the starter "
            f"{actions} only keys whose deletion it handles, and a key-prefix ARN is how IAM limits it to that prefix.",
        )


def _manifest_arn(stack: FerryStack, r: Replication) -> str:
    return f"{stack.report_bucket.bucket_arn}/jobs/{r.name}-*/{MANIFEST_NAME}"


def _acknowledge_manifests(stack: FerryStack, function: lambda_.Function, r: Replication, verb: str) -> None:
    policy = function.role.node.try_find_child("DefaultPolicy") if function.role else None
    if policy is None:
        return
    flat = nag._flatten(stack.resolve(_manifest_arn(stack, r)))
    nag.ack(
        policy,
        f"AwsSolutions-IAM5[Resource::{flat}]",
        f"The function {verb} the event manifests of replication {r.name} only: one object per event "
        f"batch, jobs/{r.name}-<batch hash>/{MANIFEST_NAME} in Ferry's own report bucket, named at run time.",
    )
