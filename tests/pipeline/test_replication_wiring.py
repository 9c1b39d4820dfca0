"""Replication, safe deletes and per-location reach wired together: a replication keeps its
locations whole (role, region, endpoint, secret), its jobs carry the replication tag that
makes the copy path write copy records, and its starter hands "Object Deleted" events to
`apply_deletes` (newest event per key only) when deletes are on."""

from __future__ import annotations

import json
import logging

import boto3
import pytest
from moto import mock_aws
from replication_events import s3_event, sqs_event, sqs_record

from ferry.errors import ConfigError
from ferry.jobspec import parse_job_spec
from ferry.pipeline.ledger.dynamodb import DynamoCopyRecords
from ferry.pipeline.replication.config import Replication
from ferry.pipeline.replication.deletes import Deletion
from ferry.pipeline.replication.starter import NotAnEvent, handle_batch, latest_per_key, parse_event
from ferry.pipeline.replication.starter_deletes import DeleteServices, run_deletes
from ferry.pipeline.settings import PipelineSettings

ROLE = "arn:aws:iam::444455556666:role/ferry-read"
CROSS = {
    "name": "photos",
    "source": {"bucket": "src", "prefix": "in", "owner": "444455556666", "role_arn": ROLE},
    "destination": {
        "bucket": "dst",
        "prefix": "out/",
        "endpoint_url": "https://s3.example.net",
        "region": "eu-central-1",
        "credentials_secret": "ferry/remote-keys",
    },
    "deletes": True,
}


def test_a_replication_keeps_how_its_locations_are_reached() -> None:
    parsed = Replication.parse(CROSS, "replications[0]")
    assert parsed.source.prefix == "in/"  # still made a folder
    assert (parsed.source.role_arn, parsed.source.owner) == (ROLE, "444455556666")
    assert (
        parsed.destination.endpoint_url,
        parsed.destination.region,
        parsed.destination.credentials_secret,
    ) == ("https://s3.example.net", "eu-central-1", "ferry/remote-keys")
    # ... and through the starter's environment, unchanged.
    assert Replication.from_environment(parsed.to_environment()) == parsed
    assert Replication.from_environment(parsed.to_environment()).source.role_arn == ROLE


def test_a_batch_job_carries_the_replication_tag_the_copy_path_reads() -> None:
    for deletes in (True, False):
        r = Replication.parse({**CROSS, "deletes": deletes}, "replications[0]")
        spec = r.job_spec("photos-abc", "ferry-reports", "jobs/photos-abc/events.jsonl")
        assert spec["replication"] == {"name": "photos", "deletes": deletes}
        parsed = parse_job_spec(json.loads(json.dumps(spec)))
        assert parsed.replication is not None
        assert (parsed.replication.name, parsed.replication.deletes) == ("photos", deletes)


def settings_with(replication: dict) -> PipelineSettings:
    return PipelineSettings.from_context(
        {
            "sources": [{"bucket": "src", "role_arn": ROLE, "owner": "444455556666"}],
            "destinations": [{"bucket": "dst", "prefix": "out/", "region": "eu-central-1"}],
            "replications": [replication],
        }
    )


def test_a_replication_is_reached_as_the_workers_reach_its_locations() -> None:
    # Nothing said on the replication: it takes the reach of the sources/destinations entry the
    # workers copy it with (FERRY_LOCATIONS), so its deletes go the same way as its copies.
    plain = {
        "name": "photos",
        "source": {"bucket": "src", "prefix": "in/"},
        "destination": {"bucket": "dst", "prefix": "out/"},
    }
    (r,) = settings_with(plain).replications
    assert (r.source.role_arn, r.source.owner, r.destination.region) == (ROLE, "444455556666", "eu-central-1")
    (same,) = settings_with(
        {**plain, "source": {"bucket": "src", "prefix": "in/", "role_arn": ROLE}}
    ).replications
    assert same.source.role_arn == ROLE


def test_a_replication_reached_otherwise_than_its_workers_is_refused() -> None:
    other = "arn:aws:iam::444455556666:role/other"
    with pytest.raises(ConfigError, match=r"replications \(photos\)\.source: role_arn .*sources"):
        settings_with(
            {
                "name": "photos",
                "source": {"bucket": "src", "prefix": "in/", "role_arn": other},
                "destination": {"bucket": "dst", "prefix": "out/"},
            }
        )


# -- the starter with deletes on ------------------------------------------------------------------

LOCAL = {
    "name": "photos",
    "source": {"bucket": "src", "prefix": "in/"},
    "destination": {"bucket": "dst", "prefix": "out/"},
    "deletes": True,
}


def deleted_event(key: str, sequencer: str) -> dict:
    event = s3_event("src", key, sequencer=sequencer, detail_type="Object Deleted", version_id=None)
    event["detail"].update({"deletion-type": "Permanently Deleted", "reason": "DeleteObject"})
    return event


def test_deletes_on_reads_object_deleted_events_as_deletions() -> None:
    r = Replication.parse(LOCAL, "replications[0]")
    event = parse_event(json.dumps(deleted_event("in/with space.txt", "0A")), r, "m1")
    assert event.deletion is not None
    assert (event.deletion.key, event.deletion.sequencer, event.deletion.deletion_type) == (
        "in/with+space.txt",  # as the event spells it: deletes.apply_deletes decides which key
        "0A",
        "Permanently Deleted",
    )
    off = Replication.parse({**LOCAL, "deletes": False}, "replications[0]")
    with pytest.raises(NotAnEvent, match="'Object Deleted' is not 'Object Created' \\(deletes are off"):
        parse_event(json.dumps(deleted_event("in/a", "0A")), off, "m1")


def test_per_key_only_the_newest_event_acts_whatever_its_kind() -> None:
    r = Replication.parse(LOCAL, "replications[0]")

    def of(body: dict, message_id: str):  # noqa: ANN202
        return parse_event(json.dumps(body), r, message_id)

    create_old, delete_new = (
        of(s3_event("src", "in/a", sequencer="01"), "c"),
        of(deleted_event("in/a", "0200"), "d"),
    )
    delete_old, create_new = (
        of(deleted_event("in/b", "01"), "d2"),
        of(s3_event("src", "in/b", sequencer="0200"), "c2"),
    )
    assert latest_per_key([delete_new, create_old, create_new, delete_old]) == [delete_new, create_new]


@mock_aws
def test_a_failed_deletion_returns_its_message_with_its_reason(caplog) -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    for bucket in ("src", "ferry-reports"):  # no "dst": every destination HEAD fails NoSuchBucket
        s3.create_bucket(Bucket=bucket)
    r = Replication.parse(LOCAL, "replications[0]")
    services = DeleteServices(s3, s3, DynamoCopyRecords(dynamodb, "no-table"))
    event = sqs_event(
        [
            sqs_record(deleted_event("in/a.txt", "0A"), "delete-a"),
            sqs_record(s3_event("src", "in/b.txt", sequencer="0B"), "create-b"),
            sqs_record(s3_event("src", "in/c.txt", sequencer="01", detail_type="Object Restored"), "bad"),
        ]
    )
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    role = boto3.client("iam", region_name="us-east-1").create_role(
        RoleName="sfn", AssumeRolePolicyDocument="{}"
    )["Role"]["Arn"]
    machine = sfn.create_state_machine(
        name="ferry",
        definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
        roleArn=role,
    )["stateMachineArn"]
    with caplog.at_level(logging.INFO):
        response = handle_batch(
            event,
            r,
            s3=s3,
            stepfunctions=sfn,
            report_bucket="ferry-reports",
            state_machine_arn=machine,
            deletes=lambda: services,
        )
    assert sorted(f["itemIdentifier"] for f in response["batchItemFailures"]) == ["bad", "delete-a"]
    (execution,) = sfn.list_executions(stateMachineArn=machine)["executions"]  # the create still started
    rows = s3.get_object(Bucket="ferry-reports", Key=f"jobs/{execution['name']}/events.jsonl")["Body"].read()
    assert [json.loads(line)["key"] for line in rows.splitlines()] == ["in/b.txt"]
    failed = [r for r in caplog.records if r.levelno == logging.ERROR and "delete failed" in r.getMessage()]
    (line,) = failed
    assert '"message_id": "delete-a"' in line.getMessage() and "not deleted:" in line.getMessage()


def test_clients_that_cannot_be_made_fail_every_deletion(caplog) -> None:
    r = Replication.parse(LOCAL, "replications[0]")

    def unreachable() -> DeleteServices:
        raise ConfigError("secret ferry/remote-keys cannot be read")

    with caplog.at_level(logging.ERROR):
        failed = run_deletes(
            [("m1", Deletion("src", "in/a")), ("m2", Deletion("src", "in/b"))], r, unreachable
        )
    assert failed == ["m1", "m2"]
    assert "2 deletions not tried" in caplog.text and "secret ferry/remote-keys cannot be read" in caplog.text
