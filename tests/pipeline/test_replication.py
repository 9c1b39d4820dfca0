"""The replication starter on real-shaped EventBridge S3 events (replication_events.py):
decoding, ordering by sequencer, one manifest and one execution per batch, redelivery, and
messages that are not events for the replication. moto's S3 and Step Functions in-process."""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

import boto3
import pytest
from moto import mock_aws
from replication_events import s3_event, sqs_event, sqs_record

from ferry.jobspec import parse_job_spec
from ferry.models import CopyResult, Status
from ferry.pipeline.items import plan_item
from ferry.pipeline.replication.config import Replication
from ferry.pipeline.replication.deletes import sequencer_newer
from ferry.pipeline.replication.lag import replication_lags
from ferry.pipeline.replication.starter import (
    NotAnEvent,
    handle_batch,
    latest_per_key,
    parse_event,
)

REPORTS = "ferry-reports"
REPLICATION = Replication.parse(
    {
        "name": "photos",
        "source": {"bucket": "src", "prefix": "in/"},
        "destination": {"bucket": "dst", "prefix": "out/"},
        "options": {"storage_class": "STANDARD_IA"},
    },
    "replications[0]",
)


def event_of(key: str, sequencer: str, **kwargs: Any) -> Any:
    return parse_event(
        json.dumps(s3_event("src", key, sequencer=sequencer, **kwargs)),
        REPLICATION,
        kwargs.get("event_id") or key + sequencer,
    )


# -- one event ----------------------------------------------------------------------------------


def test_the_documented_object_created_event_is_read() -> None:
    # The S3 user guide's example, with its bucket and key moved under the replication's source.
    event = parse_event(
        json.dumps(s3_event("src", "in/example-key", sequencer="617f08299329d189")), REPLICATION, "m1"
    )
    assert (event.bucket, event.key, event.size, event.etag, event.sequencer, event.time) == (
        "src",
        "in/example-key",
        5,
        "b1946ac92492d2347c6235b4d2611184",
        "617f08299329d189",
        "2021-11-12T00:00:00Z",
    )


@pytest.mark.parametrize(
    "key",
    [
        "in/with space.txt",
        "in/a+b=c.txt",
        "in/100% done.txt",
        "in/ünïcödé-日本.txt",
        "in/q?x#y&z.txt",
        "in/deep/er/key",
    ],
)
def test_a_key_is_kept_as_delivered_with_the_key_it_decodes_to(key: str) -> None:
    """Nothing is decoded on trust (event_keys): the event's spelling, then its decoding."""
    body = s3_event("src", key, sequencer="01")
    encoded = body["detail"]["object"]["key"]
    assert encoded != key or key == "in/deep/er/key"  # spaces as '+', '+' as %2B, unicode as UTF-8 %XX
    event = parse_event(json.dumps(body), REPLICATION, "m")
    assert (event.key, event.key_forms) == (encoded, (encoded, key) if encoded != key else (key,))


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("not json", "not JSON"),
        (json.dumps({"Records": [{"eventSource": "aws:s3"}]}), "source is not aws.s3"),
        (
            json.dumps(s3_event("src", "in/a", sequencer="01", detail_type="Object Deleted")),
            "'Object Deleted' is not 'Object Created'",
        ),
        (json.dumps(s3_event("other", "in/a", sequencer="01")), "outside this replication's source"),
        (json.dumps(s3_event("src", "elsewhere/a", sequencer="01")), "outside this replication's source"),
        (json.dumps(s3_event("src", "in/a", sequencer="not-hex")), "is not a hexadecimal string"),
        (json.dumps(s3_event("src", "in/a", sequencer="01", time="yesterday")), "is not an ISO 8601 time"),
    ],
)
def test_a_message_that_is_not_an_event_for_this_replication_says_why(body: str, reason: str) -> None:
    with pytest.raises(NotAnEvent, match=reason.replace("(", r"\(").replace("?", r"\?")):
        parse_event(body, REPLICATION, "m")


# -- ordering -------------------------------------------------------------------------------------


def test_sequencers_compare_right_padded_not_as_numbers() -> None:
    # "FF" padded is "FF00" > "0100"; read as numbers 0xFF < 0x100. S3 says: pad, then compare.
    assert sequencer_newer("FF", "0100") and not sequencer_newer("0100", "FF")  # FF00 > 0100
    older, newer = event_of("in/k", "0100"), event_of("in/k", "FF")
    assert latest_per_key([newer, older]) == [newer]
    assert latest_per_key([older, newer]) == [newer]


def test_sequencers_longer_than_16_hex_digits_order_correctly() -> None:
    a = event_of("in/k", "0055AED6DCD90281E5")  # 18 digits: beyond a 64-bit number
    b = event_of("in/k", "0055AED6DCD90281E6000000")  # 24 digits, later
    c = event_of("in/k", "0055AED6DCD9028")  # 15 digits: padded, it sorts first
    assert latest_per_key([b, a, c]) == [b]
    assert latest_per_key([c, a]) == [a]
    assert (
        latest_per_key([event_of("in/k", "617f08299329d189"), event_of("in/k", "617F08299329D18A")])[
            0
        ].sequencer
        == "617F08299329D18A"
    )


def test_duplicates_and_stale_deliveries_leave_one_row_per_key() -> None:
    events = [
        event_of("in/a", "02", etag="new"),
        event_of("in/a", "01", etag="old"),  # stale, delivered after the newer one
        event_of("in/a", "02", etag="new", event_id="again"),  # the same event delivered twice
        event_of("in/b", "05"),
    ]
    latest = latest_per_key(events)
    assert [(e.key, e.etag) for e in latest] == [
        ("in/a", "new"),
        ("in/b", "b1946ac92492d2347c6235b4d2611184"),
    ]


def test_a_manifest_row_is_an_item_the_workers_plan_to_copy_latest() -> None:
    event = event_of(
        "in/with space.txt", "0A", size=42, etag="abc", time="2026-11-22T10:00:00Z", encode=False
    )
    row = json.loads(json.dumps(event.row("photos")))
    spec = parse_job_spec(REPLICATION.job_spec("photos-x", REPORTS, "jobs/photos-x/events.jsonl"))
    planned = plan_item(row, spec)
    assert planned.fail is None and planned.skip is None
    assert (
        planned.obj.bucket,
        planned.obj.key,
        planned.obj.size,
        planned.obj.etag,
        planned.obj.version_id,
    ) == (
        "src",
        "in/with space.txt",
        42,
        "abc",
        None,  # the current object, never the event's version: see ferry.pipeline.replication.starter
    )
    assert (planned.target.bucket, planned.target.key) == ("dst", "out/with space.txt")
    assert spec.options.policy.skip_existing and spec.options.policy.storage_class == "STANDARD_IA"
    assert spec.manifest and spec.manifest.format == "jsonl"


# -- a batch: one manifest, one execution ---------------------------------------------------------


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=REPORTS)
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        iam = boto3.client("iam", region_name="us-east-1")
        role = iam.create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        machine = sfn.create_state_machine(
            name="ferry-jobs",
            definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}),
            roleArn=role,
        )["stateMachineArn"]

        class Aws:
            def handle(self, records: list[dict[str, Any]]) -> dict[str, Any]:
                return handle_batch(
                    sqs_event(records),
                    REPLICATION,
                    s3=s3,
                    stepfunctions=sfn,
                    report_bucket=REPORTS,
                    state_machine_arn=machine,
                )

            def executions(self) -> list[dict[str, Any]]:
                return sfn.list_executions(stateMachineArn=machine)["executions"]

            def execution_input(self, arn: str) -> dict[str, Any]:
                return json.loads(sfn.describe_execution(executionArn=arn)["input"])

            def manifest(self, key: str) -> list[dict[str, Any]]:
                body = s3.get_object(Bucket=REPORTS, Key=key)["Body"].read().decode()
                return [json.loads(line) for line in body.splitlines()]

        yield Aws()


def test_a_batch_of_10000_events_makes_one_manifest_and_one_execution(aws) -> None:
    records = []
    for n in range(10_000):
        key = f"in/{n % 7000:05}-file-{n % 7000}.txt"  # one form each: no listing (event_keys)
        # keys 0-2999 get a second, later event (a re-upload), delivered after the first; its
        # sequencer is 20 digits long, greater once the first is right-padded with zeros
        sequencer = f"{n:016X}" if n < 7000 else f"{n - 7000:016X}0001"
        records.append(sqs_record(s3_event("src", key, sequencer=sequencer, size=n), f"msg-{n}"))

    response = aws.handle(records)

    assert response == {"batchItemFailures": []}
    (execution,) = aws.executions()
    spec = aws.execution_input(execution["executionArn"])
    assert spec["job_id"] == execution["name"] and spec["job_id"].startswith("photos-")
    manifest = spec["source"]["manifest"]
    assert manifest == {"bucket": REPORTS, "key": f"jobs/{spec['job_id']}/events.jsonl", "format": "jsonl"}
    assert spec["source"]["bucket"] == "src" and spec["source"]["prefix"] == "in/"
    assert spec["destination"] == {"bucket": "dst", "prefix": "out/"}
    assert spec["options"] == {"storage_class": "STANDARD_IA", "skip_existing": True}
    parse_job_spec(spec)  # what Prepare will accept
    rows = aws.manifest(manifest["key"])
    assert len(rows) == 7000 and len({r["key"] for r in rows}) == 7000
    by_key = {r["key"]: r for r in rows}
    assert by_key["in/00001-file-1.txt"]["size"] == 7001  # the later of its two events
    assert by_key["in/06999-file-6999.txt"]["size"] == 6999
    assert all(r["replication"] == "photos" and r["event_time"] == "2021-11-12T00:00:00Z" for r in rows)


def test_a_redelivered_batch_starts_nothing_twice(aws) -> None:
    records = [sqs_record(s3_event("src", f"in/{n}", sequencer=f"{n:04X}"), f"m-{n}") for n in range(20)]
    first = aws.handle(records)
    (execution,) = aws.executions()
    # The execution may have ended meanwhile: StartExecution then answers ExecutionAlreadyExists.
    again = aws.handle(list(reversed(records)))  # the same messages, in another order
    assert first == again == {"batchItemFailures": []}
    assert [e["executionArn"] for e in aws.executions()] == [execution["executionArn"]]
    other = aws.handle(records[:5])  # another batch of messages is another job
    assert other == {"batchItemFailures": []} and len(aws.executions()) == 2


def test_messages_that_are_not_events_fail_alone_and_say_why(aws, caplog) -> None:
    good = [
        sqs_record(s3_event("src", "in/a", sequencer="01"), "good-1"),
        sqs_record(s3_event("src", "in/b", sequencer="02"), "good-2"),
    ]
    bad = [
        sqs_record("not json", "bad-json"),
        sqs_record(s3_event("src", "in/a", sequencer="03", detail_type="Object Deleted"), "bad-deleted"),
        sqs_record(s3_event("elsewhere", "in/a", sequencer="04"), "bad-bucket"),
    ]
    with caplog.at_level(logging.WARNING, logger="ferry.pipeline.replication.starter"):
        response = aws.handle([good[0], bad[0], bad[1], good[1], bad[2]])

    assert response == {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in bad]}
    (execution,) = aws.executions()
    rows = aws.manifest(aws.execution_input(execution["executionArn"])["source"]["manifest"]["key"])
    assert [r["key"] for r in rows] == ["in/a", "in/b"]  # the Object Deleted event did not count
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for message_id, reason in (
        ("bad-json", "not JSON"),
        ("bad-deleted", "detail-type 'Object Deleted'"),
        ("bad-bucket", "s3://elsewhere/in/a is outside"),
    ):
        assert f"message {message_id} is not an S3 Object Created event for replication photos: " in logged
        assert reason in logged


def test_a_batch_of_nothing_but_bad_messages_starts_nothing(aws) -> None:
    response = aws.handle([sqs_record("{}", "x"), sqs_record("[]", "y")])
    assert response == {"batchItemFailures": [{"itemIdentifier": "x"}, {"itemIdentifier": "y"}]}
    assert aws.executions() == []


def test_a_record_that_cannot_be_read_at_all_fails_alone_and_is_logged(aws, caplog) -> None:
    """Not a wrong event but a record without a body: whatever the error, the record fails
    alone (a batch item failure, as Powertools' BatchProcessor made one) and the log says so."""
    good = sqs_record(s3_event("src", "in/a", sequencer="01"), "good")
    broken = {k: v for k, v in sqs_record("{}", "no-body").items() if k != "body"}
    with caplog.at_level(logging.WARNING, logger="ferry.pipeline.replication.starter"):
        response = aws.handle([broken, good])
    assert response == {"batchItemFailures": [{"itemIdentifier": "no-body"}]}
    assert len(aws.executions()) == 1
    assert any("message no-body could not be read" in r.getMessage() and r.exc_info for r in caplog.records)


def test_a_start_that_fails_returns_the_whole_batch_to_the_queue(aws) -> None:
    records = [sqs_record(s3_event("src", "in/a", sequencer="01"), "m-1")]
    with pytest.raises(Exception, match="StateMachineDoesNotExist|does not exist"):
        handle_batch(
            sqs_event(records),
            REPLICATION,
            s3=boto3.client("s3", region_name="us-east-1"),
            stepfunctions=boto3.client("stepfunctions", region_name="us-east-1"),
            report_bucket=REPORTS,
            state_machine_arn="arn:aws:states:us-east-1:123456789012:stateMachine:gone",
        )


# -- lag ---------------------------------------------------------------------------------------


def test_lag_counts_verified_copies_of_event_rows_only() -> None:
    now = dt.datetime(2026, 11, 22, 10, 0, 30, tzinfo=dt.UTC)
    row = {"key": "in/a", "replication": "photos", "event_time": "2026-11-22T10:00:00Z"}

    def result(status: Status) -> CopyResult:
        return CopyResult(source_key="in/a", dest_key="out/a", status=status)

    lags = replication_lags(
        [
            (row, result(Status.COPIED)),
            (row, result(Status.SKIPPED)),  # already identical: this event copied nothing
            (row, result(Status.FAILED)),
            ({"key": "in/b"}, result(Status.COPIED)),  # a manifest row of another job
            ({**row, "replication": "docs", "event_time": "2026-11-22T09:59:00Z"}, result(Status.COPIED)),
        ],
        now=now,
    )
    assert lags == {"photos": [30.0], "docs": [90.0]}


# -- keys as written or URL-encoded ----------------------------------------------------------------


def test_a_source_prefix_with_plus_accepts_its_events_however_keys_are_spelled() -> None:
    """'+' in the prefix: decoding a key delivered as written would turn it into a space, and
    the event would fail as outside the source (every event to the dead-letter queue)."""
    replication = Replication.parse(
        {"name": "cpp", "source": {"bucket": "src", "prefix": "c++/"}, "destination": {"bucket": "dst"}},
        "replications[0]",
    )
    for encode in (False, True):
        body = json.dumps(s3_event("src", "c++/notes.txt", sequencer="01", encode=encode))
        assert "c++/notes.txt" in parse_event(body, replication, "m").key_forms


def test_a_created_key_is_resolved_against_the_source_and_never_guessed(versitygw) -> None:
    """The forms of 'in/x+y.txt' (as written, and 'in/x y.txt') on a real server: the one that
    exists; of two that exist, the one with the event's ETag; both alike, UndecidedKey."""
    from ferry.pipeline.replication.event_keys import UndecidedKey, key_forms, resolve_created

    s3, bucket = versitygw.client, versitygw.bucket("src")
    forms = key_forms("in/x+y.txt", "in/")
    assert forms == ("in/x+y.txt", "in/x y.txt")
    assert resolve_created(s3, bucket, "in/x+y.txt", forms, "e", 1).entry is None  # none exists
    space = s3.put_object(Bucket=bucket, Key="in/x y.txt", Body=b"space")["ETag"].strip('"')
    assert resolve_created(s3, bucket, "in/x+y.txt", forms, "other", 9).key == "in/x y.txt"
    plus = s3.put_object(Bucket=bucket, Key="in/x+y.txt", Body=b"plus!")["ETag"].strip('"')
    assert resolve_created(s3, bucket, "in/x+y.txt", forms, plus, 5).key == "in/x+y.txt"
    assert resolve_created(s3, bucket, "in/x+y.txt", forms, space, 5).key == "in/x y.txt"
    with pytest.raises(UndecidedKey, match="match neither"):
        resolve_created(s3, bucket, "in/x+y.txt", forms, "0" * 32, 5)
    s3.put_object(Bucket=bucket, Key="in/x y.txt", Body=b"plus!")
    with pytest.raises(UndecidedKey, match="match both"):
        resolve_created(s3, bucket, "in/x+y.txt", forms, plus, 5)
