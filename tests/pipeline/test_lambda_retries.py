"""Every Lambda a state machine invokes is retried on the errors AWS names as the Lambda
service's own, transient ones ("Handle transient Lambda service exceptions", Step Functions
developer guide): a job must not fail because one invocation met them. Each step is safe to
run again: CopyBatch counts a pass once (its ledger marker), Finalize settles a job once,
RecordFailure records a pass once, and Prepare's job is its execution's own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

STATEMACHINE = Path(__file__).resolve().parents[2] / "statemachine"
TRANSIENT = {
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.ClientExecutionTimeoutException",
}


def lambda_tasks(states: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in states.items():
        if state.get("Type") == "Task" and state.get("Resource") == "arn:aws:states:::lambda:invoke":
            yield name, state
        if isinstance(state.get("ItemProcessor"), dict):  # (the parent's is copy_batch.asl.json)
            yield from lambda_tasks(state["ItemProcessor"]["States"])
        for branch in state.get("Branches", []):
            yield from lambda_tasks(branch["States"])


@pytest.mark.parametrize("file", ["ferry.asl.json", "copy_batch.asl.json"])
def test_every_lambda_task_retries_the_lambda_services_transient_errors(file: str) -> None:
    definition = json.loads((STATEMACHINE / file).read_text())
    tasks = dict(lambda_tasks(definition["States"]))
    assert tasks, file
    for name, state in tasks.items():
        retried = {error for rule in state.get("Retry", []) for error in rule["ErrorEquals"]}
        assert "States.ALL" in retried or retried >= TRANSIENT, (file, name, sorted(TRANSIENT - retried))
