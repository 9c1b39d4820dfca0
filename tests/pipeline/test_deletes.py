"""Deletes, when a replication enables them, on real S3 servers (versitygw and MinIO, both with
versioning) and the copy records in DynamoDB (moto's server): only Ferry's own copies go; an
overwrite by someone else stays; a versioned destination gets a delete marker and keeps the
version; an absent destination is fine; a stale delete never removes a newer copy; deletes
off touch nothing. Events are shaped as the S3 user guide's EventBridge examples
(ev-events.html, "Object deleted (using DeleteObject)").
"""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from conftest import S3Server, create_ledger_table
from ferry.engine.strategies.copier import Copier
from ferry.models import CopyPolicy, CopyResult, SourceObject, Target
from ferry.pipeline.ledger.dynamodb import DynamoCopyRecords
from ferry.pipeline.locations import Location
from ferry.pipeline.replication.deletes import (
    DELETE_MARKER_CREATED,
    PERMANENTLY_DELETED,
    DeleteCounts,
    DeleteStatus,
    Deletion,
    Route,
    apply_deletes,
    latest_per_key,
    record_copies,
    sequencer_newer,
)

SERVERS = ("versitygw", "minio")


def deleted_event(
    bucket: str, key: str, sequencer: str, *, marker: str | None = None, reason: str = "DeleteObject"
) -> dict[str, Any]:
    """An "Object Deleted" event as the S3 user guide shows it (ev-events.html): the etag is
    the delete marker's (the empty object's MD5), never the deleted object's."""
    detail_object: dict[str, Any] = {
        "key": key,
        "etag": "d41d8cd98f00b204e9800998ecf8427e",
        "sequencer": sequencer,
    }
    if marker:
        detail_object["version-id"] = marker
    return {
        "version": "0",
        "id": "2ee9cc15-d022-99ea-1fb8-1b1bac4850f9",
        "detail-type": "Object Deleted",
        "source": "aws.s3",
        "account": "111122223333",
        "time": "2021-11-12T00:00:00Z",
        "region": "ca-central-1",
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": detail_object,
            "request-id": "0BH729840619AG5K",
            "requester": "123456789012",
            "source-ip-address": "1.2.3.4",
            "reason": reason,
            "deletion-type": DELETE_MARKER_CREATED if marker else PERMANENTLY_DELETED,
        },
    }


@pytest.fixture
def records(motoserver: S3Server) -> DynamoCopyRecords:
    """Copy records on a fresh DynamoDB table of the ledger's shape (moto's server)."""
    client = boto3.client("dynamodb", endpoint_url=motoserver.url, region_name="us-east-1")
    table = f"ledger-{uuid.uuid4().hex[:8]}"
    create_ledger_table(client, table)
    return DynamoCopyRecords(client, table)


class Scene:
    """A source and a destination bucket on one server, and a replication between them."""

    def __init__(self, server: S3Server, *, versioned: bool, deletes: bool = True) -> None:
        self.server, self.s3 = server, server.client
        self.src, self.dst = server.bucket("src"), server.bucket("dst")
        if versioned:
            for bucket in (self.src, self.dst):
                self.s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        self.route = Route("photos", Location(self.src, "in/"), Location(self.dst, "out/"), deletes=deletes)

    def put(self, key: str, body: bytes) -> None:
        self.s3.put_object(Bucket=self.src, Key=f"in/{key}", Body=body)

    def copy(self, records: DynamoCopyRecords | None, *keys: str, sequencer: str | None = None) -> None:
        """Ferry's copy path: the engine copies, then the replication job records what it wrote."""
        pairs = [(SourceObject(self.src, f"in/{k}"), Target(self.dst, f"out/{k}")) for k in keys]
        with Copier(self.server.endpoint, self.server.endpoint, CopyPolicy()) as copier:
            results: list[CopyResult] = copier.copy_batch(pairs)
        assert [r.status for r in results] == ["copied"] * len(keys), [r.reason for r in results]
        if records is not None:
            items = [{"key": f"in/{k}", "sequencer": sequencer} for k in keys]
            written = record_copies(
                zip(items, results, strict=True),
                destination_client=self.s3,
                record_store=records,
                replication="photos",
                job_id="job-1",
            )
            assert written == len(keys)

    def delete_source(self, key: str, sequencer: str) -> Deletion:
        response = self.s3.delete_object(Bucket=self.src, Key=f"in/{key}")
        marker = response.get("VersionId") if response.get("DeleteMarker") else None
        return Deletion.from_event(deleted_event(self.src, f"in/{key}", sequencer, marker=marker))

    def apply(self, records: DynamoCopyRecords, deletions: list[Deletion]) -> list[Any]:
        return apply_deletes(
            deletions,
            source_client=self.s3,
            destination_client=self.s3,
            record_store=records,
            replication=self.route,
        )

    def dest_keys(self) -> list[str]:
        return self.server.keys(self.dst)

    def dest_body(self, key: str) -> bytes:
        return self.s3.get_object(Bucket=self.dst, Key=f"out/{key}")["Body"].read()  # type: ignore[no-any-return]


@pytest.mark.parametrize("server_name", SERVERS)
def test_deletes_remove_ferry_copies_and_keep_what_someone_else_wrote(server_name, request, records) -> None:
    scene = Scene(request.getfixturevalue(server_name), versioned=False)
    scene.put("mine.jpg", b"ferry copied this")
    scene.put("theirs.jpg", b"ferry copied this too")
    scene.copy(records, "mine.jpg", "theirs.jpg")
    scene.s3.put_object(Bucket=scene.dst, Key="out/theirs.jpg", Body=b"someone else wrote this later")

    outcomes = scene.apply(
        records,
        [
            scene.delete_source("mine.jpg", "617f0837b476e463"),
            scene.delete_source("theirs.jpg", "617f0837b476e464"),
        ],
    )

    assert [o.status for o in outcomes] == [DeleteStatus.DELETED, DeleteStatus.KEPT]
    assert outcomes[0].proof.startswith("copy record")
    assert "overwritten since Ferry copied it" in outcomes[1].reason
    assert scene.dest_keys() == ["out/theirs.jpg"]
    assert scene.dest_body("theirs.jpg") == b"someone else wrote this later"
    assert records.get(scene.dst, "out/mine.jpg") is None  # the record goes with the copy
    assert DeleteCounts.of(outcomes).counts() == {
        "objects": 2,
        "copied": 0,
        "skipped": 1,
        "failed": 0,
        "pending": 0,
        "bytes_copied": 0,
        "deleted": 1,
    }


@pytest.mark.parametrize("server_name", SERVERS)
def test_a_versioned_destination_gets_a_delete_marker_and_keeps_the_version(
    server_name, request, records
) -> None:
    scene = Scene(request.getfixturevalue(server_name), versioned=True)
    scene.put("a.txt", b"version one")
    scene.copy(records, "a.txt")
    copied_version = records.get(scene.dst, "out/a.txt").dest_version_id  # type: ignore[union-attr]
    assert copied_version

    deletion = scene.delete_source("a.txt", "617f0837b476e463")
    assert deletion.deletion_type == DELETE_MARKER_CREATED and deletion.version_id
    (outcome,) = scene.apply(records, [deletion])

    assert outcome.status == DeleteStatus.DELETED, outcome.reason
    versions = scene.s3.list_object_versions(Bucket=scene.dst, Prefix="out/a.txt")
    assert [v["VersionId"] for v in versions.get("Versions", [])] == [copied_version]
    assert [m["IsLatest"] for m in versions.get("DeleteMarkers", [])] == [True]
    assert scene.dest_keys() == []
    old = scene.s3.get_object(Bucket=scene.dst, Key="out/a.txt", VersionId=copied_version)
    assert old["Body"].read() == b"version one"


@pytest.mark.parametrize("server_name", SERVERS)
def test_a_newer_version_written_by_someone_else_on_a_versioned_destination_is_kept(
    server_name, request, records
) -> None:
    scene = Scene(request.getfixturevalue(server_name), versioned=True)
    scene.put("a.txt", b"same bytes")
    scene.copy(records, "a.txt")
    scene.s3.put_object(Bucket=scene.dst, Key="out/a.txt", Body=b"same bytes")  # same ETag, their version

    (outcome,) = scene.apply(records, [scene.delete_source("a.txt", "617f0837b476e463")])

    assert outcome.status == DeleteStatus.KEPT
    assert "is not the one Ferry wrote" in outcome.reason
    assert scene.dest_keys() == ["out/a.txt"]


@pytest.mark.parametrize("server_name", SERVERS)
def test_an_absent_destination_is_fine(server_name, request, records) -> None:
    scene = Scene(request.getfixturevalue(server_name), versioned=False)
    scene.put("gone.txt", b"x")
    scene.copy(records, "gone.txt")
    scene.s3.delete_object(Bucket=scene.dst, Key="out/gone.txt")

    (outcome,) = scene.apply(records, [scene.delete_source("gone.txt", "617f0837b476e463")])

    assert (outcome.status, outcome.reason) == (DeleteStatus.KEPT, "the destination is already absent")


@pytest.mark.parametrize("server_name", SERVERS)
def test_a_stale_delete_never_removes_a_newer_copy(server_name, request, records) -> None:
    scene = Scene(request.getfixturevalue(server_name), versioned=False)
    # Re-created after the delete, and the delete arrives late: the source exists again.
    scene.put("again.txt", b"first")
    scene.copy(records, "again.txt", sequencer="617f0837b476e400")
    stale = scene.delete_source("again.txt", "617f0837b476e463")
    scene.put("again.txt", b"second")
    scene.copy(records, "again.txt", sequencer="617f0837b476e470")
    # Copied for a create event newer than the delete (longer sequencer, compared right-padded),
    # while the source is absent again (its newer delete has not arrived yet).
    scene.put("late.txt", b"newer copy")
    scene.copy(records, "late.txt", sequencer="617f0837b476e4630000000001")
    scene.s3.delete_object(Bucket=scene.src, Key="in/late.txt")
    older = Deletion.from_event(deleted_event(scene.src, "in/late.txt", "617f0837b476e463"))

    outcomes = scene.apply(records, [stale, older])

    assert [o.status for o in outcomes] == [DeleteStatus.KEPT, DeleteStatus.KEPT]
    assert "source key exists again" in outcomes[0].reason
    assert "newer source object" in outcomes[1].reason
    assert sorted(scene.dest_keys()) == ["out/again.txt", "out/late.txt"]
    assert scene.dest_body("again.txt") == b"second"


@pytest.mark.parametrize("server_name", SERVERS)
def test_deletes_off_touch_nothing(server_name, request, records) -> None:
    scene = Scene(request.getfixturevalue(server_name), versioned=False)
    scene.route = Route("photos", scene.route.source, scene.route.destination)  # "deletes": false
    scene.put("keep.txt", b"x")
    scene.copy(records, "keep.txt")

    (outcome,) = scene.apply(records, [scene.delete_source("keep.txt", "617f0837b476e463")])

    assert outcome.status == DeleteStatus.KEPT and "deletes are off" in outcome.reason
    assert scene.dest_keys() == ["out/keep.txt"]
    assert records.get(scene.dst, "out/keep.txt") is not None


@pytest.mark.parametrize("server_name", SERVERS)
def test_without_a_record_the_version_under_the_source_delete_marker_proves_the_copy(
    server_name, request, records
) -> None:
    scene = Scene(request.getfixturevalue(server_name), versioned=True)
    scene.put("old.txt", b"copied before deletes were on")
    scene.put("other.txt", b"copied before deletes were on, too")
    scene.copy(None, "old.txt", "other.txt")  # no copy record
    scene.s3.put_object(Bucket=scene.dst, Key="out/other.txt", Body=b"replaced by someone")

    outcomes = scene.apply(
        records,
        [
            scene.delete_source("old.txt", "617f0837b476e463"),
            scene.delete_source("other.txt", "617f0837b476e464"),
        ],
    )

    assert outcomes[0].status == DeleteStatus.DELETED, outcomes[0].reason
    assert outcomes[0].proof.startswith("source version ")
    assert outcomes[1].status == DeleteStatus.KEPT
    assert "cannot prove the destination holds Ferry's copy" in outcomes[1].reason
    assert scene.dest_keys() == ["out/other.txt"]


@pytest.mark.parametrize("server_name", SERVERS)
def test_without_a_record_a_permanent_delete_proves_nothing_and_keeps_the_copy(
    server_name, request, records
) -> None:
    scene = Scene(request.getfixturevalue(server_name), versioned=False)
    scene.put("p.txt", b"x")
    scene.copy(None, "p.txt")

    (outcome,) = scene.apply(records, [scene.delete_source("p.txt", "617f0837b476e463")])

    assert outcome.status == DeleteStatus.KEPT
    assert outcome.reason.startswith("cannot prove the destination holds Ferry's copy")
    assert scene.dest_keys() == ["out/p.txt"]


def test_a_write_between_the_check_and_the_delete_survives_on_versitygw(versitygw, records) -> None:
    """versitygw honours If-Match on DeleteObject (412), as S3 general purpose buckets do."""
    scene = Scene(versitygw, versioned=False)
    scene.put("race.txt", b"ferry's copy")
    scene.copy(records, "race.txt")
    destination = boto3.client(
        "s3", endpoint_url=versitygw.url, region_name="us-east-1", config=versitygw.client.meta.config
    )

    def someone_writes(**_: Any) -> None:
        scene.s3.put_object(Bucket=scene.dst, Key="out/race.txt", Body=b"written in the window")

    destination.meta.events.register("before-call.s3.DeleteObject", someone_writes)
    (outcome,) = apply_deletes(
        [scene.delete_source("race.txt", "617f0837b476e463")],
        source_client=scene.s3,
        destination_client=destination,
        record_store=records,
        replication=scene.route,
    )

    assert outcome.status == DeleteStatus.KEPT and "If-Match failed" in outcome.reason
    assert scene.dest_body("race.txt") == b"written in the window"


def test_minio_ignores_if_match_on_delete_so_the_window_stays_open_there(minio) -> None:
    """What the README says of MinIO: DeleteObject with a wrong If-Match still deletes."""
    bucket = minio.bucket()
    minio.client.put_object(Bucket=bucket, Key="k", Body=b"x")
    minio.client.delete_object(Bucket=bucket, Key="k", IfMatch='"00000000000000000000000000000000"')
    assert minio.keys(bucket) == []


def test_deletions_parse_from_the_documented_event_keeping_the_key_as_spelled() -> None:
    event = deleted_event(
        "DOC-EXAMPLE-BUCKET1",
        "photos/red+flower%281%29.jpg",
        "617f0837b476e463",
        marker="1QW9g1Z99LUNbvaaYVpW9xDlOLU.qxgF",
    )
    deletion = Deletion.from_event(event)
    assert deletion == Deletion(
        bucket="DOC-EXAMPLE-BUCKET1",
        key="photos/red+flower%281%29.jpg",  # which key it names: apply_deletes decides
        sequencer="617f0837b476e463",
        version_id="1QW9g1Z99LUNbvaaYVpW9xDlOLU.qxgF",
        deletion_type=DELETE_MARKER_CREATED,
        time="2021-11-12T00:00:00Z",
        reason="DeleteObject",
    )


def test_sequencers_of_varying_length_compare_right_padded() -> None:
    assert sequencer_newer("617f0837b476e4630000000001", "617f0837b476e463")
    assert not sequencer_newer("617f0837b476e463", "617f0837b476e4630000000000")
    assert sequencer_newer("617F0837B476E464", "617f0837b476e463")
    assert sequencer_newer("7", "617f0837b476e463") and not sequencer_newer("6", "617f0837b476e463")
    assert not sequencer_newer(None, "1") and not sequencer_newer("1", None)


def test_within_one_batch_only_the_newest_deletion_of_a_key_acts() -> None:
    old, new = Deletion("b", "k", "00AA"), Deletion("b", "k", "00AB")
    other = Deletion("b", "j", "0001")
    assert latest_per_key([old, new, other]) == ([new, other], [old])


@pytest.mark.parametrize("deletes", [True, False])
def test_a_replication_job_with_deletes_on_records_what_it_copied_and_others_record_nothing(
    pipeline, deletes
) -> None:
    from conftest import PIPELINE_TABLE, FakeLambdaContext
    from handlers import copy_batch, prepare

    pipeline.s3.put_object(Bucket="src", Key="data/a.txt", Body=b"replicated")
    spec = {
        "source": {"bucket": "src", "prefix": "data"},
        "destination": {"bucket": "dst", "prefix": "copy"},
        "replication": {"name": "photos", "deletes": deletes},
    }
    job = prepare.handler(
        {"spec": spec, "execution_name": "e1", "execution_arn": "arn:aws:states:::execution:x:e1"},
        FakeLambdaContext(),
    )
    items = [{"key": "data/a.txt", "sequencer": "617f08299329d189"}]  # a JSON Lines manifest row

    out = copy_batch.handler({"job": job, "items": items, "pass": 1}, FakeLambdaContext())

    assert out["counts"]["copied"] == 1
    record = DynamoCopyRecords(pipeline.dynamodb, PIPELINE_TABLE).get("dst", "copy/a.txt")
    if not deletes:
        assert record is None
        return
    head = pipeline.s3.head_object(Bucket="dst", Key="copy/a.txt")
    assert record is not None
    assert (record.dest_etag, record.size, record.source_key, record.sequencer, record.replication) == (
        head["ETag"].strip('"'),
        10,
        "data/a.txt",
        "617f08299329d189",
        "photos",
    )


def test_the_job_spec_carries_its_replication_and_refuses_a_wrong_one() -> None:
    from ferry.jobspec import ReplicationTag, SpecError, parse_job_spec

    base = {"job_id": "j", "source": {"bucket": "src"}, "destination": {"bucket": "dst"}}
    spec = parse_job_spec({**base, "replication": {"name": "photos", "deletes": True}})
    assert spec.replication == ReplicationTag("photos", True)
    assert parse_job_spec(spec.to_dict()) == spec
    assert parse_job_spec(base).replication is None and "replication" not in parse_job_spec(base).to_dict()
    with pytest.raises(SpecError, match=r"^replication.deletes: must be true or false"):
        parse_job_spec({**base, "replication": {"name": "photos", "deletes": "yes"}})


def test_a_deleted_source_key_refused_with_403_by_prefix_only_listing_is_proved_absent(
    versitygw, records
) -> None:
    """The deleting role may list only under the configured prefixes (StringLike s3:prefix): a
    HEAD of the deleted (missing) source key then answers 403, not 404 (HeadObject,
    "Permissions"). A listing with the key as its prefix proves it absent."""
    from engine.test_bucket_scope import PrefixOnlyListing

    scene = Scene(versitygw, versioned=False)
    scene.put("iam.txt", b"x")
    scene.copy(records, "iam.txt")
    source = boto3.client(
        "s3", endpoint_url=versitygw.url, region_name="us-east-1", config=versitygw.client.meta.config
    )
    PrefixOnlyListing(versitygw, source, scene.src, "in/", denied_keys=set())

    (outcome,) = apply_deletes(
        [scene.delete_source("iam.txt", "617f0837b476e463")],
        source_client=source,
        destination_client=scene.s3,
        record_store=records,
        replication=scene.route,
    )

    assert outcome.status == DeleteStatus.DELETED, outcome.reason
    assert scene.dest_keys() == []


def test_a_destination_that_cannot_be_read_fails_that_deletion_with_the_reason(versitygw, records) -> None:
    from engine.test_bucket_scope import PrefixOnlyListing

    scene = Scene(versitygw, versioned=False)
    scene.put("denied.txt", b"x")
    scene.put("fine.txt", b"y")
    scene.copy(records, "denied.txt", "fine.txt")
    destination = boto3.client(
        "s3", endpoint_url=versitygw.url, region_name="us-east-1", config=versitygw.client.meta.config
    )
    PrefixOnlyListing(versitygw, destination, scene.dst, "out/", denied_keys={"out/denied.txt"})

    outcomes = apply_deletes(
        [scene.delete_source("denied.txt", "01"), scene.delete_source("fine.txt", "02")],
        source_client=scene.s3,
        destination_client=destination,
        record_store=records,
        replication=scene.route,
    )

    assert [o.status for o in outcomes] == [DeleteStatus.FAILED, DeleteStatus.DELETED]
    assert outcomes[0].reason.startswith("not deleted: AccessDenied on s3:GetObject (HEAD) s3://")
    assert "out/denied.txt" in outcomes[0].reason
    assert scene.dest_keys() == ["out/denied.txt"]
    assert DeleteCounts.of(outcomes).failed == 1


def test_a_lifecycle_expiration_at_the_source_is_not_replicated(minio, records) -> None:
    """As S3 Replication does not replicate lifecycle delete markers (user guide,
    delete-marker-replication.html); the event as its "using lifecycle expiration" example."""
    scene = Scene(minio, versioned=False)
    scene.put("expired.txt", b"x")
    scene.copy(records, "expired.txt")
    scene.s3.delete_object(Bucket=scene.src, Key="in/expired.txt")
    event = deleted_event(scene.src, "in/expired.txt", "617b398000000000", reason="Lifecycle Expiration")

    (outcome,) = scene.apply(records, [Deletion.from_event(event)])

    assert outcome.status == DeleteStatus.KEPT and "lifecycle rule expired it" in outcome.reason
    assert scene.dest_keys() == ["out/expired.txt"]


# -- keys as written or URL-encoded (event_keys) -----------------------------------------------


def test_a_deletion_whose_key_two_copies_may_carry_deletes_neither_and_fails_with_the_reason(
    versitygw, records
) -> None:
    """'in/x+y.txt' as delivered names 'in/x+y.txt' or, decoded, 'in/x y.txt'; both were copied
    by an earlier version of Ferry (records without the event's spelling) and both are gone at
    the source: which copy to delete is a guess, so none is, and the deletion fails loudly."""
    scene = Scene(versitygw, versioned=False)
    scene.put("x+y.txt", b"plus")
    scene.put("x y.txt", b"space")
    scene.copy(records, "x+y.txt", "x y.txt", sequencer="01")
    for key in ("x+y.txt", "x y.txt"):
        scene.s3.delete_object(Bucket=scene.src, Key=f"in/{key}")
    deletion = Deletion.from_event(deleted_event(scene.src, "in/x+y.txt", "02"))

    (outcome,) = scene.apply(records, [deletion])

    assert outcome.status == DeleteStatus.FAILED
    assert "may name 'in/x+y.txt' or 'in/x y.txt'" in (outcome.reason or "")
    assert sorted(scene.dest_keys()) == ["out/x y.txt", "out/x+y.txt"]


def test_a_deletion_with_two_forms_and_nothing_to_delete_under_either_is_kept(versitygw, records) -> None:
    scene = Scene(versitygw, versioned=False)
    deletion = Deletion.from_event(deleted_event(scene.src, "in/a%2Bb.txt", "02"))

    (outcome,) = scene.apply(records, [deletion])

    assert outcome.status == DeleteStatus.KEPT and "nothing to delete" in (outcome.reason or "")


def test_the_copy_record_of_a_create_spelled_alike_decides_which_key_a_deletion_names(
    versitygw, records
) -> None:
    """Both readings of one spelling: as written ('a%2Bb.txt' is the key) and encoded ('a+b.txt'
    arrives as 'a%2Bb.txt'). The record keeps the create's spelling; the deletion spelled alike
    deletes that copy and only it."""
    scene = Scene(versitygw, versioned=False)
    for key in ("a%2Bb.txt", "a+b.txt"):
        scene.put(key, key.encode())
    pairs = [
        (SourceObject(scene.src, f"in/{k}"), Target(scene.dst, f"out/{k}")) for k in ("a%2Bb.txt", "a+b.txt")
    ]
    with Copier(versitygw.endpoint, versitygw.endpoint, CopyPolicy()) as copier:
        results = copier.copy_batch(pairs)
    items = [
        {"key": "in/a%2Bb.txt", "sequencer": "01", "event_key": "in/a%2Bb.txt"},  # delivered as written
        {"key": "in/a+b.txt", "sequencer": "01", "event_key": "in/a%252Bb.txt"},  # delivered encoded
    ]
    record_copies(
        zip(items, results, strict=True),
        destination_client=scene.s3,
        record_store=records,
        replication="photos",
        job_id="job-1",
    )
    scene.s3.delete_object(Bucket=scene.src, Key="in/a%2Bb.txt")
    scene.s3.delete_object(Bucket=scene.src, Key="in/a+b.txt")

    (outcome,) = scene.apply(records, [Deletion.from_event(deleted_event(scene.src, "in/a%2Bb.txt", "02"))])

    assert (outcome.status, outcome.source_key, outcome.dest_key) == (
        DeleteStatus.DELETED,
        "in/a%2Bb.txt",
        "out/a%2Bb.txt",
    )
    assert scene.dest_keys() == ["out/a+b.txt"]


def test_the_delete_marker_decides_which_key_a_deletion_names_on_a_versioned_source(
    versitygw, records
) -> None:
    """No record spells the key, but the marker's version id is found under one form only."""
    scene = Scene(versitygw, versioned=True)
    scene.put("c++.txt", b"c plus plus")
    scene.copy(None, "c++.txt")
    deletion = scene.delete_source("c++.txt", "02")  # spelled as written: 'in/c++.txt'

    (outcome,) = scene.apply(records, [deletion])

    assert (outcome.status, outcome.dest_key) == (DeleteStatus.DELETED, "out/c++.txt"), outcome.reason
