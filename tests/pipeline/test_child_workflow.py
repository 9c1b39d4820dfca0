"""The child workflow (statemachine/copy_batch.asl.json, as the CDK app renders it) executed by
moto's Step Functions interpreter, its Lambda tasks running the real handlers in-process.

moto cannot run the parent (it rejects ItemBatcher), so each test feeds the child what a
Distributed Map gives it: `{"Items": [...], "BatchInput": {"job": ...}}`. The assertions are
on the execution's output and on the ledger, never on SUCCEEDED alone (moto reports a
Lambda task that could not run as a success with null output).
"""

from __future__ import annotations

import io
import json
import time
import traceback
import zipfile
from collections.abc import Callable
from typing import Any

import boto3
import pytest

from conftest import PIPELINE_TABLE, FakeLambdaContext
from ferry import clients
from ferry.pipeline.ledger import DynamoLedger
from ferry_cdk.definition import child_definition
from handlers import copy_batch, prepare, record_failure

MiB = 1024 * 1024
HANDLERS = {"copy-batch": copy_batch.handler, "record-failure": record_failure.handler}


class RoutedLambdas:
    """Replaces moto's no-Docker Lambda so each invocation runs the real handler here.

    `remaining_ms` decides each invocation's Lambda time left (by call number), which is how
    a test makes a pass reach its deadline."""

    def __init__(self, remaining_ms: Callable[[int], int] = lambda n: 900_000) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.remaining_ms = remaining_ms

    def invoke(
        self, backend: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any
    ) -> bytes:
        name = function_name.rsplit(":", 1)[-1]
        event = json.loads(body)
        self.calls.append((name, event))
        context = FakeLambdaContext(self.remaining_ms(len(self.calls)))
        try:
            return json.dumps(HANDLERS[name](event, context)).encode()
        except Exception as error:
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps(
                {
                    "errorType": type(error).__name__,
                    "errorMessage": str(error),
                    "stackTrace": traceback.format_exc().splitlines(),
                }
            ).encode()


@pytest.fixture
def child(pipeline, monkeypatch):
    """The child state machine created in moto with the handlers behind its Lambda ARNs."""
    from moto.awslambda_simple.models import LambdaSimpleBackend

    routed = RoutedLambdas()
    monkeypatch.setattr(
        LambdaSimpleBackend,
        "invoke",
        lambda self, function_name, qualifier, body, headers, response_headers: routed.invoke(
            self, function_name, qualifier, body, headers, response_headers
        ),
    )
    iam = boto3.client("iam", region_name="us-east-1")
    role = iam.create_role(RoleName="ferry-test", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    awslambda = boto3.client("lambda", region_name="us-east-1")
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("handler.py", "def handler(event, context):\n    return event\n")
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
            "CopyBatchFunctionArn": arns["copy-batch"],
            "RecordFailureFunctionArn": arns["record-failure"],
            "ClusterArn": "arn:aws:ecs:us-east-1:123456789012:cluster/ferry",
            "TaskDefinitionArn": "arn:aws:ecs:us-east-1:123456789012:task-definition/ferry:1",
            "ContainerName": "worker",
            "Subnets": ["subnet-1"],
            "SecurityGroups": ["sg-1"],
            "AssignPublicIp": "ENABLED",
            "CapacityProvider": "FARGATE_SPOT",
        }
    )
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    machine = sfn.create_state_machine(name="ferry-child", definition=json.dumps(definition), roleArn=role)[
        "stateMachineArn"
    ]

    def run(items: list[dict[str, Any]], job: dict[str, Any]) -> dict[str, Any]:
        execution = sfn.start_execution(
            stateMachineArn=machine, input=json.dumps({"Items": items, "BatchInput": {"job": job}})
        )
        for _ in range(600):
            described = sfn.describe_execution(executionArn=execution["executionArn"])
            if described["status"] != "RUNNING":
                return described
            time.sleep(0.1)
        raise AssertionError("the child execution did not finish in 60 s")

    routed.run = run  # type: ignore[attr-defined]
    return routed


def start_job(spec: dict[str, Any]) -> dict[str, Any]:
    job = prepare.handler({"spec": spec, "execution_name": "job-1"}, FakeLambdaContext())
    assert "rejected" not in job, job
    return job


def items_of(s3: Any, bucket: str, prefix: str) -> list[dict[str, Any]]:
    contents = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]
    return [{"Key": o["Key"], "Size": o["Size"], "ETag": o["ETag"]} for o in contents]


def test_a_batch_of_small_objects_is_copied_and_counted(pipeline, child) -> None:
    for n in range(25):
        pipeline.s3.put_object(Bucket="src", Key=f"in/{n:02}", Body=b"x" * n)
    pipeline.s3.put_object(Bucket="src", Key="in/skip.tmp", Body=b"tmp")
    job = start_job(
        {
            "source": {"bucket": "src", "prefix": "in/"},
            "destination": {"bucket": "dst", "prefix": "out/"},
            "options": {"exclude": ["*.tmp"]},
        }
    )

    described = child.run(items_of(pipeline.s3, "src", "in/"), job)

    assert described["status"] == "SUCCEEDED", described
    output = json.loads(described["output"])
    assert output["counts"] == {
        "objects": 26,
        "copied": 25,
        "skipped": 1,
        "failed": 0,
        "pending": 0,
        "bytes_copied": sum(range(25)),
    }
    assert [name for name, _ in child.calls] == ["copy-batch"]
    ledger = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).job("job-1")
    assert (ledger["objects"], ledger["copied"], ledger["skipped"], ledger["batches"]) == (26, 25, 1, 1)
    keys = {o["Key"] for o in pipeline.s3.list_objects_v2(Bucket="dst")["Contents"]}
    assert keys == {f"out/{n:02}" for n in range(25)}


def test_a_large_object_is_checkpointed_at_the_deadline_and_finished_in_a_second_pass(
    pipeline, child, monkeypatch
) -> None:
    """Streamed in 5 MiB parts with room for two at a time, each UploadPart slowed to 4 s: the
    first pass's deadline (3 s after it starts) falls after parts 1-2 start and before a slot
    frees for part 3, so it checkpoints 2 of 4 parts; the second pass resumes and uploads only
    parts 3 and 4."""
    data = bytes(range(256)) * (20 * MiB // 256)
    pipeline.s3.put_object(Bucket="src", Key="big/object.bin", Body=data)
    pipeline.s3.put_object(Bucket="src", Key="big/small.txt", Body=b"small")
    job = start_job(
        {
            "source": {"bucket": "src", "prefix": "big"},
            "destination": {"bucket": "dst"},
            "options": {"mode": "stream", "part_size": "5MiB"},
        }
    )
    monkeypatch.setenv("FERRY_MEMORY_LIMIT", str(10 * MiB))
    from handlers import runtime

    runtime.services.cache_clear()
    margin = pipeline.settings.deadline_margin_seconds
    child.remaining_ms = lambda call: int((margin + 3.0) * 1000) if call == 1 else 900_000
    uploaded: list[int] = []
    real_make_client = clients.make_client

    def slow_client(*args: Any, **kwargs: Any) -> Any:
        client = real_make_client(*args, **kwargs)

        def slow_part(params: dict[str, Any], **_: Any) -> None:
            uploaded.append(params["PartNumber"])
            time.sleep(4.0)

        client.meta.events.register("before-parameter-build.s3.UploadPart", slow_part)
        return client

    monkeypatch.setattr("ferry.engine.copier.make_client", slow_client)

    described = child.run(items_of(pipeline.s3, "src", "big/"), job)

    assert described["status"] == "SUCCEEDED", described
    passes = [event for name, event in child.calls if name == "copy-batch"]
    assert [p["pass"] for p in passes] == [1, 2]
    assert "big/object.bin" in [i["Key"] for i in passes[1]["items"]], (
        "the checkpointed object goes round again"
    )
    assert sorted(uploaded) == [1, 2, 3, 4], "no part was uploaded twice"
    output = json.loads(described["output"])
    assert output["counts"]["objects"] == 2 and output["counts"]["copied"] == 2
    assert pipeline.s3.get_object(Bucket="dst", Key="object.bin")["Body"].read() == data
    assert pipeline.s3.list_multipart_uploads(Bucket="dst").get("Uploads", []) == []
    ledger = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).job("job-1")
    assert (ledger["objects"], ledger["copied"], ledger["batches"]) == (2, 2, 2)
    reports = pipeline.s3.list_objects_v2(Bucket="ferry-reports", Prefix="jobs/job-1/objects/")["Contents"]
    rows = [
        json.loads(line)
        for r in reports
        for line in pipeline.s3.get_object(Bucket="ferry-reports", Key=r["Key"])["Body"]
        .read()
        .decode()
        .splitlines()
    ]
    big = next(r for r in rows if r["key"] == "big/object.bin")
    assert big["status"] == "copied" and big["parts_resumed"] == 2


def test_a_batch_whose_lambda_keeps_failing_is_recorded_as_failed(pipeline, child, monkeypatch) -> None:
    for n in range(3):
        pipeline.s3.put_object(Bucket="src", Key=f"f/{n}", Body=b"x")
    job = start_job({"source": {"bucket": "src", "prefix": "f/"}, "destination": {"bucket": "dst"}})

    def broken(event: Any, context: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(HANDLERS, "copy-batch", broken)
    described = child.run(items_of(pipeline.s3, "src", "f/"), job)

    assert described["status"] == "SUCCEEDED", described
    output = json.loads(described["output"])
    assert output["counts"]["failed"] == 3 and output["counts"]["objects"] == 3
    failures = list(DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).failures("job-1"))
    assert sorted(f.key for f in failures) == ["f/0", "f/1", "f/2"]
    assert all("RuntimeError" in f.reason or "disk on fire" in f.reason for f in failures), failures[0].reason


# What Lambda reports when a function runs out of time: Step Functions' lambda:invoke task fails
# with the function error's errorType as its error name, `Sandbox.Timedout`.
SandboxTimedout = type("Sandbox.Timedout", (Exception,), {})


def test_a_pass_killed_by_the_lambda_timeout_is_retried_and_counted_once(
    pipeline, child, monkeypatch
) -> None:
    """The first CopyBatch invocation copies the batch, then the Lambda's timeout kills it before
    it records anything (Sandbox.Timedout). The task is retried: the retry finds the copies at
    the destination (skipped), records the pass, and every object is counted exactly once."""
    for n in range(6):
        pipeline.s3.put_object(Bucket="src", Key=f"t/{n}", Body=b"y" * (n + 1))
    job = start_job({"source": {"bucket": "src", "prefix": "t/"}, "destination": {"bucket": "dst"}})
    from ferry.pipeline import batches

    real_record = batches.record
    killed: list[str] = []

    def record_unless_killed(services: Any, job_id: str, batch_key: str, results: Any) -> Any:
        if not killed:
            killed.append(batch_key)
            raise SandboxTimedout("RequestId: 1 Error: Task timed out after 900.00 seconds")
        return real_record(services, job_id, batch_key, results)

    monkeypatch.setattr(batches, "record", record_unless_killed)

    described = child.run(items_of(pipeline.s3, "src", "t/"), job)

    assert described["status"] == "SUCCEEDED", described
    assert [name for name, _ in child.calls] == ["copy-batch", "copy-batch"], "retried, not recorded failed"
    output = json.loads(described["output"])
    counts = output["counts"]
    assert (counts["objects"], counts["failed"], counts["pending"]) == (6, 0, 0), counts
    assert counts["copied"] + counts["skipped"] == 6, counts
    ledger = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE)
    recorded = ledger.job("job-1")
    assert (recorded["objects"], recorded["failed"], recorded["batches"]) == (6, 0, 1)
    assert list(ledger.failures("job-1")) == []
    keys = {o["Key"] for o in pipeline.s3.list_objects_v2(Bucket="dst")["Contents"]}
    assert keys == {str(n) for n in range(6)}
