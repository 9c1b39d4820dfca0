"""Upload marks on real servers: Ferry finds, lists and aborts only the uploads it marked."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ferry.engine.records.upload_marks import (
    DEFAULT_MARKS_PREFIX,
    NULL_VERSION,
    UploadMark,
    abort_ferry_upload,
    delete_mark,
    key_uploads,
    list_ferry_uploads,
    list_orphan_marks,
    mark_key,
    read_mark,
    write_mark,
)


@pytest.fixture(params=["versitygw", "minio"])
def server(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


def _mark(key: str, upload_id: str, **changes: Any) -> UploadMark:
    values: dict[str, Any] = {
        "dest_key": key,
        "upload_id": upload_id,
        "job_id": None,
        "source_bucket": "src",
        "source_key": "big.bin",
        "source_version": None,
        "source_etag": "0123abcd-3",
        "source_size": 15 * 1024 * 1024,
        "strategy": "stream-multipart",
        "algorithm": "CRC32C",
        "part_bounds": ((0, 5242879), (5242880, 10485759), (10485760, 15728639)),
        "created": datetime(2026, 11, 23, 1, 2, 3, tzinfo=UTC),
    }
    values.update(changes)
    return UploadMark(**values)


def _create(client: Any, bucket: str, key: str, *, marked: bool, prefix: str = DEFAULT_MARKS_PREFIX) -> str:
    upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    if marked:
        write_mark(client, bucket, _mark(key, upload_id), marks_prefix=prefix)
    return upload_id


def test_mark_round_trips_and_lives_where_the_contract_says() -> None:
    mark = _mark("dir/ké y", "upload-1", job_id="job-7", source_version="v1")
    assert UploadMark.from_json(mark.to_json()) == mark
    key = mark_key("dir/ké y", "upload-1")
    head, name = key.rsplit("/", 1)
    assert head.startswith(".ferry/uploads/") and len(head.rsplit("/", 1)[1]) == 32
    assert name.endswith(".json") and len(name) == 32 + len(".json")
    assert mark_key("dir/ké y", "upload-1", "other/").startswith("other/")
    with pytest.raises(ValueError, match="format version"):
        UploadMark.from_json('{"version": 99}')
    with pytest.raises(ValueError, match="not an upload mark"):
        UploadMark.from_json("[1, 2]")


def test_only_marked_uploads_of_the_exact_key_are_found(server: Any) -> None:
    client, bucket = server.client, server.bucket("marks")
    ours = _create(client, bucket, "data/big.bin", marked=True)
    theirs = _create(client, bucket, "data/big.bin", marked=False)
    longer = _create(client, bucket, "data/big.bin.2", marked=True)
    found = list(key_uploads(client, bucket, "data/big.bin"))
    assert [(u.key, u.upload_id) for u in found] == [("data/big.bin", ours)]
    assert found[0].mark == _mark("data/big.bin", ours)
    assert found[0].initiated.tzinfo is not None
    assert read_mark(client, bucket, "data/big.bin", theirs) is None
    assert {u.upload_id for u in key_uploads(client, bucket, "data/big.bin.2")} == {longer}


def test_listing_aborting_and_orphans_never_touch_unmarked_uploads(server: Any) -> None:
    client, bucket = server.client, server.bucket("marks")
    a = _create(client, bucket, "in/a.bin", marked=True)
    b = _create(client, bucket, "in/b.bin", marked=True)
    outside = _create(client, bucket, "out/c.bin", marked=True)
    theirs = _create(client, bucket, "in/a.bin", marked=False)

    listed = list(list_ferry_uploads(client, bucket, key_prefix="in/"))
    assert sorted((u.key, u.upload_id) for u in listed) == [("in/a.bin", a), ("in/b.bin", b)]
    assert {u.upload_id for u in list_ferry_uploads(client, bucket)} == {a, b, outside}

    for upload in listed:
        abort_ferry_upload(client, bucket, upload)
    remaining = {(u["Key"], u["UploadId"]) for u in server.open_uploads(bucket)}
    assert remaining == {("out/c.bin", outside), ("in/a.bin", theirs)}
    assert read_mark(client, bucket, "in/a.bin", a) is None
    assert list(list_ferry_uploads(client, bucket, key_prefix="in/")) == []

    # An upload that ended while its mark stayed (a crash between Complete and the delete):
    client.abort_multipart_upload(Bucket=bucket, Key="out/c.bin", UploadId=outside)
    orphans = list(list_orphan_marks(client, bucket))
    assert [(m.dest_key, m.upload_id) for m in orphans] == [("out/c.bin", outside)]
    delete_mark(client, bucket, "out/c.bin", outside)
    assert list(list_orphan_marks(client, bucket)) == []
    assert {u["UploadId"] for u in server.open_uploads(bucket)} == {theirs}


def test_marks_prefix_is_configurable(server: Any) -> None:
    client, bucket = server.client, server.bucket("marks")
    upload_id = _create(client, bucket, "k.bin", marked=True, prefix="ops/ferry-marks/")
    assert [k for k in server.keys(bucket)] == [mark_key("k.bin", upload_id, "ops/ferry-marks/")]
    assert list(key_uploads(client, bucket, "k.bin")) == []
    found = list(list_ferry_uploads(client, bucket, marks_prefix="ops/ferry-marks/"))
    assert [u.upload_id for u in found] == [upload_id]


def test_a_mark_naming_another_upload_is_ignored(server: Any) -> None:
    client, bucket = server.client, server.bucket("marks")
    upload_id = _create(client, bucket, "k.bin", marked=False)
    forged = _mark("k.bin", "some-other-upload")
    client.put_object(Bucket=bucket, Key=mark_key("k.bin", upload_id), Body=forged.to_json().encode())
    assert read_mark(client, bucket, "k.bin", upload_id) is None
    assert list(key_uploads(client, bucket, "k.bin")) == []
    assert list(list_ferry_uploads(client, bucket)) == []


@pytest.mark.parametrize("versioning", ["Enabled", "Suspended", None])
def test_a_mark_is_deleted_by_its_version_whatever_the_buckets_versioning(
    server: Any, versioning: Any
) -> None:
    """Written, read back and deleted as each door does it: by the version its PUT answered,
    by the one a GET read it from, or by the one a HEAD finds; in a versioned or suspended
    bucket nothing of it stays (no version, no delete marker: a suspended bucket's plain
    delete would leave a `null` one)."""
    client, bucket = server.client, server.bucket("marks")
    if versioning:
        client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": versioning})
    ids = [_create(client, bucket, "k.bin", marked=False) for _ in range(3)]
    stored = write_mark(client, bucket, _mark("k.bin", ids[0]))
    write_mark(client, bucket, _mark("k.bin", ids[1]))
    write_mark(client, bucket, _mark("k.bin", ids[2]))
    assert (stored == NULL_VERSION) == (versioning != "Enabled")

    delete_mark(client, bucket, "k.bin", ids[0], stored_as=stored)  # as the writing run
    read = read_mark(client, bucket, "k.bin", ids[1])
    assert read is not None and read.stored_as is not None
    delete_mark(client, bucket, "k.bin", ids[1], stored_as=read.stored_as)  # as a resuming run
    delete_mark(client, bucket, "k.bin", ids[2])  # known from a checkpoint only: HEAD first
    delete_mark(client, bucket, "k.bin", ids[2])  # gone already: nothing to do

    answer = client.list_object_versions(Bucket=bucket, Prefix=DEFAULT_MARKS_PREFIX)
    assert answer.get("Versions", []) == [] and answer.get("DeleteMarkers", []) == []


class _Refusing:
    """A client whose DeleteObject with a VersionId answers `code`: an identity without
    s3:DeleteObjectVersion (AccessDenied), or a store with no versions."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.calls: list[dict[str, Any]] = []

    def delete_object(self, **params: Any) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        self.calls.append(params)
        if "VersionId" in params:
            raise ClientError({"Error": {"Code": self.code, "Message": "no"}}, "DeleteObject")
        return {}


def test_a_null_version_refused_is_deleted_plainly_and_a_real_version_refused_is_raised() -> None:
    """A bucket that gave no version id holds the mark as its `null` version: where deleting a
    version is refused, the plain delete removes it. A real version id refused is raised, as
    a plain delete would only stack a delete marker on it."""
    from botocore.exceptions import ClientError

    client = _Refusing("AccessDenied")
    delete_mark(client, "b", "k", "u", stored_as=NULL_VERSION)
    assert client.calls == [
        {"Bucket": "b", "Key": mark_key("k", "u"), "VersionId": NULL_VERSION},
        {"Bucket": "b", "Key": mark_key("k", "u")},
    ]
    client = _Refusing("AccessDenied")
    with pytest.raises(ClientError, match="AccessDenied"):
        delete_mark(client, "b", "k", "u", stored_as="3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY")
    assert len(client.calls) == 1
