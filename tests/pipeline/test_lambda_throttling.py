"""A throttled Lambda invoke (`Lambda.TooManyRequestsException`: no free slot in the account's
or the function's concurrency) is waited out, never turned into failed objects.

A CopyBatch pass holds its slot for up to 15 minutes (the Lambda timeout the stack gives it, the
longest Lambda allows), so every Lambda task of both state machines, as the CDK app renders
them (cdk/ferry_cdk/definition.py), must keep retrying a throttled invoke for longer than
that. Step Functions waits IntervalSeconds x BackoffRate^n before retry n+1, at most
MaxDelaySeconds; with JitterStrategy FULL each wait is drawn uniformly from 0 to that (CDK's
JitterType: "a random number between 0 and the computed backoff"). The waits are computed
here from the definitions, at the real 15 minutes, and so is what they add to the execution's
history (about 3 events a retry: scheduled, started, failed)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

import pytest

from ferry_cdk.definition import child_definition, parent_definition

THROTTLED = "Lambda.TooManyRequestsException"
PASS_HOLDS_SLOT = 15 * 60  # seconds: Lambda's longest invocation, the CopyBatch function's timeout
MISS_CHANCE = 0.01  # at most 1 in 100 throttled tasks may stop retrying before 15 minutes
EVENTS_PER_RETRY = 3
MAX_THROTTLE_EVENTS = 100  # per task: the child's history is bounded at 25,000 events
VALUES = {
    "PrepareFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:prepare",
    "ListVersionsFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:list-versions",
    "CopyBatchFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:copy-batch",
    "RecordFailureFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:record-failure",
    "FinalizeFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:finalize",
    "ReportBucket": "reports",
    "LedgerTable": "ledger",
    "ClusterArn": "arn:aws:ecs:us-east-1:123456789012:cluster/ferry",
    "TaskDefinitionArn": "arn:aws:ecs:us-east-1:123456789012:task-definition/ferry:1",
    "ContainerName": "worker",
    "Subnets": ["subnet-1"],
    "SecurityGroups": ["sg-1"],
    "AssignPublicIp": "ENABLED",
    "CapacityProvider": "FARGATE_SPOT",
}
PARENT_ONLY = (
    "PrepareFunctionArn",
    "ListVersionsFunctionArn",
    "FinalizeFunctionArn",
    "ReportBucket",
    "LedgerTable",
)
CHILD_VALUES = {k: v for k, v in VALUES.items() if k not in PARENT_ONLY}


def rendered() -> dict[str, dict[str, Any]]:
    return {"child": child_definition(CHILD_VALUES), "parent": parent_definition(VALUES)}


def lambda_tasks(states: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every Lambda task, at every depth (the Maps' children, the large objects' inline Map)."""
    for name, state in states.items():
        if state.get("Type") == "Task" and state.get("Resource") == "arn:aws:states:::lambda:invoke":
            yield name, state
        if isinstance(state.get("ItemProcessor"), dict):
            yield from lambda_tasks(state["ItemProcessor"]["States"])


def throttle_retrier(state: dict[str, Any]) -> dict[str, Any] | None:
    """The retrier Step Functions applies to a throttled invoke: the first that names the error,
    States.TaskFailed (any task failure) or States.ALL."""
    for rule in state.get("Retry", []):
        if {THROTTLED, "States.TaskFailed", "States.ALL"} & set(rule["ErrorEquals"]):
            return rule
    return None


def waits(rule: dict[str, Any]) -> list[float]:
    """The longest wait before each retry (ASL defaults: 1 s, rate 2.0, 3 attempts, no cap)."""
    interval, rate = rule.get("IntervalSeconds", 1), rule.get("BackoffRate", 2.0)
    cap = rule.get("MaxDelaySeconds", math.inf)
    return [min(interval * rate**n, cap) for n in range(rule.get("MaxAttempts", 3))]


def expected_wait(rule: dict[str, Any]) -> float:
    """The retries' total wait on average: with full jitter, half of each wait."""
    full = rule.get("JitterStrategy") == "FULL"
    return sum(w / 2 if full else w for w in waits(rule))


def chance_shorter_than(rule: dict[str, Any], seconds: float) -> float:
    """An upper bound on the chance that the jittered waits add up to less than `seconds`
    (Chernoff: P(S <= a) <= e^(s*a) * prod E[e^(-s*W_i)], W_i uniform on [0, w_i], for every
    s > 0; the smallest over a grid of s)."""
    if rule.get("JitterStrategy") != "FULL":
        return 0.0 if sum(waits(rule)) >= seconds else 1.0
    best = 1.0
    for step in range(1, 5000):
        s = step * 1e-4
        log_bound = s * seconds + sum(math.log((1 - math.exp(-s * w)) / (s * w)) for w in waits(rule))
        best = min(best, math.exp(log_bound))
    return best


def every_lambda_task() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (machine, name, state)
        for machine, definition in rendered().items()
        for name, state in lambda_tasks(definition["States"])
    ]


def each_task() -> list[Any]:
    return [pytest.param(m, n, s, id=f"{m}: {n}") for m, n, s in every_lambda_task()]


def test_both_machines_have_their_lambda_tasks() -> None:
    names = {(machine, name.split(" (")[0]) for machine, name, _ in every_lambda_task()}
    assert names >= {
        ("child", "CopyBatch"),
        ("child", "ResumeHandOver"),
        ("child", "RecordFailedBatch"),
        ("child", "RecordFailedLargeObject"),
        ("parent", "Prepare"),
        ("parent", "Finalize"),
        ("parent", "CopyBatch"),  # the child, included in each of the parent's Maps
    }


@pytest.mark.parametrize(("machine", "name", "state"), each_task())
def test_every_lambda_task_waits_out_a_throttle_longer_than_a_pass_holds_its_slot(
    machine: str, name: str, state: dict[str, Any]
) -> None:
    rule = throttle_retrier(state)
    assert rule is not None, f"{machine} {name}: a throttled invoke fails at once"
    assert rule.get("JitterStrategy") == "FULL", f"{machine} {name}: throttled children retry in step"
    average = expected_wait(rule)
    assert average >= PASS_HOLDS_SLOT, (
        f"{machine} {name}: a throttled invoke is retried for {average:,.0f} s on average, "
        f"less than the {PASS_HOLDS_SLOT} s a pass may hold the slot it waits for"
    )
    miss = chance_shorter_than(rule, PASS_HOLDS_SLOT)
    assert miss <= MISS_CHANCE, f"{machine} {name}: gives up before 15 minutes with a chance up to {miss:.2%}"
    events = EVENTS_PER_RETRY * rule["MaxAttempts"]
    assert events <= MAX_THROTTLE_EVENTS, f"{machine} {name}: {events} history events of throttle retries"


def test_the_retriers_comment_states_the_arithmetic() -> None:
    """The throttle retrier's Comment gives its numbers; they are the ones computed here."""
    for machine, name, state in every_lambda_task():
        rule = throttle_retrier(state)
        assert rule is not None and THROTTLED in rule["ErrorEquals"], (machine, name)
        comment = rule.get("Comment", "")
        nominal, average = sum(waits(rule)), expected_wait(rule)
        assert f"{nominal:,.0f} s in all" in comment, (machine, name, nominal)
        assert f"{average:,.0f} s ({average / 60:.0f} min) on average" in comment, (machine, name, average)
        bound = re.search(r"chance below ([0-9.]+)%", comment)
        assert bound and chance_shorter_than(rule, PASS_HOLDS_SLOT) <= float(bound.group(1)) / 100
        assert f"at most {EVENTS_PER_RETRY * rule['MaxAttempts']} for this task" in comment
