"""No batch outgrows a STANDARD execution's 25,000 history events.

The child workflow (statemachine/copy_batch.asl.json) writes history events for every pass
it goes round and, if its large objects ran in the child itself, for every one of them and
its retries. These tests bound both: the worst case worked out from the rendered ASL's
Retry blocks at the largest settings the stack accepts (tests/pipeline/child_history.py
says what each state writes), and real executions in moto, with parent_harness giving each
child execution of a Distributed Map its own history and running each Fargate task's real
`handlers.copy_large.main()` in-process.
"""

from __future__ import annotations

import copy
import io
import json
import os
import time
import zipfile
from collections import Counter
from dataclasses import replace
from typing import Any

import boto3
import pytest
from child_history import (
    HISTORY_LIMIT,
    execution_events,
    longest_path,
    nested_machines,
    state_events,
)
from parent_harness import FargateTasks, LambdaRouter, ParentHarness

from conftest import PIPELINE_REPORTS, PIPELINE_TABLE, FakeLambdaContext
from ferry.errors import ConfigError
from ferry.pipeline.history_keys import MAX_LISTING_RUNS
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from ferry.pipeline.locations import Location
from ferry.pipeline.settings import PipelineSettings
from ferry_cdk.definition import child_definition, parent_definition
from handlers import copy_batch, prepare, record_failure

VALUES = {
    "CopyBatchFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:copy-batch",
    "RecordFailureFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:record-failure",
    "ClusterArn": "arn:aws:ecs:us-east-1:123456789012:cluster/ferry",
    "TaskDefinitionArn": "arn:aws:ecs:us-east-1:123456789012:task-definition/ferry:1",
    "ContainerName": "worker",
    "Subnets": ["subnet-1"],
    "SecurityGroups": ["sg-1"],
    "AssignPublicIp": "ENABLED",
    "CapacityProvider": "FARGATE_SPOT",
}
PARENT_VALUES = {
    **VALUES,
    "PrepareFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:prepare",
    "ListVersionsFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:list-versions",
    "FinalizeFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:finalize",
    "ReportBucket": "reports",
    "LedgerTable": "ledger",
}


def largest_accepted(name: str) -> int:
    """The largest value of setting `name` the stack accepts (PipelineSettings refuses more)."""
    base = PipelineSettings(sources=(Location("src"),), destinations=(Location("dst"),))
    low, high = getattr(base, name), 1
    while True:  # grow until refused
        high = max(high, low) * 2
        try:
            replace(base, **{name: high})
        except ConfigError:
            break
        low = high
    while high - low > 1:
        middle = (low + high) // 2
        try:
            replace(base, **{name: middle})
            low = middle
        except ConfigError:
            high = middle
    return low


# -- the worst case, from the ASL ----------------------------------------------------------------


def test_the_worst_case_history_of_every_execution_stays_under_25000_events_at_the_bounds() -> None:
    """At the most passes and the largest batch the settings accept, every task retried as
    often as its Retry blocks allow (read from the rendered ASL, so a change of MaxAttempts is
    checked again here), the child, each execution its Distributed Maps start, and the parent
    each write at most 25,000 history events."""
    passes = largest_accepted("max_passes")
    with pytest.raises(ConfigError, match=r"max_passes: .* history \(25,000 events\)"):
        PipelineSettings(sources=(Location("src"),), destinations=(Location("dst"),), max_passes=passes + 1)
    items = largest_accepted("max_items_per_batch")  # a batch's large objects, at most
    child = child_definition(VALUES)
    parent = parent_definition(PARENT_VALUES)

    per_pass = longest_path(child, passes=2, items=items) - longest_path(child, passes=1, items=items)
    worst = execution_events(child, passes=passes, items=items)
    assert worst <= HISTORY_LIMIT, (
        f"a batch of {items} objects over {passes} passes can write {worst} history events "
        f"(about {per_pass} a pass): over Step Functions' {HISTORY_LIMIT}"
    )
    nested = nested_machines(child)
    assert nested, "the large objects run in child executions of their own (a Distributed Map)"
    for name, machine in nested.items():
        events = execution_events(machine, passes=1, items=items)
        assert events <= HISTORY_LIMIT, f"a child execution of {name} can write {events} events"
    # The parent's one loop, ListVersions -> AllVersionsListed -> ListVersions, goes round at
    # most MAX_LISTING_RUNS times (test_version_listing_runs.py bounds it from the same ASL):
    # the parent without its back edge, plus every run of the loop at its worst.
    loop_free = copy.deepcopy(parent)
    listed = loop_free["States"]["AllVersionsListed"]
    listed["Choices"] = [c for c in listed["Choices"] if c["Next"] != "ListVersions"]
    per_run = state_events(parent["States"]["ListVersions"], items) + state_events(
        parent["States"]["AllVersionsListed"], items
    )
    assert execution_events(loop_free, passes=1, items=items) + MAX_LISTING_RUNS * per_run <= HISTORY_LIMIT
    for name, state in parent["States"].items():  # the child as each of the parent's Maps includes it
        if state["Type"] == "Map":
            assert execution_events(state["ItemProcessor"], passes=passes, items=items) == worst, name


def test_the_history_model_counts_retries_and_inline_items() -> None:
    """The model itself: a task retried by two Retriers writes 2 + 4 x (1 + both MaxAttempts);
    an INLINE Map writes per item; a DISTRIBUTED one does not."""
    task = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Retry": [{"ErrorEquals": ["A"], "MaxAttempts": 2}, {"ErrorEquals": ["B"]}],
        "End": True,
    }
    assert state_events(task, items=0) == 2 + 4 * (1 + 2 + 3)
    inline = {
        "Type": "Map",
        "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "T", "States": {"T": task}},
        "End": True,
    }
    assert state_events(inline, items=10) == 4 + 10 * (2 + 26)
    distributed = {
        **inline,
        "ItemProcessor": {**inline["ItemProcessor"], "ProcessorConfig": {"Mode": "DISTRIBUTED"}},
    }
    assert state_events(distributed, items=10) == 6
    step = {"Type": "Pass", "Next": "B"}
    looped = {"StartAt": "A", "States": {"A": step, "B": {"Type": "Pass", "Next": "A"}}}
    with pytest.raises(ValueError, match="no end is reachable"):
        longest_path(looped, passes=3, items=0)
    unbounded = {"StartAt": "S", "States": {"S": {"Type": "Pass", "Next": "A"}, **looped["States"]}}
    with pytest.raises(ValueError, match="no bound"):
        longest_path(unbounded, passes=3, items=0)
    loop = {
        "StartAt": "T",
        "States": {"T": {**task, "End": False, "Next": "P"}, "P": {"Type": "Pass", "Next": "T"}},
    }
    assert longest_path(loop, passes=3, items=0) == 3 * 26 + 2 * 2, "three passes, two turns"


# -- real executions in moto ---------------------------------------------------------------------

HANDLERS = {"copy-batch": copy_batch.handler, "record-failure": record_failure.handler}
RUN_TIMEOUT_S = 300


class BatchChild:
    """The child state machine in moto, run as a Distributed Map runs it, its Lambda tasks and
    Fargate tasks routed to the real handlers in-process."""

    def __init__(self, pipeline: Any, harness: ParentHarness, machine_arn: str) -> None:
        self.pipeline, self.harness, self.machine_arn = pipeline, harness, machine_arn
        self.sfn = boto3.client("stepfunctions", region_name="us-east-1")
        self.remaining_ms = 900_000  # the Lambda time each CopyBatch invocation starts with

    def run(self, items: list[dict[str, Any]], job: dict[str, Any]) -> dict[str, Any]:
        execution = self.sfn.start_execution(
            stateMachineArn=self.machine_arn, input=json.dumps({"Items": items, "BatchInput": {"job": job}})
        )
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < deadline:
            described = self.sfn.describe_execution(executionArn=execution["executionArn"])
            if described["status"] != "RUNNING":
                return described
            time.sleep(0.1)
        raise AssertionError(f"the child execution did not finish in {RUN_TIMEOUT_S} s")

    def history(self, execution_arn: str) -> list[dict[str, Any]]:
        """GetExecutionHistory's events, every page."""
        events: list[dict[str, Any]] = []
        request = {"executionArn": execution_arn, "maxResults": 1000}
        while True:
            page = self.sfn.get_execution_history(**request)
            events += page["events"]
            if not page.get("nextToken"):
                return events
            request["nextToken"] = page["nextToken"]


@pytest.fixture
def batch_child(pipeline, monkeypatch) -> BatchChild:
    """The child state machine as the CDK app renders it, created in moto with the harness
    installed; the Fargate tasks share one set of clients (thousands of them run)."""
    fargate_environment = {
        **pipeline.settings.worker_environment(fargate=True),
        "FERRY_TABLE": PIPELINE_TABLE,
        "FERRY_REPORT_BUCKET": PIPELINE_REPORTS,
    }
    holder: dict[str, BatchChild] = {}
    harness = ParentHarness(
        LambdaRouter(
            HANDLERS,
            context=lambda name, call: FakeLambdaContext(
                holder["child"].remaining_ms if name == "copy-batch" else 900_000
            ),
        ),
        FargateTasks(fargate_environment, shared_services=True),
    ).install(monkeypatch)
    iam = boto3.client("iam", region_name="us-east-1")
    role = iam.create_role(RoleName="ferry-child", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    awslambda = boto3.client("lambda", region_name="us-east-1")
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(
            "handler.py", "def handler(event, context):\n    raise RuntimeError('routed in-process')\n"
        )
    arns = {
        name: awslambda.create_function(
            FunctionName=name,
            Runtime="python3.13",
            Role=role,
            Handler="handler.handler",
            Code={"ZipFile": archive.getvalue()},
        )["FunctionArn"]
        for name in HANDLERS
    }
    definition = child_definition(
        {
            **VALUES,
            "CopyBatchFunctionArn": arns["copy-batch"],
            "RecordFailureFunctionArn": arns["record-failure"],
        }
    )
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    machine = sfn.create_state_machine(name="ferry-child", definition=json.dumps(definition), roleArn=role)[
        "stateMachineArn"
    ]
    holder["child"] = BatchChild(pipeline, harness, machine)
    return holder["child"]


def lower_large_object_threshold(child: BatchChild, monkeypatch: Any, threshold: int) -> None:
    """Objects above `threshold` bytes go to Fargate: the history is what is tested, so the
    large objects may be small."""
    monkeypatch.setenv("FERRY_LARGE_OBJECT_THRESHOLD", str(threshold))
    child.pipeline.services.cache_clear()
    child.harness.fargate.environment["FERRY_LARGE_OBJECT_THRESHOLD"] = str(threshold)


def start_job(spec: dict[str, Any], job_id: str) -> dict[str, Any]:
    job = prepare.handler({"spec": spec, "execution_name": job_id}, FakeLambdaContext())
    assert "rejected" not in job, job
    return job


def retries_of(machine: dict[str, Any], state: str, error: str) -> int:
    """MaxAttempts of the Retrier of `state` (at any depth) that matches `error`."""
    for name, found in machine["States"].items():
        if name == state:
            return next(r["MaxAttempts"] for r in found["Retry"] if error in r["ErrorEquals"])
        if "ItemProcessor" in found:
            try:
                return retries_of(found["ItemProcessor"], state, error)
            except LookupError:
                continue
    raise LookupError(f"no state {state} in the definition")


def put_dumps(s3: Any, count: int) -> list[dict[str, str]]:
    """`count` database dumps under dumps/ and a CSV manifest naming them with their sizes;
    the manifest's rows, as the Map hands them to a batch."""
    rows = [{"key": f"dumps/{n:05}.sql", "size": str(len(f"dump {n}"))} for n in range(count)]
    for n, row in enumerate(rows):
        s3.put_object(Bucket="src", Key=row["key"], Body=f"dump {n}".encode())
    csv = "key,size\n" + "".join(f"{r['key']},{r['size']}\n" for r in rows)
    s3.put_object(Bucket="src", Key="dumps.csv", Body=csv.encode())
    return rows


def every_key(s3: Any, bucket: str, prefix: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


LARGE_OBJECTS = 1_000
INTERRUPTED_EVERY = 10


@pytest.mark.slow
def test_a_batch_of_a_thousand_large_objects_pays_its_history_nothing_per_object(
    pipeline, batch_child, monkeypatch
) -> None:
    """A batch of 1,000 database dumps above the large-object threshold, every tenth one's
    Fargate task stopped before it copies (exit 75, as after a Spot interruption) as often as
    CopyLargeObject's Retry allows. Each object runs in a child execution of its own, whose
    history (GetExecutionHistory) holds its task's attempts; the batch's own history holds
    its pass and one Map Run, no more than the worst case of a batch with no large object
    (worked out from the ASL), so no count of large objects can outgrow it. Every history
    stays under 25,000 events, and every object is copied and counted once.

    (Run inside the batch's execution, each object wrote 8 events and each retry 4 more:
    1,000 such objects came to 10,420 events in the batch's history, 3,123 plain ones to more
    than 25,000.)"""
    from handlers import copy_large

    child = child_definition(VALUES)
    stops = retries_of(child, "CopyLargeObject", "States.TaskFailed")
    lower_large_object_threshold(batch_child, monkeypatch, 1)
    rows = put_dumps(pipeline.s3, LARGE_OBJECTS)
    interrupted = {row["key"] for row in rows[::INTERRUPTED_EVERY]}
    manifest = {"bucket": "src", "key": "dumps.csv", "format": "csv"}
    job = start_job(
        {"source": {"bucket": "src", "manifest": manifest}, "destination": {"bucket": "dst"}}, "dumps"
    )
    attempts: dict[str, int] = {}

    def spot_task() -> int:
        """The container: stopped at once while its object is to be interrupted, else the
        real entry point."""
        key = json.loads(os.environ["FERRY_ITEM"])["key"]
        attempts[key] = attempts.get(key, 0) + 1
        if key in interrupted and attempts[key] <= stops:
            return copy_large.EXIT_STOPPED
        return copy_large.main()

    batch_child.harness.fargate.main = spot_task

    described = batch_child.run(rows, job)

    assert described["status"] == "SUCCEEDED", described
    events = len(batch_child.history(described["executionArn"]))
    without_large_objects = execution_events(child, passes=1, items=0)
    assert events <= min(without_large_objects, HISTORY_LIMIT), (
        f"the batch's history grew with its {LARGE_OBJECTS} large objects: {events} events, where a "
        f"batch's pass with no large object writes at most {without_large_objects}"
    )
    children = list(batch_child.harness.children)
    assert len(children) == LARGE_OBJECTS, "each large object runs in a child execution of its own"
    per_object = Counter(len(batch_child.history(arn)) for arn in children)
    # ExecutionStarted, TaskStateEntered, 4 per attempt, TaskStateExited, ExecutionSucceeded
    assert per_object == {8: LARGE_OBJECTS - len(interrupted), 8 + 4 * stops: len(interrupted)}
    assert max(per_object) <= HISTORY_LIMIT
    assert attempts == {row["key"]: stops + 1 if row["key"] in interrupted else 1 for row in rows}
    tally = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).tally("dumps").to_dict()
    assert (tally["objects"], tally["copied"], tally["failed"]) == (LARGE_OBJECTS, LARGE_OBJECTS, 0), tally
    assert sorted(every_key(pipeline.s3, "dst", "dumps/")) == [row["key"] for row in rows]


def test_a_batch_that_needs_more_passes_than_max_passes_ends_on_fargate(
    pipeline, batch_child, monkeypatch
) -> None:
    """max_passes at the most the settings accept, and every CopyBatch pass starts with no
    Lambda time left (FakeLambdaContext at the deadline margin), so each hands its whole batch
    over. The last pass hands it to the Fargate task instead of going round again or failing
    it: every object is copied and counted once, and the batch's history stays under 25,000
    events, within the worst case worked out from the ASL."""
    passes = largest_accepted("max_passes")
    monkeypatch.setenv("FERRY_MAX_PASSES", str(passes))
    lower_large_object_threshold(batch_child, monkeypatch, 64)  # and one object over it from the start
    keys = [f"slow/{n}" for n in range(5)]
    for key in keys:
        pipeline.s3.put_object(Bucket="src", Key=key, Body=key.encode())
    pipeline.s3.put_object(Bucket="src", Key="slow/large", Body=b"L" * 100)
    job = start_job(
        {"source": {"bucket": "src", "prefix": "slow/"}, "destination": {"bucket": "dst"}}, "slow"
    )
    margin_ms = pipeline.settings.deadline_margin_seconds * 1000
    batch_child.remaining_ms = margin_ms
    items = [
        {"Key": o["Key"], "Size": o["Size"], "ETag": o["ETag"]}
        for o in pipeline.s3.list_objects_v2(Bucket="src", Prefix="slow/")["Contents"]
    ]

    described = batch_child.run(items, job)

    assert described["status"] == "SUCCEEDED", described
    copy_passes = [
        e for name, e in batch_child.harness.lambdas.calls if name == "copy-batch" and "handed_over" not in e
    ]
    assert len(copy_passes) == passes, "the pass loop ran to the bound, no further"
    tasks = sorted(
        json.loads(t["environment"]["FERRY_ITEM"])["Key"] for t in batch_child.harness.fargate.tasks
    )
    assert tasks == sorted([*keys, "slow/large"]), "the large object, then what the last pass left"
    tally = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).tally("slow").to_dict()
    assert (tally["objects"], tally["copied"], tally["failed"]) == (6, 6, 0), tally
    assert sorted(every_key(pipeline.s3, "dst", "")) == sorted(
        k.removeprefix("slow/") for k in [*keys, "slow/large"]
    )
    events = len(batch_child.history(described["executionArn"]))
    worst = execution_events(child_definition(VALUES), passes=passes, items=0)
    assert events <= min(worst, HISTORY_LIMIT), f"{events} events, the worst case {worst}"
