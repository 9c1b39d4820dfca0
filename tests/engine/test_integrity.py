"""A copy whose bytes are not the source's bytes is never kept.

The source client is a real boto3 client behind a small proxy that tampers with GetObject
bodies, so every verification path (full-object CRC, whole-object MD5, multipart ETag) must
catch the damage on its own. versitygw stores a CRC64NVME for every object; moto stores none,
so objects there can only be proved by their MD5-derived ETag.
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError

import ferry.engine.strategies.server_side
from ferry import Copier, CopyPolicy, SourceObject, Status, Strategy, Target, VerificationFailed
from ferry.engine.strategies import streaming
from ferry.engine.strategies.streaming import discard_copy
from ferry.s3.clients import make_client

MiB = 1024 * 1024

Tamper = Callable[[int, bytes], bytes]


class TamperingSource:
    """A real source client whose get_object can run `before` and rewrite the body it returns.

    Calls are numbered from 1 in the order they start; parts run in parallel, so a tamper that
    picks one call damages one part, whichever it is.
    """

    def __init__(
        self, client: Any, tamper: Tamper | None = None, before: Callable[[int], None] | None = None
    ):
        self._client = client
        self._tamper = tamper
        self._before = before
        self._lock = threading.Lock()
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def get_object(self, **kwargs: Any) -> dict[str, Any]:
        with self._lock:
            self.calls += 1
            number = self.calls
        if self._before:
            self._before(number)
        response = self._client.get_object(**kwargs)
        if self._tamper:
            data = response["Body"].read()
            response["Body"].close()
            response["Body"] = io.BytesIO(self._tamper(number, data))
        return response


def flip_one_byte(number: int, data: bytes) -> bytes:
    """Damage exactly one byte of the first body read; every other read is left intact."""
    if number != 1:
        return data
    damaged = bytearray(data)
    damaged[len(damaged) // 2] ^= 0x01
    return bytes(damaged)


def put_multipart(client: Any, bucket: str, key: str, data: bytes, sizes: list[int]) -> None:
    upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    parts, offset = [], 0
    for number, size in enumerate(sizes, start=1):
        response = client.upload_part(
            Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=data[offset : offset + size]
        )
        parts.append({"PartNumber": number, "ETag": response["ETag"]})
        offset += size
    assert offset == len(data)
    client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
    )


def body(server: Any, bucket: str, key: str) -> bytes:
    return server.client.get_object(Bucket=bucket, Key=key)["Body"].read()


@pytest.fixture
def no_read_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retrying a broken body sleeps with backoff; the sleeps are not what these tests measure."""
    monkeypatch.setattr(
        streaming, "time", SimpleNamespace(sleep=lambda seconds: None, monotonic=time.monotonic)
    )


STREAM_5MIB = CopyPolicy(mode="stream", part_size=5 * MiB, multipart_threshold=5 * MiB)
# part_size=None lets the engine learn and reproduce a multipart source's layout (ETag evidence).
STREAM_REPRODUCE = CopyPolicy(mode="stream", multipart_threshold=5 * MiB)

CRC = "crc64nvme (full object)"
# Below 12 MiB, so a checksum-less single-part source cannot go in one PutObject and must be
# streamed in parts with the whole-object MD5 (the engine prefers one PUT up to the limit).
LIMIT = 10 * MiB
PUT, MULTIPART = Strategy.STREAM_PUT, Strategy.STREAM_MULTIPART


# server, how the source is written, its size, policy, strategy, evidence that proves a clean copy
@pytest.mark.parametrize(
    "server_name, written_as, size, policy, strategy, evidence",
    [
        pytest.param("versitygw", "put", 1 * MiB, STREAM_5MIB, PUT, CRC, id="vgw-crc64nvme-single-put"),
        pytest.param("versitygw", "put", 12 * MiB, STREAM_5MIB, MULTIPART, CRC, id="vgw-crc64nvme-multipart"),
        pytest.param("motoserver", "put", 1 * MiB, STREAM_5MIB, PUT, "md5", id="moto-md5-single-put"),
        pytest.param(
            "motoserver", "put", 12 * MiB, STREAM_5MIB, MULTIPART, "md5", id="moto-md5-part-as-multipart"
        ),
        pytest.param(
            "motoserver", "multipart", 12 * MiB, STREAM_REPRODUCE, MULTIPART, "etag", id="moto-etag-layout"
        ),
    ],
)
def test_one_flipped_byte_fails_the_copy_and_leaves_nothing(
    request, server_name, written_as, size, policy, strategy, evidence
) -> None:
    server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), server.bucket("dst")
    data = os.urandom(size)
    if written_as == "multipart":
        put_multipart(server.client, src, "obj", data, [5 * MiB, 5 * MiB, size - 10 * MiB])
    else:
        server.client.put_object(Bucket=src, Key="obj", Body=data)
    head = server.client.head_object(Bucket=src, Key="obj", ChecksumMode="ENABLED")
    has_crc = "ChecksumCRC64NVME" in head
    assert has_crc == (server_name == "versitygw"), "the case must exercise the evidence it names"

    # Control: the same copy with honest bytes is proved by the evidence this case is about.
    with Copier(server.endpoint, server.endpoint, policy, memory_limit=LIMIT) as copier:
        clean = copier.copy(SourceObject(src, "obj"), Target(dst, "clean"))
    assert clean.status == Status.COPIED, clean.reason
    assert (clean.strategy, clean.verified_by) == (strategy, evidence)
    assert body(server, dst, "clean") == data

    source = TamperingSource(make_client(server.endpoint), tamper=flip_one_byte)
    with Copier(server.endpoint, server.endpoint, policy, memory_limit=LIMIT, source_client=source) as copier:
        result = copier.copy(SourceObject(src, "obj"), Target(dst, "corrupt"))

    assert source.calls >= 1
    assert result.status == Status.FAILED
    assert "verification failed" in result.reason
    assert server.keys(dst) == ["clean"]
    assert server.open_uploads(dst) == []


@pytest.mark.parametrize("size", [1 * MiB, 12 * MiB], ids=["single-put", "multipart"])
def test_body_short_once_is_read_again_and_the_copy_succeeds(
    versitygw, vgw_buckets, no_read_backoff, size
) -> None:
    src, dst = vgw_buckets
    data = os.urandom(size)
    versitygw.client.put_object(Bucket=src, Key="obj", Body=data)
    source = TamperingSource(make_client(versitygw.endpoint), tamper=lambda n, d: d[:-1] if n == 1 else d)

    with Copier(versitygw.endpoint, versitygw.endpoint, STREAM_5MIB, source_client=source) as copier:
        result = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"))

    assert result.status == Status.COPIED, result.reason
    assert result.verified_by == "crc64nvme (full object)"
    expected_gets = 1 if size <= 5 * MiB else 3  # one per part
    assert source.calls == expected_gets + 1  # the short read was read again, once
    assert body(versitygw, dst, "obj") == data


def test_body_short_every_time_fails_with_a_reason_and_no_open_upload(
    versitygw, vgw_buckets, no_read_backoff
) -> None:
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="obj", Body=os.urandom(12 * MiB))
    source = TamperingSource(make_client(versitygw.endpoint), tamper=lambda n, d: d[: len(d) // 2])

    with Copier(versitygw.endpoint, versitygw.endpoint, STREAM_5MIB, source_client=source) as copier:
        result = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"))

    assert result.status == Status.FAILED
    assert "reading the source failed 5 times" in result.reason
    assert "TruncatedBody" in result.reason
    assert versitygw.keys(dst) == []
    assert versitygw.open_uploads(dst) == []


# Both servers honour If-Match on GetObject, ranged or not (checked: a wrong ETag returns 412
# PreconditionFailed on versitygw 1.8.0 and on moto's server), so the test runs on both.
@pytest.mark.parametrize("server_name", ["versitygw", "motoserver"])
@pytest.mark.parametrize("size", [1 * MiB, 12 * MiB], ids=["single-put", "multipart"])
def test_source_replaced_during_the_copy_fails_instead_of_mixing_versions(request, server_name, size) -> None:
    server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), server.bucket("dst")
    server.client.put_object(Bucket=src, Key="obj", Body=os.urandom(size))
    replacement = os.urandom(size)  # same size: only the ETag tells the versions apart

    def replace_source(number: int) -> None:
        if number == 1:  # after the engine's HEAD, before its first GET reaches the server
            server.client.put_object(Bucket=src, Key="obj", Body=replacement)

    source = TamperingSource(make_client(server.endpoint), before=replace_source)
    with Copier(server.endpoint, server.endpoint, STREAM_5MIB, source_client=source) as copier:
        result = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"))

    assert result.status == Status.FAILED
    assert "PreconditionFailed" in result.reason
    assert server.keys(dst) == []
    assert server.open_uploads(dst) == []
    assert body(server, src, "obj") == replacement


class DeniedHead:
    """A real destination client whose HEAD is denied (a write-only identity)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.deleted: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def head_object(self, **kwargs: Any) -> dict[str, Any]:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "denied"}}, "HeadObject")

    def delete_object(self, **kwargs: Any) -> dict[str, Any]:
        self.deleted.append(kwargs)
        return self._client.delete_object(**kwargs)


def test_server_side_copy_that_cannot_be_verified_fails_and_is_removed(motoserver, moto_buckets, monkeypatch):
    # When nothing S3 reported can prove the copy, Ferry needs a HEAD for the size. If that HEAD
    # is denied, the copy is unproved: it must fail with a reason and not be left behind.
    src, dst = moto_buckets
    motoserver.client.put_object(Bucket=src, Key="k", Body=b"data")
    real = ferry.engine.strategies.server_side.verify_server_copy

    def nothing_comparable(info: Any, **kwargs: Any) -> str:
        return "unverified" if kwargs["dest_size"] is None else real(info, **kwargs)

    monkeypatch.setattr(ferry.engine.strategies.server_side, "verify_server_copy", nothing_comparable)
    dest = DeniedHead(make_client(motoserver.endpoint))
    policy = CopyPolicy(mode="server-side", skip_existing=False)
    with Copier(motoserver.endpoint, motoserver.endpoint, policy, dest_client=dest) as copier:
        result = copier.copy(SourceObject(src, "k"), Target(dst, "k"))
    assert result.status == Status.FAILED
    assert "could not be verified" in result.reason and "AccessDenied" in result.reason
    assert dest.deleted and motoserver.keys(dst) == []


def test_unproved_copy_that_cannot_be_deleted_says_it_stayed():
    class NoDelete:
        def delete_object(self, **kwargs: Any) -> None:
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "denied"}}, "DeleteObject")

    failure = discard_copy(NoDelete(), Target("dst", "k"), None, VerificationFailed("verification failed: x"))
    assert isinstance(failure, VerificationFailed)
    assert "could not be removed" in str(failure) and "s3://dst/k" in str(failure)


def test_an_unproved_rewrite_in_place_is_never_deleted(motoserver, moto_buckets, monkeypatch):
    """A copy of an object onto itself (an in-place rewrite: a new storage class) that fails
    verification must not be removed like other unproved copies: on an unversioned bucket the
    copy IS the object, and deleting it would delete the only copy."""
    src, _ = moto_buckets
    motoserver.client.put_object(Bucket=src, Key="k", Body=b"precious")

    def fails(info: Any, **kwargs: Any) -> str:
        raise VerificationFailed("verification failed: forced for the test")

    monkeypatch.setattr(ferry.engine.strategies.server_side, "verify_server_copy", fails)
    policy = CopyPolicy(mode="server-side", skip_existing=False, storage_class="STANDARD_IA")
    with Copier(motoserver.endpoint, motoserver.endpoint, policy) as copier:
        result = copier.copy(SourceObject(src, "k"), Target(src, "k"))

    assert motoserver.keys(src) == ["k"], "the only copy of the object was deleted"
    assert motoserver.client.get_object(Bucket=src, Key="k")["Body"].read() == b"precious"
    assert result.status == Status.FAILED
    assert "forced for the test" in result.reason and "in place" in result.reason


@pytest.mark.parametrize(
    "upload_algorithm", [None, "CRC32"], ids=["default-upload-algorithm", "crc32-upload"]
)
@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_a_listed_object_damaged_after_its_checked_get_fails_and_leaves_nothing(
    request, server_name, upload_algorithm
) -> None:
    """A listed object (no HEAD) is read with ChecksumMode, and the GET's checked value is not
    computed again: bytes damaged after that check (here: after the client returned them) go
    to PutObject with the checked value, which the destination refuses. Nothing is kept."""
    server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), server.bucket("dst")
    data = os.urandom(500_000)
    server.client.put_object(Bucket=src, Key="obj", Body=data, ChecksumAlgorithm="CRC32")
    listed = server.client.list_objects_v2(Bucket=src)["Contents"][0]
    obj = SourceObject(
        src, "obj", size=listed["Size"], etag=listed["ETag"].strip('"'), storage_class="STANDARD"
    )
    # With CRC32 uploads the GET's checked value is the one PutObject carries, uncomputed.
    policy = CopyPolicy(mode="stream", checksum_algorithm=upload_algorithm, skip_existing=False)  # no HEAD

    with Copier(server.endpoint, server.endpoint, policy) as copier:
        clean = copier.copy(obj, Target(dst, "clean"))
    assert clean.status == Status.COPIED, clean.reason
    assert body(server, dst, "clean") == data

    source = TamperingSource(make_client(server.endpoint), tamper=flip_one_byte)
    with Copier(server.endpoint, server.endpoint, policy, source_client=source) as copier:
        result = copier.copy(obj, Target(dst, "corrupt"))
    assert source.calls >= 1
    assert result.status == Status.FAILED, result
    assert server.keys(dst) == ["clean"]
    assert server.open_uploads(dst) == []
