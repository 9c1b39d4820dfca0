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
import threading
import time
import traceback
import zipfile
from collections.abc import Callable
from typing import Any

import boto3
import pytest

from conftest import PIPELINE_TABLE, FakeLambdaContext
from ferry.engine.parts import multipart
from ferry.pipeline.batches import pass_event
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from ferry.s3 import clients
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
    ledger = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).tally("job-1").to_dict()
    assert (ledger["objects"], ledger["copied"], ledger["skipped"], ledger["batches"]) == (26, 25, 1, 1)
    keys = {o["Key"] for o in pipeline.s3.list_objects_v2(Bucket="dst")["Contents"]}
    assert keys == {f"out/{n:02}" for n in range(25)}


def _first_pass_due_after_two_parts(monkeypatch: pytest.MonkeyPatch, first_pass_s: float) -> None:
    """The part loop reads its stop twice before starting each part (before and after waiting
    for room): on the first pass's deadline (the one under `first_pass_s` away) it comes due at
    the fifth read, before part 3; every other deadline keeps the real clock."""
    reads = 0
    lock = threading.Lock()

    def due(deadline: float | None, needed: float = 0.0) -> bool:
        nonlocal reads
        if deadline is None:
            return False
        if deadline - time.monotonic() > first_pass_s:
            return time.monotonic() + needed >= deadline
        with lock:
            reads += 1
            return reads > 4

    monkeypatch.setattr(multipart, "due", due)


def test_a_large_object_is_checkpointed_at_the_deadline_and_finished_in_a_second_pass(
    pipeline, child, monkeypatch
) -> None:
    """Streamed in 5 MiB parts with room for two at a time: the first pass's deadline falls due
    once parts 1-2 have started and before part 3 does (on the clock the part loop reads, not
    the wall's, so a loaded machine cannot move it), so it checkpoints 2 of 4 parts; the
    second pass resumes and uploads only parts 3 and 4."""
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
    first_pass_s = 60.0
    child.remaining_ms = lambda call: int((margin + first_pass_s) * 1000) if call == 1 else 900_000
    _first_pass_due_after_two_parts(monkeypatch, first_pass_s)
    uploaded: list[int] = []
    real_make_client = clients.make_client

    def counted_client(*args: Any, **kwargs: Any) -> Any:
        client = real_make_client(*args, **kwargs)
        client.meta.events.register(
            "before-parameter-build.s3.UploadPart", lambda params, **_: uploaded.append(params["PartNumber"])
        )
        return client

    monkeypatch.setattr("ferry.engine.strategies.copier.make_client", counted_client)
    monkeypatch.setattr("ferry.pipeline.services.make_client", counted_client)  # the clients a pass reuses

    described = child.run(items_of(pipeline.s3, "src", "big/"), job)

    assert described["status"] == "SUCCEEDED", described
    passes = [pass_event(e) for name, e in child.calls if name == "copy-batch" and "handed_over" not in e]
    assert [p["pass"] for p in passes] == [1, 2]
    assert "big/object.bin" in [i["Key"] for i in passes[1]["items"]], (
        "the checkpointed object goes round again"
    )
    assert sorted(uploaded) == [1, 2, 3, 4], "no part was uploaded twice"
    output = json.loads(described["output"])
    assert output["counts"]["objects"] == 2 and output["counts"]["copied"] == 2
    assert pipeline.s3.get_object(Bucket="dst", Key="object.bin")["Body"].read() == data
    assert pipeline.s3.list_multipart_uploads(Bucket="dst").get("Uploads", []) == []
    ledger = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).tally("job-1").to_dict()
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

    def record_unless_killed(services: Any, job_id: str, batch_key: str, results: Any, **kwargs: Any) -> Any:
        if not killed:
            killed.append(batch_key)
            raise SandboxTimedout("RequestId: 1 Error: Task timed out after 900.00 seconds")
        return real_record(services, job_id, batch_key, results, **kwargs)

    monkeypatch.setattr(batches, "record", record_unless_killed)

    described = child.run(items_of(pipeline.s3, "src", "t/"), job)

    assert described["status"] == "SUCCEEDED", described
    assert [name for name, _ in child.calls] == ["copy-batch", "copy-batch"], "retried, not recorded failed"
    output = json.loads(described["output"])
    counts = output["counts"]
    assert (counts["objects"], counts["failed"], counts["pending"]) == (6, 0, 0), counts
    assert counts["copied"] + counts["skipped"] == 6, counts
    ledger = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE)
    recorded = ledger.tally("job-1").to_dict()
    assert (recorded["objects"], recorded["failed"], recorded["batches"]) == (6, 0, 1)
    assert list(ledger.failures("job-1")) == []
    keys = {o["Key"] for o in pipeline.s3.list_objects_v2(Bucket="dst")["Contents"]}
    assert keys == {str(n) for n in range(6)}


def states_entered(execution_arn: str) -> list[str]:
    """The states the execution entered, in order (its history's *StateEntered events): each is
    one state transition on Step Functions' bill."""
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    events = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    return [e["stateEnteredEventDetails"]["name"] for e in events if e["type"].endswith("StateEntered")]


def test_a_batch_done_in_one_pass_enters_copy_batch_alone(pipeline, child) -> None:
    """The normal path: the Map starts the child (one transition), CopyBatch copies the batch
    and ends the child (one more). Only the batch id and its counts leave the child."""
    from ferry.costs import estimate

    for n in range(4):
        pipeline.s3.put_object(Bucket="src", Key=f"n/{n}", Body=b"z" * (n + 1))
    job = start_job({"source": {"bucket": "src", "prefix": "n/"}, "destination": {"bucket": "dst"}})

    described = child.run(items_of(pipeline.s3, "src", "n/"), job)

    assert described["status"] == "SUCCEEDED", described
    assert states_entered(described["executionArn"]) == ["CopyBatch"]
    assert estimate.CHILD_START_TRANSITIONS + estimate.CHILD_TRANSITIONS == 1 + 1
    output = json.loads(described["output"])
    assert set(output) == {"batch_id", "counts"}
    assert (output["counts"]["objects"], output["counts"]["copied"]) == (4, 4)


def test_a_batch_handed_over_twice_resumes_each_time_from_the_ledger(pipeline, child) -> None:
    """Passes 1 and 2 start with no time left: each records every object as handed over and
    raises FerryHandOver; the Catch resumes from the hand-over the ledger holds and the pass
    loop goes round. Pass 3 copies the batch and ends the child: every object once."""
    for n in range(5):
        pipeline.s3.put_object(Bucket="src", Key=f"h/{n}", Body=b"h" * (n + 1))
    job = start_job({"source": {"bucket": "src", "prefix": "h/"}, "destination": {"bucket": "dst"}})
    margin_ms = pipeline.settings.deadline_margin_seconds * 1000
    short = {1, 3}  # CopyBatch's passes 1 and 2 (calls 2 and 4 resume)
    child.remaining_ms = lambda call: margin_ms if call in short else 900_000

    described = child.run(items_of(pipeline.s3, "src", "h/"), job)

    assert described["status"] == "SUCCEEDED", described
    hand_over = ["CopyBatch", "ResumeHandOver", "WhatIsLeft", "NextPass"]
    assert states_entered(described["executionArn"]) == hand_over * 2 + ["CopyBatch"]
    passes = [(pass_event(e)["pass"], "handed_over" in e) for name, e in child.calls]
    assert passes == [(1, False), (1, True), (2, False), (2, True), (3, False)]
    counts = json.loads(described["output"])["counts"]
    assert (counts["objects"], counts["copied"], counts["failed"]) == (5, 5, 0), counts
    ledger = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE)
    tally = ledger.tally("job-1").to_dict()
    assert (tally["objects"], tally["copied"], tally["batches"]) == (5, 5, 3)
    keys = {o["Key"] for o in pipeline.s3.list_objects_v2(Bucket="dst")["Contents"]}
    assert keys == {str(n) for n in range(5)}


def test_a_pass_killed_after_recording_its_hand_over_is_retried_and_resumed(
    pipeline, child, monkeypatch
) -> None:
    """Pass 1 records its hand-over, then the Lambda's timeout kills it before it raises
    FerryHandOver (Sandbox.Timedout). The retry finds the pass recorded, hands over what the
    recorded attempt handed over, and the batch finishes in pass 2, each object counted once."""
    for n in range(3):
        pipeline.s3.put_object(Bucket="src", Key=f"k/{n}", Body=b"k")
    job = start_job({"source": {"bucket": "src", "prefix": "k/"}, "destination": {"bucket": "dst"}})
    from ferry.pipeline import batches

    real_record = batches.record
    killed: list[str] = []

    def record_then_killed(services: Any, job_id: str, batch_key: str, results: Any, **kwargs: Any) -> Any:
        recorded = real_record(services, job_id, batch_key, results, **kwargs)
        if not killed:
            killed.append(batch_key)
            raise SandboxTimedout("RequestId: 1 Error: Task timed out after 900.00 seconds")
        return recorded

    monkeypatch.setattr(batches, "record", record_then_killed)
    margin_ms = pipeline.settings.deadline_margin_seconds * 1000
    child.remaining_ms = lambda call: margin_ms if call in (1, 2) else 900_000  # pass 1 and its retry

    described = child.run(items_of(pipeline.s3, "src", "k/"), job)

    assert described["status"] == "SUCCEEDED", described
    assert states_entered(described["executionArn"]) == [
        "CopyBatch",
        "ResumeHandOver",
        "WhatIsLeft",
        "NextPass",
        "CopyBatch",
    ]
    passes = [(pass_event(e)["pass"], "handed_over" in e) for name, e in child.calls]
    assert passes == [(1, False), (1, False), (1, True), (2, False)], "killed, retried, resumed, pass 2"
    counts = json.loads(described["output"])["counts"]
    assert (counts["objects"], counts["copied"], counts["failed"]) == (3, 3, 0), counts
    tally = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).tally("job-1").to_dict()
    assert (tally["objects"], tally["copied"], tally["batches"]) == (3, 3, 2)


# -- payload sizes at the limits -------------------------------------------------------------

STATE_PAYLOAD_LIMIT = 262_144  # Step Functions: 256 KiB per state input or output, as UTF-8
MAX_CAUSE = 32_768  # Step Functions: an error's Cause is at most 32,768 characters


def batch_input_for(job: dict[str, Any]) -> Any:
    """What the parent's ItemBatcher puts in BatchInput for this job, evaluated by moto itself
    (a Pass state whose Parameters are statemachine/ferry.asl.json's BatchInput)."""
    from ferry_cdk.definition import PARENT_FILE, read

    maps = [s for s in read(PARENT_FILE)["States"].values() if s.get("Type") == "Map"]
    templates = [m["ItemBatcher"]["BatchInput"] for m in maps]
    assert len(maps) == 5 and all(t == templates[0] for t in templates), "every Map hands the child the same"
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    pass_only = {"StartAt": "P", "States": {"P": {"Type": "Pass", "Parameters": templates[0], "End": True}}}
    arn = sfn.create_state_machine(
        name="batch-input", definition=json.dumps(pass_only), roleArn="arn:aws:iam::123456789012:role/x"
    )["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, input=json.dumps({"job": job}))["executionArn"]
    for _ in range(100):
        described = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING":
            assert described["status"] == "SUCCEEDED", described
            return json.loads(described["output"])
        time.sleep(0.05)
    raise AssertionError("the BatchInput evaluation did not finish")


def utf8_size(data: Any) -> int:
    """A payload's size as Step Functions counts it: its JSON as UTF-8 bytes."""
    return len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode())


def long_key(n: int) -> str:
    key = f"in/{n:04d}" + "日" * 339
    assert len(key.encode()) == 1024  # S3's longest key
    return key


def state_payload_sizes(execution_arn: str) -> list[tuple[int, str]]:
    """(size, what) for every state input, output and task parameters/result in the history."""
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    events = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    sizes = []
    for event in events:
        for name, details in event.items():
            if not name.endswith("EventDetails") or not isinstance(details, dict):
                continue
            for field in ("input", "output", "parameters"):
                if isinstance(details.get(field), str):
                    what = f"{event['type']} {details.get('name', '')} {field}".strip()
                    sizes.append((utf8_size(json.loads(details[field])), what))
    return sizes


def test_every_state_payload_stays_under_256_kib_at_the_batch_limit(pipeline, child, monkeypatch) -> None:
    """The largest batch the settings accept, of objects with 1024-byte UTF-8 keys, handed over
    whole at pass 1's deadline, then a pass 2 that fails with a Cause of the maximum length
    (quotes and backslashes, each two bytes in the state's JSON). Every state's input and output
    in the child's execution history stays under Step Functions' 262,144 bytes."""
    from ferry.errors import ConfigError
    from ferry.pipeline import settings as pipeline_settings

    limit = pipeline_settings.MAX_BATCH_INPUT_BYTES
    base = {"sources": ["src"], "destinations": ["dst"]}
    pipeline_settings.PipelineSettings.from_context({**base, "max_input_bytes_per_batch": limit})
    with pytest.raises(ConfigError, match="max_input_bytes_per_batch"):
        pipeline_settings.PipelineSettings.from_context({**base, "max_input_bytes_per_batch": limit + 1})

    # moto enforces the quota too (States.DataLimitExceeded) but measures json.dumps' ASCII
    # escapes ("\\u65e5", 6 bytes for a 3-byte character) and ", " separators; AWS counts "256 KiB
    # of data as a UTF-8 encoded string" (Step Functions service quotas). Measure as AWS does.
    from moto.stepfunctions.parser import quotas

    monkeypatch.setattr(
        quotas, "to_json_str", lambda value: json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    )

    pipeline.s3.put_object(Bucket="src", Key="in/listed.txt", Body=b"x")  # an empty source is refused
    job = start_job({"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst"}})
    batch_input = batch_input_for(job)
    items: list[dict[str, Any]] = []
    while True:  # the ItemBatcher fills a batch up to MaxInputBytesPerBatch
        item = {
            "Etag": '"0123456789abcdef0123456789abcdef"',
            "Key": long_key(len(items)),
            "LastModified": 1668699881,
            "Size": 34910,
            "StorageClass": "STANDARD",
        }
        if utf8_size({"Items": [*items, item], "BatchInput": batch_input}) > limit:
            break
        items.append(item)
    assert utf8_size({"Items": items, "BatchInput": batch_input}) > limit - 1200

    margin_ms = pipeline.settings.deadline_margin_seconds * 1000
    child.remaining_ms = lambda call: margin_ms if call == 1 else 900_000  # pass 1 starts nothing
    real_invoke = child.invoke
    body = {"errorType": "RuntimeError", "errorMessage": "", "stackTrace": []}
    filler = MAX_CAUSE - len(json.dumps(body))
    body["errorMessage"] = '"\\' * (filler // 4) + "x" * (filler % 4)
    cause = json.dumps(body)
    assert len(cause) == MAX_CAUSE

    def pass_two_fails(backend, function_name, qualifier, payload, headers, response_headers):  # type: ignore[no-untyped-def]
        if function_name.endswith("copy-batch") and json.loads(payload).get("pass") == 2:
            child.calls.append(("copy-batch", json.loads(payload)))
            response_headers["x-amz-function-error"] = "Unhandled"
            return cause.encode()
        return real_invoke(backend, function_name, qualifier, payload, headers, response_headers)

    monkeypatch.setattr(child, "invoke", pass_two_fails)

    described = child.run(items, batch_input["job"])

    assert described["status"] == "SUCCEEDED", described
    assert [(name, pass_event(e).get("pass"), "handed_over" in e) for name, e in child.calls] == [
        ("copy-batch", 1, False),
        ("copy-batch", 1, True),  # ResumeHandOver: pass 1's input and the FerryHandOver error
        ("copy-batch", 2, False),
        ("record-failure", 2, False),
    ]
    assert len(child.calls[2][1]["items"]) == len(items), "pass 1 handed every object over"
    counts = json.loads(described["output"])["counts"]
    assert (counts["objects"], counts["failed"]) == (len(items), len(items)), counts
    sizes = state_payload_sizes(described["executionArn"])
    too_big = [(size, what) for size, what in sizes if size >= STATE_PAYLOAD_LIMIT]
    assert too_big == [], f"{len(too_big)} payloads at or over 262,144 bytes: {too_big[:5]}"
    largest = max(sizes)
    assert largest[0] > limit + len(cause), f"the test did not reach the limit: {largest}"


# -- throttled invokes -----------------------------------------------------------------------

PASS_HOLDS_SLOT = 15 * 60  # seconds: Lambda's longest invocation, the CopyBatch function's timeout


def too_many_requests() -> Exception:
    """What Lambda answers an invoke that finds no free slot: HTTP 429 TooManyRequestsException,
    which a Step Functions lambda:invoke task raises as `Lambda.TooManyRequestsException`."""
    from moto.core.exceptions import JsonRESTError

    error = JsonRESTError("TooManyRequestsException", "Rate Exceeded.")
    error.code = 429
    return error


class RetryClock:
    """Step Functions' retry waits, recorded instead of slept (moto sleeps for real), each the
    average a FULL jitter draws (half the computed backoff): `now` is the time the execution
    has spent waiting, as it would on AWS on average."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from types import SimpleNamespace

        from moto.stepfunctions.parser.asl.component.common.retry import jitter_strategy_decl, retrier_decl

        self.waits: list[float] = []
        monkeypatch.setattr(retrier_decl, "time", SimpleNamespace(sleep=self.waits.append))
        monkeypatch.setattr(jitter_strategy_decl, "random", SimpleNamespace(uniform=lambda a, b: (a + b) / 2))

    @property
    def now(self) -> float:
        return sum(self.waits)


def throttle_until(child: RoutedLambdas, clock: RetryClock, functions: set[str], seconds: float) -> list[str]:
    """Make Lambda refuse every invoke of `functions` (TooManyRequestsException) until the
    execution has waited `seconds`, as when passes of other batches hold every slot for that
    long. Returns the list the throttled invokes are noted in."""
    throttled: list[str] = []
    real_invoke = child.invoke

    def invoke(backend, function_name, qualifier, body, headers, response_headers):  # type: ignore[no-untyped-def]
        name = function_name.rsplit(":", 1)[-1]
        if name in functions and clock.now < seconds:
            throttled.append(name)
            raise too_many_requests()
        return real_invoke(backend, function_name, qualifier, body, headers, response_headers)

    child.invoke = invoke  # type: ignore[method-assign]
    return throttled


def test_a_batch_throttled_while_passes_hold_every_slot_waits_and_copies_every_object(
    pipeline, child, monkeypatch
) -> None:
    """Every CopyBatch invoke is throttled until 15 minutes have passed (another batch's pass
    holding the last slot for the whole Lambda timeout). The child waits it out and copies the
    batch: nothing is recorded failed, RecordFailure is never called."""
    for n in range(5):
        pipeline.s3.put_object(Bucket="src", Key=f"w/{n}", Body=b"w" * (n + 1))
    job = start_job({"source": {"bucket": "src", "prefix": "w/"}, "destination": {"bucket": "dst"}})
    clock = RetryClock(monkeypatch)
    throttled = throttle_until(child, clock, {"copy-batch"}, PASS_HOLDS_SLOT)

    described = child.run(items_of(pipeline.s3, "src", "w/"), job)

    assert described["status"] == "SUCCEEDED", described
    assert clock.now >= PASS_HOLDS_SLOT and len(throttled) == len(clock.waits), (clock.now, len(throttled))
    assert [name for name, _ in child.calls] == ["copy-batch"], (
        "copied once the slot freed, never recorded failed"
    )
    counts = json.loads(described["output"])["counts"]
    assert (counts["objects"], counts["copied"], counts["failed"], counts["pending"]) == (5, 5, 0, 0), counts
    ledger = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE)
    tally = ledger.tally("job-1").to_dict()
    assert (tally["objects"], tally["copied"], tally["failed"], tally["batches"]) == (5, 5, 0, 1)
    assert list(ledger.failures("job-1")) == []
    keys = {o["Key"] for o in pipeline.s3.list_objects_v2(Bucket="dst")["Contents"]}
    assert keys == {str(n) for n in range(5)}


def test_record_failure_throttled_while_copies_hold_every_slot_still_records_the_batch(
    pipeline, child, monkeypatch
) -> None:
    """CopyBatch fails for good; RecordFailure, in the same pool as the copies, is throttled for
    15 minutes. It waits, then records every object of the batch as failed with the error:
    none is lost."""
    for n in range(3):
        pipeline.s3.put_object(Bucket="src", Key=f"r/{n}", Body=b"r")
    job = start_job({"source": {"bucket": "src", "prefix": "r/"}, "destination": {"bucket": "dst"}})

    def broken(event: Any, context: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(HANDLERS, "copy-batch", broken)
    clock = RetryClock(monkeypatch)
    throttled = throttle_until(child, clock, {"record-failure"}, PASS_HOLDS_SLOT)

    described = child.run(items_of(pipeline.s3, "src", "r/"), job)

    assert described["status"] == "SUCCEEDED", described
    assert clock.now >= PASS_HOLDS_SLOT and throttled and set(throttled) == {"record-failure"}
    assert [name for name, _ in child.calls] == ["copy-batch", "record-failure"]
    counts = json.loads(described["output"])["counts"]
    assert (counts["objects"], counts["failed"]) == (3, 3), counts
    failures = list(DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).failures("job-1"))
    assert sorted(f.key for f in failures) == ["r/0", "r/1", "r/2"]
    assert all("disk on fire" in f.reason for f in failures), failures[0].reason
