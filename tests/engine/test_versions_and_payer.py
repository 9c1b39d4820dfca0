"""Copying a chosen object version, and copying out of a requester-pays bucket."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from ferry import Copier, CopyPolicy, Endpoint, SourceObject, Status, Target

MiB = 1024 * 1024
PART = 5 * MiB


def put_versions(server: Any, bucket: str, key: str, bodies: list[bytes]) -> list[str]:
    """Enable versioning and write one version per body, each with its own metadata and tag."""
    server.client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    versions = []
    for number, body in enumerate(bodies, start=1):
        response = server.client.put_object(
            Bucket=bucket,
            Key=key,
            Body=body,
            Metadata={"generation": str(number)},
            Tagging=f"generation={number}",
        )
        versions.append(response["VersionId"])
    assert len(set(versions)) == len(bodies)
    return versions


@pytest.mark.parametrize("server_name", ["motoserver", "versitygw"])
@pytest.mark.parametrize("mode", ["server-side", "stream"])
@pytest.mark.parametrize("size", [1000, 7 * MiB], ids=["single", "multipart"])
def test_old_version_is_copied_when_its_version_id_is_given(request, server_name, mode, size):
    server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), server.bucket("dst")
    old, new = os.urandom(size), os.urandom(size + 1)
    old_version, _ = put_versions(server, src, "report.csv", [old, new])
    assert server.client.get_object(Bucket=src, Key="report.csv")["Body"].read() == new

    copy_policy = CopyPolicy(mode=mode, multipart_threshold=PART, part_size=PART)
    with Copier(server.endpoint, server.endpoint, copy_policy) as copier:
        result = copier.copy(
            SourceObject(src, "report.csv", version_id=old_version), Target(dst, "report.csv")
        )

    assert result.status == Status.COPIED, result.reason
    assert result.bytes == size
    assert server.client.get_object(Bucket=dst, Key="report.csv")["Body"].read() == old
    # The old version's own metadata and tags come along, not the latest version's.
    assert server.client.head_object(Bucket=dst, Key="report.csv")["Metadata"] == {"generation": "1"}
    tags = server.client.get_object_tagging(Bucket=dst, Key="report.csv")["TagSet"]
    assert tags == [{"Key": "generation", "Value": "1"}]


@pytest.mark.parametrize(
    "mode,strategy", [("server-side", "server-side-multipart"), ("stream", "stream-multipart")]
)
def test_old_multipart_version_is_copied_part_by_part_from_that_version(
    motoserver, moto_buckets, mode, strategy
):
    """Layout HEADs, ranged GETs and UploadPartCopy sources all name the old version."""
    src, dst = moto_buckets
    motoserver.client.put_bucket_versioning(Bucket=src, VersioningConfiguration={"Status": "Enabled"})
    old = os.urandom(11 * MiB)
    old_version = put_multipart(motoserver.client, src, "data.bin", old)
    old_etag = motoserver.client.head_object(Bucket=src, Key="data.bin", VersionId=old_version)["ETag"]
    motoserver.client.put_object(Bucket=src, Key="data.bin", Body=b"the latest, much shorter")

    with Copier(
        motoserver.endpoint, motoserver.endpoint, CopyPolicy(mode=mode, multipart_threshold=PART)
    ) as c:
        result = c.copy(SourceObject(src, "data.bin", version_id=old_version), Target(dst, "data.bin"))

    assert result.status == Status.COPIED, result.reason
    assert result.strategy == strategy
    assert result.verified_by == "etag"
    assert motoserver.client.get_object(Bucket=dst, Key="data.bin")["Body"].read() == old
    assert motoserver.client.head_object(Bucket=dst, Key="data.bin")["ETag"] == old_etag


def test_copy_of_a_version_that_does_not_exist_fails(motoserver, moto_buckets):
    src, dst = moto_buckets
    put_versions(motoserver, src, "k", [b"one"])
    with Copier(motoserver.endpoint, motoserver.endpoint, CopyPolicy(mode="stream")) as copier:
        result = copier.copy(SourceObject(src, "k", version_id="no-such-version"), Target(dst, "k"))
    assert result.status == Status.FAILED
    assert result.reason
    assert motoserver.keys(dst) == []


# -- requester pays ----------------------------------------------------------------------------


class RequestLog:
    """Records (client, method, path, headers) of every request a client sends."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str, dict[str, str]]] = []

    def watch(self, client: Any, name: str) -> None:
        def record(request: Any, **_: Any) -> None:
            headers = {
                k.lower(): (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()
            }
            path = unquote(urlsplit(request.url).path)
            self.requests.append((name, request.method, path, headers))

        client.meta.events.register("before-send.s3", record)

    def touching(self, bucket: str) -> list[tuple[str, str, str, dict[str, str]]]:
        """Requests that read the bucket: addressed to it, or naming it as a copy source."""
        found = []
        for entry in self.requests:
            _, _, path, headers = entry
            copy_source = unquote(headers.get("x-amz-copy-source", "")).lstrip("/")
            if path.split("/")[1] == bucket or copy_source.split("/")[0] == bucket:
                found.append(entry)
        return found


def put_multipart(client: Any, bucket: str, key: str, data: bytes) -> str | None:
    """Upload `data` in 5 MiB parts without checksums; returns the version id, if versioned."""
    upload = client.create_multipart_upload(Bucket=bucket, Key=key)
    parts = []
    for number, start in enumerate(range(0, len(data), PART), start=1):
        response = client.upload_part(
            Bucket=bucket,
            Key=key,
            UploadId=upload["UploadId"],
            PartNumber=number,
            Body=data[start : start + PART],
        )
        parts.append({"PartNumber": number, "ETag": response["ETag"]})
    response = client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload["UploadId"], MultipartUpload={"Parts": parts}
    )
    return response.get("VersionId")


@pytest.mark.parametrize(
    "mode,source_kind,strategy",
    [
        ("stream", "single", "stream"),
        ("stream", "multipart", "stream-multipart"),
        ("server-side", "single", "server-side"),
        # A multipart source without a checksum: copied with UploadPartCopy, one request a part.
        ("server-side", "multipart", "server-side-multipart"),
    ],
)
def test_every_request_to_a_requester_pays_source_agrees_to_pay(
    motoserver, moto_buckets, mode, source_kind, strategy
):
    src, dst = moto_buckets
    motoserver.client.put_bucket_request_payment(
        Bucket=src, RequestPaymentConfiguration={"Payer": "Requester"}
    )
    data = os.urandom(11 * MiB if source_kind == "multipart" else 4096)
    if source_kind == "multipart":
        put_multipart(motoserver.client, src, "shared.bin", data)
    else:
        motoserver.client.put_object(Bucket=src, Key="shared.bin", Body=data, Tagging="a=b")
    source = Endpoint(endpoint_url=motoserver.url, region="us-east-1", requester_pays=True)
    log = RequestLog()

    with Copier(source, motoserver.endpoint, CopyPolicy(mode=mode, multipart_threshold=PART)) as copier:
        log.watch(copier.ctx.source_client, "source")
        log.watch(copier.ctx.dest_client, "destination")
        result = copier.copy(SourceObject(src, "shared.bin"), Target(dst, "shared.bin"))

    assert result.status == Status.COPIED, result.reason
    assert result.strategy == strategy
    assert motoserver.client.get_object(Bucket=dst, Key="shared.bin")["Body"].read() == data
    touching = log.touching(src)
    clients = {name for name, *_ in touching}
    assert clients == ({"source", "destination"} if mode == "server-side" else {"source"})
    unpaid = [
        (name, method, path)
        for name, method, path, headers in touching
        if headers.get("x-amz-request-payer") != "requester"
    ]
    assert unpaid == []
    if mode == "server-side":
        copies = [h for name, _, _, h in touching if name == "destination"]
        assert copies and all("x-amz-copy-source" in h for h in copies)
    else:
        assert any(method == "GET" for _, method, _, _ in touching)


def test_requests_to_an_ordinary_source_do_not_offer_to_pay(motoserver, moto_buckets):
    """The header is the requester-pays option's doing, not something every request carries."""
    src, dst = moto_buckets
    motoserver.client.put_object(Bucket=src, Key="free.bin", Body=b"free")
    log = RequestLog()
    with Copier(motoserver.endpoint, motoserver.endpoint, CopyPolicy(mode="server-side")) as copier:
        log.watch(copier.ctx.source_client, "source")
        log.watch(copier.ctx.dest_client, "destination")
        result = copier.copy(SourceObject(src, "free.bin"), Target(dst, "free.bin"))
    assert result.status == Status.COPIED, result.reason
    touching = log.touching(src)
    assert touching
    assert all("x-amz-request-payer" not in headers for *_, headers in touching)
