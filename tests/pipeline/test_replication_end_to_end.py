"""Continuous replication end to end, offline: objects written to the source, their S3 events
(real shape) through a moto SQS queue, the starter Lambda invoked with the batch Lambda would
receive, and the ONE parent execution it starts run by parent_harness, copying exactly those
objects; the lag metric captured from the workers' EMF output."""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

import boto3
import pytest
from printed import printed_documents
from replication_events import QUEUE_ARN, s3_event
from test_parent_workflow import (  # noqa: F401 - parent: the fixture
    RUN_TIMEOUT_S,
    MiB,
    Parent,
    _lower_large_object_threshold,
    parent,
)

from conftest import PIPELINE_REPORTS, PIPELINE_TABLE, FakeLambdaContext
from handlers import start_replication

REPLICATION = {
    "name": "photos",
    "source": {"bucket": "src", "prefix": "in/"},
    "destination": {"bucket": "dst", "prefix": "replica/"},
    "batch_size": 1000,
    "batch_window_seconds": 30,
}
KEYS = ["in/a.txt", "in/with space.txt", "in/ünïcödé-日本.txt", "in/a+b=c.txt", "in/deep/er/key"] + [
    f"in/n/{n:03}.bin" for n in range(40)
]
LARGE = ["in/large-0.bin", "in/large-1.bin"]  # above the threshold the test sets: the Fargate task
EVENT_AGE_S = 120  # events are stamped this long ago, so the lag proves the event time travelled


def put_and_notify(s3: Any, sqs: Any, queue_url: str) -> dict[str, bytes]:
    """Write each object and send its event the way EventBridge would (at least once: some twice,
    one stale event after a newer one). Returns what the source holds."""
    stamp = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=EVENT_AGE_S)).strftime("%Y-%m-%dT%H:%M:%SZ")
    bodies: dict[str, bytes] = {}
    events: list[dict[str, Any]] = []
    for n, key in enumerate(KEYS + LARGE):
        if key == "in/a.txt":  # written twice: the first version's event arrives last (stale)
            first = s3.put_object(Bucket="src", Key=key, Body=b"first version")
            stale = s3_event(
                "src", key, sequencer=f"{n:016X}", size=13, etag=first["ETag"].strip('"'), time=stamp
            )
        body = f"{key} #{n}\n".encode() * (n + 1) if key not in LARGE else bytes([n]) * (MiB + MiB // 2)
        put = s3.put_object(Bucket="src", Key=key, Body=body)
        bodies[key] = body
        events.append(
            s3_event(
                "src",
                key,
                sequencer=f"{n:016X}0001",
                size=len(body),
                etag=put["ETag"].strip('"'),
                time=stamp,
                version_id=None,
            )
        )
    events += events[:3]  # delivered twice
    events.append(stale)
    s3.put_object(Bucket="src", Key="elsewhere/x", Body=b"x")  # outside the prefix: no event
    for start in range(0, len(events), 10):
        entries = [
            {"Id": str(i), "MessageBody": json.dumps(e)} for i, e in enumerate(events[start : start + 10])
        ]
        assert not sqs.send_message_batch(QueueUrl=queue_url, Entries=entries).get("Failed")
    return bodies


def drain(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    """The queue's messages as Lambda's SQS event records (Lambda developer guide, SQS event)."""
    records = []
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]).get(
            "Messages", []
        )
        if not got:
            return records
        for m in got:
            records.append(
                {
                    "messageId": m["MessageId"],
                    "receiptHandle": m["ReceiptHandle"],
                    "body": m["Body"],
                    "attributes": m.get("Attributes", {}),
                    "messageAttributes": {},
                    "md5OfBody": m["MD5OfBody"],
                    "eventSource": "aws:sqs",
                    "eventSourceARN": QUEUE_ARN,
                    "awsRegion": "us-east-1",
                }
            )


def wait(machine: Parent, arn: str) -> dict[str, Any]:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        described = machine.sfn.describe_execution(executionArn=arn)
        if described["status"] != "RUNNING":
            return described
        time.sleep(0.1)
    raise AssertionError(f"execution {arn} still RUNNING after {RUN_TIMEOUT_S} s")


def lag_values(captured: str) -> list[tuple[dict[str, Any], list[float]]]:
    found = []
    for blob in printed_documents(captured):
        if "ReplicationLag" not in blob:
            continue
        (directive,) = blob["_aws"]["CloudWatchMetrics"]
        found.append(
            (
                directive,
                blob["ReplicationLag"]
                if isinstance(blob["ReplicationLag"], list)
                else [blob["ReplicationLag"]],
            )
        )
        assert blob["Replication"] == "photos"
    return found


def test_lag_is_read_from_two_documents_printed_at_once() -> None:
    """Two workers' threads printing together leave both documents on one line (CI saw it)."""
    directive = {
        "Namespace": "Ferry",
        "Dimensions": [["Replication"]],
        "Metrics": [{"Name": "ReplicationLag", "Unit": "Seconds"}],
    }

    def emf(values: list[float]) -> str:
        document = {"_aws": {"Timestamp": 1, "CloudWatchMetrics": [directive]}, "Replication": "photos"}
        return json.dumps({**document, "ReplicationLag": values}, separators=(",", ":"))

    log = json.dumps({"level": "INFO", "message": "large object settled"})
    printed = f"{log}\n{emf([121.5])}{emf([121.26, 121.27])}\n\nnot json\n"

    assert lag_values(printed) == [(directive, [121.5]), (directive, [121.26, 121.27])]


def test_new_objects_reach_the_destination_through_one_job(parent, monkeypatch, capfd) -> None:  # noqa: F811
    s3 = parent.pipeline.s3
    sqs = boto3.client("sqs", region_name="us-east-1")
    queue_url = sqs.create_queue(QueueName="ferry-replication-events")["QueueUrl"]
    monkeypatch.setenv("FERRY_REPLICATION", json.dumps(REPLICATION))
    monkeypatch.setenv("FERRY_STATE_MACHINE_ARN", parent.machine_arn)
    _lower_large_object_threshold(parent, monkeypatch, MiB)
    start_replication._clients.cache_clear()
    bodies = put_and_notify(s3, sqs, queue_url)
    records = drain(sqs, queue_url)
    assert len(records) == len(KEYS) + len(LARGE) + 4

    response = start_replication.handler({"Records": records}, FakeLambdaContext())

    assert response == {"batchItemFailures": []}
    (execution,) = parent.sfn.list_executions(stateMachineArn=parent.machine_arn)["executions"]
    described = wait(parent, execution["executionArn"])
    assert described["status"] == "SUCCEEDED", described
    output = json.loads(described["output"])
    assert {k: output[k] for k in ("status", "objects", "copied", "skipped", "failed", "pending")} == {
        "status": "SUCCEEDED",
        "objects": len(KEYS) + len(LARGE),  # duplicates and the stale event made no extra rows
        "copied": len(KEYS) + len(LARGE),
        "skipped": 0,
        "failed": 0,
        "pending": 0,
    }
    assert output["report"] == f"s3://{PIPELINE_REPORTS}/jobs/{execution['name']}/summary.json"
    listed = {o["Key"] for o in s3.list_objects_v2(Bucket="dst").get("Contents", [])}
    assert listed == {"replica/" + k[len("in/") :] for k in KEYS + LARGE}
    for key, body in bodies.items():
        assert s3.get_object(Bucket="dst", Key="replica/" + key[len("in/") :])["Body"].read() == body, key
    tasks = parent.harness.fargate.tasks
    assert sorted(json.loads(t["environment"]["FERRY_ITEM"])["key"] for t in tasks) == LARGE

    # Lag: one value per verified copy, dimension Replication only, at least the events' age.
    emitted = lag_values(capfd.readouterr().out)
    values = [v for _, vs in emitted for v in vs]
    assert len(values) == len(KEYS) + len(LARGE)  # from CopyBatch and from the Fargate task
    assert all(
        d
        == {
            "Namespace": "Ferry",
            "Dimensions": [["Replication"]],
            "Metrics": [{"Name": "ReplicationLag", "Unit": "Seconds"}],
        }
        for d, _ in emitted
    )
    assert all(EVENT_AGE_S <= v < EVENT_AGE_S + RUN_TIMEOUT_S for v in values), values

    # The same batch delivered again (a starter that timed out after starting): no second job,
    # and skip-existing would make even a new one cheap.
    again = start_replication.handler({"Records": records}, FakeLambdaContext())
    assert again == {"batchItemFailures": []}
    assert len(parent.sfn.list_executions(stateMachineArn=parent.machine_arn)["executions"]) == 1


# -- deletes on ---------------------------------------------------------------------------------

DELETES = {**REPLICATION, "deletes": True}


def seq(n: int) -> str:
    """A sequencer longer than 16 hex digits (S3's grow), increasing with n."""
    return f"{n:020X}"


def send(sqs: Any, queue_url: str, events: list[dict[str, Any]]) -> None:
    for start in range(0, len(events), 10):
        entries = [
            {"Id": str(i), "MessageBody": json.dumps(e)} for i, e in enumerate(events[start : start + 10])
        ]
        assert not sqs.send_message_batch(QueueUrl=queue_url, Entries=entries).get("Failed")


def created(s3: Any, key: str, body: bytes, n: int, *, encode: bool = True) -> dict[str, Any]:
    put = s3.put_object(Bucket="src", Key=key, Body=body)
    return s3_event(
        "src",
        key,
        sequencer=seq(n),
        size=len(body),
        etag=put["ETag"].strip('"'),
        version_id=None,
        encode=encode,
    )


def deleted(key: str, n: int, *, encode: bool = True) -> dict[str, Any]:
    # The S3 user guide's "Object Deleted" example on an unversioned bucket: the empty object's
    # ETag, no version id, deletion-type "Permanently Deleted".
    event = s3_event(
        "src",
        key,
        sequencer=seq(n),
        size=0,
        etag="d41d8cd98f00b204e9800998ecf8427e",
        detail_type="Object Deleted",
        version_id=None,
        encode=encode,
    )
    event["detail"]["deletion-type"] = "Permanently Deleted"
    event["detail"]["reason"] = "DeleteObject"
    del event["detail"]["object"]["size"]
    return event


def run_batch(machine: Parent, sqs: Any, queue_url: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The queue's messages through the starter; the execution it started (if any), finished."""
    before = {
        e["executionArn"]
        for e in machine.sfn.list_executions(stateMachineArn=machine.machine_arn)["executions"]
    }
    response = start_replication.handler({"Records": drain(sqs, queue_url)}, FakeLambdaContext())
    new = [
        e
        for e in machine.sfn.list_executions(stateMachineArn=machine.machine_arn)["executions"]
        if e["executionArn"] not in before
    ]
    if not new:
        return response, None
    (execution,) = new
    described = wait(machine, execution["executionArn"])
    assert described["status"] == "SUCCEEDED", described
    return response, json.loads(described["output"])


def test_deletes_remove_only_ferrys_own_copies_and_only_the_newest_event_acts(
    parent,  # noqa: F811
    monkeypatch,
    caplog,
) -> None:
    from ferry.pipeline.ledger.dynamodb import DynamoCopyRecords

    s3 = parent.pipeline.s3
    sqs = boto3.client("sqs", region_name="us-east-1")
    queue_url = sqs.create_queue(QueueName="ferry-replication-deletes")["QueueUrl"]
    monkeypatch.setenv("FERRY_REPLICATION", json.dumps(DELETES))
    monkeypatch.setenv("FERRY_STATE_MACHINE_ARN", parent.machine_arn)
    start_replication._clients.cache_clear()
    start_replication._delete_services.cache_clear()
    records = DynamoCopyRecords(parent.pipeline.dynamodb, PIPELINE_TABLE)
    names = ["keep", "gone", "theirs", "both", "again"]

    # 1. Objects created -> one job copies them, and (deletes on) records what it wrote.
    send(
        sqs,
        queue_url,
        [created(s3, f"in/{name}.txt", f"{name} v1\n".encode(), n) for n, name in enumerate(names, 1)],
    )
    response, output = run_batch(parent, sqs, queue_url)
    assert response == {"batchItemFailures": []}
    assert output is not None and (output["copied"], output["failed"]) == (len(names), 0)
    for name in names:
        record = records.get("dst", f"replica/{name}.txt")
        assert record is not None, name
        head = s3.head_object(Bucket="dst", Key=f"replica/{name}.txt")
        assert (record.dest_etag, record.replication, record.sequencer) == (
            head["ETag"].strip('"'),
            "photos",
            seq(names.index(name) + 1),
        )

    # 2. At the source: gone, theirs and both deleted, again deleted and written anew. At the
    # destination "someone else" overwrites theirs.
    for name in ("gone", "theirs", "both", "again"):
        s3.delete_object(Bucket="src", Key=f"in/{name}.txt")
    s3.put_object(Bucket="dst", Key="replica/theirs.txt", Body=b"written by someone else")
    events = [
        deleted("in/gone.txt", 100),
        deleted("in/theirs.txt", 101),
        # both: a create older than its delete, in the same batch (a late redelivery): the delete acts.
        created(s3, "in/both.txt", b"both v1\n", 4),
        deleted("in/both.txt", 102),
        # again: a delete older than the create that followed it: the create acts.
        deleted("in/again.txt", 103),
        created(s3, "in/again.txt", b"again v2, after its delete\n", 104),
        deleted("in/again.txt", 103),  # and delivered twice
        # newer: written, then an older version of it deleted (the key still exists): the newer
        # delete must not keep the new object from being copied.
        created(s3, "in/newer.txt", b"newer v2\n", 105),
        deleted("in/newer.txt", 106),
    ]
    s3.delete_object(Bucket="src", Key="in/both.txt")  # `created` above wrote it back to take its ETag
    send(sqs, queue_url, events)
    with caplog.at_level("INFO"):
        response, output = run_batch(parent, sqs, queue_url)

    assert response == {"batchItemFailures": []}
    # One job for every key created in the batch: again and newer copied; both, deleted at the
    # source since its event, skipped (nothing to replicate), not failed.
    assert output is not None
    assert {k: output[k] for k in ("objects", "copied", "skipped", "failed")} == {
        "objects": 3,
        "copied": 2,
        "skipped": 1,
        "failed": 0,
    }
    listed = {o["Key"] for o in s3.list_objects_v2(Bucket="dst").get("Contents", [])}
    assert listed == {"replica/keep.txt", "replica/theirs.txt", "replica/again.txt", "replica/newer.txt"}
    assert s3.get_object(Bucket="dst", Key="replica/newer.txt")["Body"].read() == b"newer v2\n"
    assert s3.get_object(Bucket="dst", Key="replica/theirs.txt")["Body"].read() == b"written by someone else"
    assert (
        s3.get_object(Bucket="dst", Key="replica/again.txt")["Body"].read() == b"again v2, after its delete\n"
    )
    assert s3.get_object(Bucket="dst", Key="replica/keep.txt")["Body"].read() == b"keep v1\n"
    assert records.get("dst", "replica/gone.txt") is None and records.get("dst", "replica/both.txt") is None

    logged = [
        json.loads(r.getMessage().split(": ", 2)[2])
        for r in caplog.records
        if ": delete " in r.getMessage() or "delete kept:" in r.getMessage()
    ]
    by_key = {}
    for entry in logged:
        by_key.setdefault(entry["key"], []).append(entry)
    assert [e["status"] for e in by_key["in/gone.txt"]] == ["deleted"]
    assert [e["status"] for e in by_key["in/both.txt"]] == ["deleted"]
    (theirs,) = by_key["in/theirs.txt"]
    assert theirs["status"] == "kept" and "overwritten since Ferry copied it" in theirs["reason"]
    assert [(e["status"], e["reason"]) for e in by_key["in/again.txt"]] == [
        ("kept", "a newer event for this key came in the same batch")
    ] * 2
    (newer,) = by_key["in/newer.txt"]
    assert newer["status"] == "kept"  # the source key still exists: only an old version went


# -- keys as EventBridge may deliver them --------------------------------------------------------

# Characters URL-encoding changes ('+', '%', ' ', ':', non-ASCII) and pairs that one reading
# would merge: 'x y' and 'x+y' are one key once '+' is read as a space.
AWKWARD = [
    "in/c++/notes.txt",
    "in/a%2Bb.txt",
    "in/plus+and space.txt",
    "in/x y.txt",
    "in/x+y.txt",
    "in/12:00:00.log",
    "in/ünïcödé 日本+.txt",
    "in/100%.txt",
]


@pytest.mark.parametrize("encode", [False, True], ids=["keys-as-written", "keys-url-encoded"])
def test_awkward_keys_replicate_and_delete_exactly_whichever_way_events_spell_them(
    parent,  # noqa: F811
    monkeypatch,
    caplog,
    encode: bool,
) -> None:
    s3 = parent.pipeline.s3
    sqs = boto3.client("sqs", region_name="us-east-1")
    queue_url = sqs.create_queue(QueueName="ferry-replication-keys")["QueueUrl"]
    monkeypatch.setenv("FERRY_REPLICATION", json.dumps(DELETES))
    monkeypatch.setenv("FERRY_STATE_MACHINE_ARN", parent.machine_arn)
    start_replication._clients.cache_clear()
    start_replication._delete_services.cache_clear()
    bodies = {key: f"{key} body\n".encode() for key in AWKWARD}

    send(sqs, queue_url, [created(s3, k, b, n, encode=encode) for n, (k, b) in enumerate(bodies.items(), 1)])
    response, output = run_batch(parent, sqs, queue_url)

    assert response == {"batchItemFailures": []}
    assert output is not None
    assert {k: output[k] for k in ("objects", "copied", "skipped", "failed")} == {
        "objects": len(AWKWARD),
        "copied": len(AWKWARD),
        "skipped": 0,
        "failed": 0,
    }
    listed = {o["Key"] for o in s3.list_objects_v2(Bucket="dst").get("Contents", [])}
    assert listed == {"replica/" + k[len("in/") :] for k in AWKWARD}
    for key, body in bodies.items():
        assert s3.get_object(Bucket="dst", Key="replica/" + key[len("in/") :])["Body"].read() == body, key

    # Deleted at the source: every key with '+' or '%', and 'x+y' while 'x y' stays.
    gone = ["in/c++/notes.txt", "in/a%2Bb.txt", "in/plus+and space.txt", "in/x+y.txt", "in/100%.txt"]
    for key in gone:
        s3.delete_object(Bucket="src", Key=key)
    send(sqs, queue_url, [deleted(k, 100 + n, encode=encode) for n, k in enumerate(gone)])
    with caplog.at_level("INFO"):
        response, output = run_batch(parent, sqs, queue_url)

    assert response == {"batchItemFailures": []}
    listed = {o["Key"] for o in s3.list_objects_v2(Bucket="dst").get("Contents", [])}
    assert listed == {"replica/" + k[len("in/") :] for k in AWKWARD if k not in gone}
    outcomes = [
        json.loads(r.getMessage().split(": ", 2)[2])
        for r in caplog.records
        if ": delete deleted: " in r.getMessage()
    ]
    assert sorted(o["dest_key"] for o in outcomes) == sorted("replica/" + k[len("in/") :] for k in gone)
