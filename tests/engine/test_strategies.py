"""Every copy strategy, end to end against real S3 servers: bytes, headers, metadata, tags and proof.

versitygw is the faithful server (it validates checksums and stores every attribute but the
storage class); moto stands in for storage classes and for objects stored without checksums.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import math
import os
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ferry import Copier, CopyPolicy, SourceObject, Status, Target
from ferry.s3.clients import make_client

MiB = 1024 * 1024
PART = 5 * MiB

CONTENT = {
    "ContentType": "application/x-ferry-test",
    "ContentEncoding": "gzip",
    "ContentDisposition": 'attachment; filename="report.bin"',
    "ContentLanguage": "fr-CA",
    "CacheControl": "max-age=3600, must-revalidate",
    "Expires": dt.datetime(2031, 5, 17, 12, 30, tzinfo=dt.UTC),
}
METADATA = {"owner": "ferry-tests", "project": "strategies"}
TAGS = {"team": "storage", "tier": "gold"}

SIZES = {
    "empty": 0,
    "one-byte": 1,
    "just-under-5MiB": PART - 1,
    "exactly-5MiB": PART,
    "just-over-5MiB": PART + 1,
    "12MiB": 12 * MiB,
    "17MiB-and-3": 17 * MiB + 3,
}


def put_source(client: Any, bucket: str, key: str, data: bytes, **extra: Any) -> None:
    client.put_object(
        Bucket=bucket,
        Key=key,
        Body=data,
        **CONTENT,
        Metadata=METADATA,
        Tagging="team=storage&tier=gold",
        **extra,
    )


def put_multipart_source(
    client: Any, bucket: str, key: str, data: bytes, part_size: int = PART, **create: Any
) -> dict[str, Any]:
    """Upload `data` in `part_size` parts; `create` may ask for a checksum (sent per part too)."""
    upload = client.create_multipart_upload(
        Bucket=bucket, Key=key, **CONTENT, Metadata=METADATA, Tagging="team=storage&tier=gold", **create
    )
    algorithm = create.get("ChecksumAlgorithm")
    parts = []
    for number, start in enumerate(range(0, len(data), part_size), start=1):
        args = {"ChecksumAlgorithm": algorithm} if algorithm else {}
        response = client.upload_part(
            Bucket=bucket,
            Key=key,
            UploadId=upload["UploadId"],
            PartNumber=number,
            Body=data[start : start + part_size],
            **args,
        )
        part = {"PartNumber": number, "ETag": response["ETag"]}
        if algorithm:
            part[f"Checksum{algorithm}"] = response[f"Checksum{algorithm}"]
        parts.append(part)
    client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload["UploadId"], MultipartUpload={"Parts": parts}
    )
    return client.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")


def get_bytes(client: Any, bucket: str, key: str) -> bytes:
    return client.get_object(Bucket=bucket, Key=key)["Body"].read()


def tags_of(client: Any, bucket: str, key: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in client.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]}


def assert_same_object(
    server: Any, src: str, dst: str, key: str, data: bytes, dest_key: str | None = None
) -> dict:
    """The copy has the source's bytes, content headers, metadata and tags."""
    dest_key = dest_key or key
    body = get_bytes(server.client, dst, dest_key)
    assert len(body) == len(data)
    assert hashlib.sha256(body).digest() == hashlib.sha256(data).digest()
    head = server.client.head_object(Bucket=dst, Key=dest_key, ChecksumMode="ENABLED")
    for name, value in CONTENT.items():
        assert head.get(name) == value, name
    assert head["Metadata"] == METADATA
    assert tags_of(server.client, dst, dest_key) == TAGS
    assert server.open_uploads(dst) == []
    return head


def policy(mode: str, **overrides: Any) -> CopyPolicy:
    return CopyPolicy(mode=mode, multipart_threshold=PART, part_size=PART, **overrides)


class DenyingCopyClient:
    """A real client whose CopyObject is refused, as for an identity that cannot read the source."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.copy_calls = 0

    def copy_object(self, **kwargs: Any) -> Any:
        self.copy_calls += 1
        raise ClientError(
            {
                "Error": {"Code": "AccessDenied", "Message": "Access Denied"},
                "ResponseMetadata": {"HTTPStatusCode": 403},
            },
            "CopyObject",
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class RecordingClient:
    """A real client that counts the operations the engine calls on it."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute) or name.startswith(("get_paginator", "meta")):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return attribute(*args, **kwargs)

        return call


# -- every strategy at every size boundary -----------------------------------------------------


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_stream_copy_preserves_bytes_and_attributes_at_every_size(versitygw, vgw_buckets, size):
    src, dst = vgw_buckets
    data = os.urandom(size)
    put_source(versitygw.client, src, "obj.bin", data)
    source_head = versitygw.client.head_object(Bucket=src, Key="obj.bin", ChecksumMode="ENABLED")

    with Copier(versitygw.endpoint, versitygw.endpoint, policy("stream")) as copier:
        result = copier.copy(SourceObject(src, "obj.bin"), Target(dst, "obj.bin"))

    assert result.status == Status.COPIED, result.reason
    assert result.strategy == ("stream" if size <= PART else "stream-multipart")
    # versitygw stores a CRC64NVME of every PUT: the copy is proved by it, never by size alone.
    assert result.verified_by == "crc64nvme (full object)"
    assert result.bytes == size
    head = assert_same_object(versitygw, src, dst, "obj.bin", data)
    assert head["ChecksumCRC64NVME"] == source_head["ChecksumCRC64NVME"]
    assert result.checksum == f"CRC64NVME:{source_head['ChecksumCRC64NVME']}"
    if size > PART:  # written in 5 MiB parts, the last one shorter
        assert head["ETag"].strip('"').endswith(f"-{math.ceil(size / PART)}")


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_server_side_copy_preserves_bytes_and_attributes_at_every_size(versitygw, vgw_buckets, size):
    src, dst = vgw_buckets
    data = os.urandom(size)
    put_source(versitygw.client, src, "obj.bin", data)
    source_head = versitygw.client.head_object(Bucket=src, Key="obj.bin")

    with Copier(versitygw.endpoint, versitygw.endpoint, policy("server-side")) as copier:
        result = copier.copy(SourceObject(src, "obj.bin"), Target(dst, "obj.bin"))

    assert result.status == Status.COPIED, result.reason
    # One CopyObject copies up to 5 GiB; it keeps a single-part source's ETag.
    assert result.strategy == "server-side"
    assert result.verified_by == "etag"
    assert result.bytes == size
    head = assert_same_object(versitygw, src, dst, "obj.bin", data)
    assert head["ETag"] == source_head["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'


# -- multipart sources: the part layout is reproduced, so the ETag is too ----------------------


@pytest.mark.parametrize(
    "mode,source_algorithm,strategy,verified_by",
    [
        ("stream", "CRC32C", "stream-multipart", "crc32c (composite)"),
        # Any COMPOSITE source checksum is recomputed from the parts and beats the ETag as evidence.
        ("stream", "SHA256", "stream-multipart", "sha256 (composite)"),
        # Server-side from a SHA256 source: versitygw's UploadPartCopy into an upload of the same
        # algorithm as the source's stored checksum answers with the source's whole-object value
        # (for a COMPOSITE CRC32C source "...-3", which its CompleteMultipartUpload then rejects
        # as "Invalid Base64"); Ferry uploads CRC32C here, so a SHA256 source avoids that bug.
        ("server-side", "SHA256", "server-side-multipart", "etag"),
    ],
)
def test_multipart_source_is_copied_in_its_own_part_layout_so_etags_match(
    versitygw, vgw_buckets, mode, source_algorithm, strategy, verified_by
):
    src, dst = vgw_buckets
    data = os.urandom(12 * MiB + 7)  # parts of 5 MiB, 5 MiB and 2 MiB + 7
    source_head = put_multipart_source(
        versitygw.client, src, "big.bin", data, ChecksumAlgorithm=source_algorithm
    )
    assert source_head["ChecksumType"] == "COMPOSITE"
    assert source_head["ETag"].strip('"').endswith("-3")

    # No part size: the engine learns the source's layout instead of choosing its own.
    copy_policy = CopyPolicy(mode=mode, multipart_threshold=PART)
    with Copier(versitygw.endpoint, versitygw.endpoint, copy_policy) as copier:
        result = copier.copy(SourceObject(src, "big.bin"), Target(dst, "big.bin"))

    assert result.status == Status.COPIED, result.reason
    assert result.strategy == strategy
    assert result.verified_by == verified_by
    head = assert_same_object(versitygw, src, dst, "big.bin", data)
    assert head["ETag"] == source_head["ETag"]
    for number, expected in ((1, PART), (2, PART), (3, 2 * MiB + 7)):
        part = versitygw.client.head_object(Bucket=dst, Key="big.bin", PartNumber=number)
        assert part["ContentLength"] == expected


def test_stream_copy_of_multipart_source_without_checksum_is_proved_by_etag(motoserver, moto_buckets):
    src, dst = moto_buckets
    data = os.urandom(11 * MiB)
    source_head = put_multipart_source(motoserver.client, src, "big.bin", data)
    assert not any(k.startswith("Checksum") and k != "ChecksumType" for k in source_head)

    with Copier(
        motoserver.endpoint, motoserver.endpoint, CopyPolicy(mode="stream", multipart_threshold=PART)
    ) as c:
        result = c.copy(SourceObject(src, "big.bin"), Target(dst, "big.bin"))

    assert result.status == Status.COPIED, result.reason
    assert result.strategy == "stream-multipart"
    assert result.verified_by == "etag"
    assert get_bytes(motoserver.client, dst, "big.bin") == data
    assert motoserver.client.head_object(Bucket=dst, Key="big.bin")["ETag"] == source_head["ETag"]


def test_server_side_copy_of_multipart_source_without_checksum_uses_upload_part_copy(
    motoserver, moto_buckets
):
    """CopyObject would give a multipart source a new single-part ETag that proves nothing;
    without a full-object checksum the engine copies part by part so the ETag still matches."""
    src, dst = moto_buckets
    data = os.urandom(11 * MiB)
    source_head = put_multipart_source(motoserver.client, src, "big.bin", data)
    dest_client = RecordingClient(make_client(motoserver.endpoint))

    with Copier(
        motoserver.endpoint,
        motoserver.endpoint,
        CopyPolicy(mode="server-side", multipart_threshold=PART),
        dest_client=dest_client,
    ) as copier:
        result = copier.copy(SourceObject(src, "big.bin"), Target(dst, "big.bin"))

    assert result.status == Status.COPIED, result.reason
    assert result.strategy == "server-side-multipart"
    assert result.verified_by == "etag"
    assert dest_client.calls.count("upload_part_copy") == 3
    assert "copy_object" not in dest_client.calls
    assert get_bytes(motoserver.client, dst, "big.bin") == data
    head = motoserver.client.head_object(Bucket=dst, Key="big.bin")
    assert head["ETag"] == source_head["ETag"]
    assert head["Metadata"] == METADATA
    assert head["ContentType"] == CONTENT["ContentType"]
    assert tags_of(motoserver.client, dst, "big.bin") == TAGS
    assert motoserver.open_uploads(dst) == []


# -- overrides: storage class, metadata, tags ----------------------------------------------------


@pytest.mark.parametrize("mode", ["server-side", "stream"])
@pytest.mark.parametrize("size", [2048, 7 * MiB], ids=["small", "multipart"])
def test_storage_class_is_preserved_by_default(motoserver, moto_buckets, mode, size):
    src, dst = moto_buckets
    data = os.urandom(size)
    motoserver.client.put_object(Bucket=src, Key="ia.bin", Body=data, StorageClass="STANDARD_IA")

    with Copier(motoserver.endpoint, motoserver.endpoint, policy(mode)) as copier:
        result = copier.copy(SourceObject(src, "ia.bin"), Target(dst, "ia.bin"))

    assert result.status == Status.COPIED, result.reason
    assert motoserver.client.head_object(Bucket=dst, Key="ia.bin")["StorageClass"] == "STANDARD_IA"
    assert get_bytes(motoserver.client, dst, "ia.bin") == data


@pytest.mark.parametrize("mode", ["server-side", "stream"])
@pytest.mark.parametrize("size", [2048, 7 * MiB], ids=["small", "multipart"])
def test_storage_class_option_replaces_the_sources(motoserver, moto_buckets, mode, size):
    src, dst = moto_buckets
    data = os.urandom(size)
    motoserver.client.put_object(Bucket=src, Key="obj.bin", Body=data, StorageClass="STANDARD_IA")

    with Copier(motoserver.endpoint, motoserver.endpoint, policy(mode, storage_class="glacier_ir")) as copier:
        result = copier.copy(SourceObject(src, "obj.bin"), Target(dst, "obj.bin"))

    assert result.status == Status.COPIED, result.reason
    assert motoserver.client.head_object(Bucket=dst, Key="obj.bin")["StorageClass"] == "GLACIER_IR"
    assert get_bytes(motoserver.client, dst, "obj.bin") == data


@pytest.mark.parametrize("mode", ["server-side", "stream"])
def test_standard_storage_class_option_moves_an_infrequent_access_object_back(motoserver, moto_buckets, mode):
    src, dst = moto_buckets
    motoserver.client.put_object(Bucket=src, Key="ia.bin", Body=b"cold", StorageClass="STANDARD_IA")

    with Copier(motoserver.endpoint, motoserver.endpoint, policy(mode, storage_class="standard")) as copier:
        result = copier.copy(SourceObject(src, "ia.bin"), Target(dst, "ia.bin"))

    assert result.status == Status.COPIED, result.reason
    assert (
        motoserver.client.head_object(Bucket=dst, Key="ia.bin").get("StorageClass", "STANDARD") == "STANDARD"
    )


@pytest.mark.parametrize("mode", ["server-side", "stream"])
@pytest.mark.parametrize("size", [2048, 7 * MiB], ids=["small", "multipart"])
def test_metadata_and_tags_options_replace_the_sources(versitygw, vgw_buckets, mode, size):
    src, dst = vgw_buckets
    data = os.urandom(size)
    put_source(versitygw.client, src, "obj.bin", data)
    new_metadata = {"reviewed": "yes"}
    new_tags = {"copied-by": "ferry", "stage": "archive"}

    with Copier(
        versitygw.endpoint, versitygw.endpoint, policy(mode, metadata=new_metadata, tags=new_tags)
    ) as copier:
        result = copier.copy(SourceObject(src, "obj.bin"), Target(dst, "obj.bin"))

    assert result.status == Status.COPIED, result.reason
    head = versitygw.client.head_object(Bucket=dst, Key="obj.bin")
    assert head["Metadata"] == new_metadata
    assert tags_of(versitygw.client, dst, "obj.bin") == new_tags
    # Replacing metadata keeps the content headers: they describe the bytes, not the owner.
    for name, value in CONTENT.items():
        assert head.get(name) == value, name
    assert get_bytes(versitygw.client, dst, "obj.bin") == data


@pytest.mark.parametrize("mode", ["server-side", "stream"])
def test_tags_are_dropped_when_not_preserved(versitygw, vgw_buckets, mode):
    src, dst = vgw_buckets
    put_source(versitygw.client, src, "obj.bin", b"tagged")

    with Copier(versitygw.endpoint, versitygw.endpoint, policy(mode, preserve_tags=False)) as copier:
        result = copier.copy(SourceObject(src, "obj.bin"), Target(dst, "obj.bin"))

    assert result.status == Status.COPIED, result.reason
    assert tags_of(versitygw.client, dst, "obj.bin") == {}
    assert versitygw.client.head_object(Bucket=dst, Key="obj.bin")["Metadata"] == METADATA


# -- checksum algorithm ------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC64NVME", "SHA256"])
@pytest.mark.parametrize("size", [3000, 12 * MiB + 5], ids=["single", "multipart"])
def test_stream_copy_writes_the_chosen_checksum_algorithm(versitygw, vgw_buckets, algorithm, size):
    src, dst = vgw_buckets
    data = os.urandom(size)
    put_source(versitygw.client, src, "obj.bin", data)

    with Copier(
        versitygw.endpoint, versitygw.endpoint, policy("stream", checksum_algorithm=algorithm.lower())
    ) as c:
        result = c.copy(SourceObject(src, "obj.bin"), Target(dst, "obj.bin"))

    assert result.status == Status.COPIED, result.reason
    # The source's own CRC64NVME is computed alongside, so the proof does not depend on the choice.
    assert result.verified_by == "crc64nvme (full object)"
    head = versitygw.client.head_object(Bucket=dst, Key="obj.bin", ChecksumMode="ENABLED")
    stored = head.get(f"Checksum{algorithm}")
    assert stored, f"destination stores no {algorithm}: {head}"
    assert result.checksum == f"{algorithm}:{stored}"
    if size <= PART or algorithm != "SHA256":
        assert head["ChecksumType"] == "FULL_OBJECT"
        if algorithm == "SHA256":
            assert stored == base64.b64encode(hashlib.sha256(data).digest()).decode()
    else:
        assert head["ChecksumType"] == "COMPOSITE"
        assert stored.endswith("-3")
    assert get_bytes(versitygw.client, dst, "obj.bin") == data


# -- auto mode -----------------------------------------------------------------------------------


def test_auto_mode_copies_server_side_within_one_endpoint(versitygw, vgw_buckets):
    src, dst = vgw_buckets
    data = os.urandom(6 * MiB)
    put_source(versitygw.client, src, "obj.bin", data)

    with Copier(versitygw.endpoint, versitygw.endpoint, policy("auto")) as copier:
        result = copier.copy(SourceObject(src, "obj.bin"), Target(dst, "obj.bin"))

    assert result.status == Status.COPIED, result.reason
    assert result.strategy == "server-side"
    assert result.note is None
    assert_same_object(versitygw, src, dst, "obj.bin", data)


@pytest.mark.parametrize("size", [4096, 7 * MiB], ids=["single", "multipart"])
def test_auto_mode_streams_between_different_endpoints(versitygw, motoserver, size):
    src, dst = versitygw.bucket("src"), motoserver.bucket("dst")
    data = os.urandom(size)
    put_source(versitygw.client, src, "obj.bin", data)

    with Copier(versitygw.endpoint, motoserver.endpoint, policy("auto")) as copier:
        result = copier.copy(SourceObject(src, "obj.bin"), Target(dst, "obj.bin"))

    assert result.status == Status.COPIED, result.reason
    assert result.strategy == ("stream" if size <= PART else "stream-multipart")
    assert "different endpoints" in (result.note or "")
    assert result.verified_by == "crc64nvme (full object)"
    assert get_bytes(motoserver.client, dst, "obj.bin") == data
    head = motoserver.client.head_object(Bucket=dst, Key="obj.bin")
    assert head["Metadata"] == METADATA
    assert head["ContentType"] == CONTENT["ContentType"]
    assert tags_of(motoserver.client, dst, "obj.bin") == TAGS


def test_stream_from_a_source_without_checksum_is_proved_by_md5(motoserver, versitygw):
    """moto stores no checksum for a plain PUT: the single-part ETag (an MD5) is the proof."""
    src, dst = motoserver.bucket("src"), versitygw.bucket("dst")
    data = os.urandom(300_000)
    put_source(motoserver.client, src, "obj.bin", data)

    with Copier(motoserver.endpoint, versitygw.endpoint, policy("auto")) as copier:
        result = copier.copy(SourceObject(src, "obj.bin"), Target(dst, "obj.bin"))

    assert result.status == Status.COPIED, result.reason
    assert result.strategy == "stream"
    assert result.verified_by == "md5"
    assert_same_object(versitygw, src, dst, "obj.bin", data)


def test_auto_mode_streams_when_server_side_copy_is_denied(versitygw, vgw_buckets):
    src, dst = vgw_buckets
    first, second = os.urandom(1000), os.urandom(2000)
    put_source(versitygw.client, src, "first.bin", first)
    put_source(versitygw.client, src, "second.bin", second)
    dest_client = DenyingCopyClient(make_client(versitygw.endpoint))

    with Copier(versitygw.endpoint, versitygw.endpoint, policy("auto"), dest_client=dest_client) as copier:
        result = copier.copy(SourceObject(src, "first.bin"), Target(dst, "first.bin"))
        later = copier.copy(SourceObject(src, "second.bin"), Target(dst, "second.bin"))

    assert result.status == Status.COPIED, result.reason
    assert result.strategy == "stream"
    assert "denied" in (result.note or "") and "streamed" in result.note
    assert result.verified_by == "crc64nvme (full object)"
    assert_same_object(versitygw, src, dst, "first.bin", first)
    # Once denied, later objects stream straight away instead of being refused again.
    assert later.status == Status.COPIED, later.reason
    assert later.strategy == "stream"
    assert "denied" in (later.note or "")
    assert dest_client.copy_calls == 1
    assert_same_object(versitygw, src, dst, "second.bin", second)


def test_forced_server_side_copy_that_is_denied_fails_with_the_reason(versitygw, vgw_buckets):
    src, dst = vgw_buckets
    put_source(versitygw.client, src, "obj.bin", b"secret")
    dest_client = DenyingCopyClient(make_client(versitygw.endpoint))

    with Copier(
        versitygw.endpoint, versitygw.endpoint, policy("server-side"), dest_client=dest_client
    ) as copier:
        result = copier.copy(SourceObject(src, "obj.bin"), Target(dst, "obj.bin"))

    assert result.status == Status.FAILED
    assert "AccessDenied" in (result.reason or "")
    assert versitygw.keys(dst) == []
