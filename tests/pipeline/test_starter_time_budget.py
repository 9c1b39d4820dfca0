"""The replication starter finishes every batch within its Lambda timeout.

A key an EventBridge event spells with '+' may stand for two source keys, and the starter lists
the source once per spelling to learn which (event_keys). A batch of a thousand such keys is
two thousand listings: one after another, at a realistic tenth of a second each, 200 s, past
the starter's 120 s timeout (the stack's, ferry_cdk.replication), and a timed-out batch
returns WHOLE to the queue, the keys that needed no look-up too.

The source is a real S3 server (MinIO), reached by the starter's own client; the report bucket
and Step Functions are moto's.

Time here is the invocation's own, read through its Lambda context as the handler reads its
deadline: each request a thread sends is deemed to take a set latency of that thread's time,
the invocation has lasted as long as its furthest thread (a request the handler's own thread
sends comes after everything before it), and nothing else counts, so how loaded the machine
is changes nothing (a request waits a thousandth of its latency, only so that the pool's
threads take turns as they would). The handler runs through its Lambda entry point.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from moto import mock_aws
from replication_events import s3_event, sqs_record

from conftest import ACCESS_KEY, SECRET_KEY, S3Server
from ferry.pipeline.replication.config import Replication
from ferry.pipeline.replication.starter import RESERVE_SECONDS
from ferry.pipeline.replication.starter_deletes import source_client
from ferry.pipeline.replication.starter_lookups import lookup_bound
from ferry_cdk.replication import MAX_RECEIVE_COUNT, STARTER_TIMEOUT_SECONDS
from handlers import start_replication

REPORTS = "ferry-reports"
CLIENTS = start_replication._clients.__wrapped__  # the handler's own, made anew each invocation
REALISTIC = 0.1  # seconds a listing takes: S3 answers small requests in tens of milliseconds
DILATION = 0.001  # the real seconds a request waits for each of its deemed seconds
SLOW = 5.0  # a source throttling the starter: each listing answered after 5 s of SlowDown retries


class Invocation:
    """One Lambda invocation's context on its own clock (the module docstring says how the
    clock runs). `remaining_at_return` is what the context said when the handler returned."""

    def __init__(self, timeout_s: float, latency_s: float) -> None:
        self.timeout_s = timeout_s
        self.latency_s = latency_s
        self.main = threading.get_ident()
        self.spent: dict[int, float] = {}
        self.listings = 0
        self._lock = threading.Lock()

    # what the handler reads of its context
    function_name, function_version, memory_limit_in_mb = "starter", "$LATEST", 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:starter"
    aws_request_id, log_group_name, log_stream_name = "request", "/aws/lambda/starter", "s"

    def elapsed(self) -> float:
        with self._lock:
            return max(self.spent.values(), default=0.0)

    def get_remaining_time_in_millis(self) -> int:
        return int((self.timeout_s - self.elapsed()) * 1000)

    def request(self, model: Any = None, **_: Any) -> None:
        """A botocore hook: the sending thread spends the latency (the handler's own thread
        only after everything so far), and waits a DILATION of it, so that the threads of a
        pool move on in turn, as they would on the clock, not as the machine schedules them."""
        thread = threading.get_ident()
        with self._lock:
            if model is not None and model.name == "ListObjectsV2":
                self.listings += 1
            start = (
                max(self.spent.values(), default=0.0) if thread == self.main else self.spent.get(thread, 0.0)
            )
            self.spent[thread] = start + self.latency_s
        time.sleep(self.latency_s * DILATION)  # threads take turns as the latency has them

    def watch(self, client: Any) -> Any:
        client.meta.events.register("before-parameter-build", self.request)
        return client


@pytest.fixture
def aws(minio: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[Starter]:
    """The replication's source on MinIO, reached as the starter reaches it (its endpoint);
    the report bucket and Step Functions on moto; the starter's environment as the stack sets
    it. Each invocation's clients are made anew, watched by its clock."""
    source = minio.bucket("src")
    replication = {
        "name": "photos",
        "source": {"bucket": source, "prefix": "in/", "endpoint_url": minio.url, "region": minio.region},
        "destination": {"bucket": "dst", "prefix": "out/"},
    }
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    keys = {name: os.environ.get(name) for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    with mock_aws(), suite_keys(keys):  # requests to MinIO's address pass through to it
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=REPORTS)
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        role = boto3.client("iam", region_name="us-east-1").create_role(
            RoleName="sfn", AssumeRolePolicyDocument="{}"
        )["Role"]["Arn"]
        machine = sfn.create_state_machine(
            name="ferry-jobs",
            definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}),
            roleArn=role,
        )["stateMachineArn"]
        monkeypatch.setenv("FERRY_REPLICATION", json.dumps(replication))
        monkeypatch.setenv("FERRY_REPORT_BUCKET", REPORTS)
        monkeypatch.setenv("FERRY_STATE_MACHINE_ARN", machine)
        yield Starter(minio, source, sfn, machine, monkeypatch)


@contextmanager
def suite_keys(found: dict[str, str | None]) -> Iterator[None]:
    """The suite's keys while moto runs (it swaps in its own; MinIO takes the suite's, moto
    any), and the environment as `found` after."""
    os.environ.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    try:
        yield
    finally:
        for name, value in found.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class Starter:
    """The starter's Lambda entry point, invoked as Lambda invokes it."""

    def __init__(self, minio: S3Server, source: str, sfn: Any, machine: str, mp: pytest.MonkeyPatch) -> None:
        self.minio, self.source, self.sfn, self.machine, self.monkeypatch = minio, source, sfn, machine, mp
        self.invocations: list[Invocation] = []

    def invoke(self, records: list[dict[str, Any]], latency_s: float) -> dict[str, Any]:
        """The handler, with its own clients (as a cold start makes them) on a new clock."""
        invocation = Invocation(STARTER_TIMEOUT_SECONDS, latency_s)
        s3, sfn = (invocation.watch(c) for c in CLIENTS())
        source = invocation.watch(
            source_client(Replication.from_environment(os.environ["FERRY_REPLICATION"]))
        )
        self.monkeypatch.setattr(start_replication, "_clients", lambda: (s3, sfn))
        self.monkeypatch.setattr(start_replication, "_source_client", lambda environment: source)
        response = start_replication.handler({"Records": records}, invocation)
        invocation.remaining_at_return = invocation.get_remaining_time_in_millis()  # type: ignore[attr-defined]
        self.invocations.append(invocation)
        return response

    def put(self, keys: list[str]) -> None:
        client = self.minio.client
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda key: client.put_object(Bucket=self.source, Key=key, Body=b"x"), keys))

    def manifest_keys(self) -> list[str]:
        """Every key of every job's manifest the starter started, as many times as listed."""
        keys, client = [], boto3.client("s3", region_name="us-east-1")
        for execution in self.sfn.list_executions(stateMachineArn=self.machine)["executions"]:
            spec = json.loads(self.sfn.describe_execution(executionArn=execution["executionArn"])["input"])
            where = spec["source"]["manifest"]
            body = client.get_object(Bucket=where["bucket"], Key=where["key"])["Body"].read().decode()
            keys += [json.loads(line)["key"] for line in body.splitlines()]
        return keys

    def events(self, count: int, *, put_every: int = 0, plain: int = 0) -> list[dict[str, Any]]:
        """`count` events of keys with a space, as EventBridge may spell them ('+'), every
        `put_every`th key put in the source first (as spelled with its space); then `plain`
        events of keys that need no look-up."""
        if put_every:
            self.put([spaced(n) for n in range(0, count, put_every)])
        records = []
        for n in range(count):
            event = s3_event(self.source, spaced(n), sequencer=f"{n + 1:016X}", size=1)
            records.append(sqs_record(event, f"spaced-{n:04}"))
        for n in range(plain):
            event = s3_event(self.source, f"in/plain-{n:04}.jpg", sequencer=f"{n + 1:016X}", size=1)
            records.append(sqs_record(event, f"plain-{n:04}"))
        return records


def spaced(n: int) -> str:
    return f"in/photo {n:04}.jpg"


def resolved(n: int, put_every: int) -> str:
    """The key the starter puts in the job for event n: the form the source holds, or where
    it holds neither, the form the event spelled (event_keys.resolve_created)."""
    return spaced(n) if put_every and n % put_every == 0 else spaced(n).replace(" ", "+")


def redelivered(records: list[dict[str, Any]], response: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages a response reported as failures, as SQS delivers them again: the same
    message, its receive count one higher."""
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    again = []
    for record in records:
        if record["messageId"] in failed:
            count = int(record["attributes"]["ApproximateReceiveCount"]) + 1
            again.append(
                {**record, "attributes": {**record["attributes"], "ApproximateReceiveCount": str(count)}}
            )
    return again


def test_a_thousand_keys_with_two_spellings_are_resolved_well_within_the_timeout(aws) -> None:
    """At a realistic latency the thousand look-ups run in parallel: one invocation resolves
    every key to the form the source holds, starts one job, and returns with time to spare."""
    records = aws.events(1000, put_every=10)

    response = aws.invoke(records, REALISTIC)

    (invocation,) = aws.invocations
    assert invocation.remaining_at_return > 0, (
        f"the handler returned {-invocation.remaining_at_return / 1000:.0f} s after its "
        f"{STARTER_TIMEOUT_SECONDS} s timeout"
    )
    assert response == {"batchItemFailures": []}
    assert invocation.listings == 2 * 1000
    assert sorted(aws.manifest_keys()) == sorted(resolved(n, 10) for n in range(1000))


def test_a_slow_source_defers_what_it_cannot_look_up_and_the_redeliveries_finish_it(aws) -> None:
    """At 5 s a listing a thousand keys cannot be looked up in one invocation: the handler
    returns before its deadline with the keys it could not look up listed as batch item
    failures (the keys that need no look-up are done), and the redeliveries of those finish
    them, each key in exactly one job, within the queue's maxReceiveCount receives."""
    records = aws.events(1000, put_every=10, plain=200)
    batch, rounds = records, 0
    while batch:
        rounds += 1
        assert rounds <= MAX_RECEIVE_COUNT, "a message would reach the dead-letter queue"
        response = aws.invoke(batch, SLOW)
        invocation = aws.invocations[-1]
        assert invocation.remaining_at_return > 0, (
            f"round {rounds}: the handler returned {-invocation.remaining_at_return / 1000:.0f} s late"
        )
        failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        assert len(failed) < len(batch), f"round {rounds} finished nothing"
        if rounds == 1:
            assert failed, "a thousand slow look-ups fit one invocation: the test proves nothing"
            assert all(m.startswith("spaced-") for m in failed), "a key that needs no look-up was sent back"
        batch = redelivered(batch, response)

    keys = aws.manifest_keys()
    assert sorted(keys) == sorted(
        [resolved(n, 10) for n in range(1000)] + [f"in/plain-{n:04}.jpg" for n in range(200)]
    )
    assert len(aws.invocations) == rounds >= 2


def test_keys_beyond_the_bound_are_deferred_without_a_request_those_delivered_before_go_first(aws) -> None:
    """The keys one invocation looks up are bounded from its time (lookup_bound: 3,200 at the
    stack's 120 s); those beyond are deferred before any request, and keys SQS delivered more
    often are looked up first."""
    bound = lookup_bound(STARTER_TIMEOUT_SECONDS - RESERVE_SECONDS)
    records = aws.events(bound + 400)
    for record in records[-400:]:  # delivered before: these go first
        record["attributes"]["ApproximateReceiveCount"] = "2"

    response = aws.invoke(records, REALISTIC)

    assert bound == 3200
    failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
    assert failed == [r["messageId"] for r in records[bound - 400 : bound]]
    assert aws.invocations[0].listings == 2 * bound
    assert aws.invocations[0].remaining_at_return > 0


def test_an_undecided_key_fails_alone_among_parallel_look_ups(aws, caplog) -> None:
    """Both forms exist with the event's ETag and size: the key is not guessed, its message
    fails with the reason, and the others are in the job."""
    records = aws.events(50, put_every=1)
    aws.put(["in/photo+0007.jpg"])  # the same bytes as the other form

    response = aws.invoke(records, REALISTIC)

    assert response == {"batchItemFailures": [{"itemIdentifier": "spaced-0007"}]}
    assert sorted(aws.manifest_keys()) == [spaced(n) for n in range(50) if n != 7]
    assert (
        "message spaced-0007: replication photos: the event's key 'in/photo+0007.jpg' may name" in caplog.text
    )
