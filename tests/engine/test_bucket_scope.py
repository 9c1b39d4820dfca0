"""What the workers may touch, on the wire: the configured buckets' owners on every request,
listings only under the configured prefixes, and the 403 S3 sends for a missing key.

versitygw enforces `ExpectedBucketOwner` and `ExpectedSourceBucketOwner` (a bucket's owner
there is the root access key, `ferrytest`), so a wrong owner really is refused. It has no IAM:
where a test needs IAM's answer (a HEAD of a missing key refused with 403 because the caller
may list only under a prefix), a `before-send` hook gives it, as the AWS documentation
describes it, in front of the real server.
"""

from __future__ import annotations

import os
import threading
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from botocore.awsrequest import AWSResponse

from ferry import Copier, CopyPolicy, Endpoint, SourceObject, Status, Target
from ferry.s3.listing import S3Url, plan_pairs

MiB = 1024 * 1024
OWNER = "ferrytest"  # versitygw: the owner of every bucket its root user creates
LISTINGS = ("ListObjectsV2", "ListObjects", "ListObjectVersions", "ListMultipartUploads")


class Wire:
    """Every request a client sends: operation, bucket and headers, as they leave botocore."""

    def __init__(self, *clients: Any) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.listings: list[tuple[str, str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        for client in clients:
            client.meta.events.register("before-send.s3", self._sent)
            client.meta.events.register("provide-client-params.s3", self._params)

    def _sent(self, request: Any, event_name: str, **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        bucket = unquote(urlsplit(request.url).path.lstrip("/").split("/", 1)[0])
        headers = {k.lower(): (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()}
        with self._lock:
            self.requests.append((operation, bucket, headers))

    def _params(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in LISTINGS:
            with self._lock:
                self.listings.append((model.name, params.get("Bucket", ""), dict(params)))


def owned(server: Any, *buckets: str, owner: str = OWNER) -> Endpoint:
    return Endpoint(
        endpoint_url=server.url, region="us-east-1", bucket_owners=tuple((b, owner) for b in buckets)
    )


def arrange(server: Any, src: str, count: int = 12) -> dict[str, bytes]:
    bodies = {f"data/{n:03d}.bin": os.urandom(1024 + n) for n in range(count)}
    for key, body in bodies.items():
        server.client.put_object(Bucket=src, Key=key, Body=body)
    # A multipart source: copied part by part (UploadPartCopy, or UploadPart when streamed).
    large = bodies["data/large.bin"] = os.urandom(11 * MiB)
    upload = server.client.create_multipart_upload(Bucket=src, Key="data/large.bin")["UploadId"]
    parts = []
    for number, start in enumerate(range(0, len(large), 5 * MiB), 1):
        part = server.client.upload_part(
            Bucket=src,
            Key="data/large.bin",
            UploadId=upload,
            PartNumber=number,
            Body=large[start : start + 5 * MiB],
        )
        parts.append({"PartNumber": number, "ETag": part["ETag"]})
    server.client.complete_multipart_upload(
        Bucket=src, Key="data/large.bin", UploadId=upload, MultipartUpload={"Parts": parts}
    )
    return bodies


def copy_prefix(endpoint: Endpoint, src: str, dst: str, **policy: Any) -> tuple[list[Any], Wire]:
    """The CLI's way: list the source prefix, then copy the pairs in one batch."""
    policy = {"multipart_threshold": 8 * MiB, "part_size": 5 * MiB, **policy}
    with Copier(endpoint, endpoint, CopyPolicy(**policy), concurrency=4) as copier:
        wire = Wire(copier.ctx.source_client, copier.ctx.dest_client)
        pairs = list(plan_pairs(copier.ctx.source_client, S3Url(src, "data/"), S3Url(dst, "backup/")))
        results = copier.copy_batch(pairs)
    return results, wire


# -- ExpectedBucketOwner ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["server-side", "stream"])
def test_every_request_names_the_configured_owner(versitygw: Any, mode: str) -> None:
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    bodies = arrange(versitygw, src)
    endpoint = owned(versitygw, src, dst)

    # SHA1: not the algorithm the source stored, so the multipart source is copied part by part
    first, wire = copy_prefix(endpoint, src, dst, mode=mode, checksum_algorithm="SHA1")
    again, wire_again = copy_prefix(endpoint, src, dst, mode=mode)  # lists and HEADs the destination

    assert {r.source_key: r.status for r in first} == dict.fromkeys(bodies, Status.COPIED)
    assert {r.status for r in again} == {Status.SKIPPED}
    for key, body in bodies.items():
        got = versitygw.client.get_object(Bucket=dst, Key="backup/" + key.removeprefix("data/"))
        assert got["Body"].read() == body
    requests = wire.requests + wire_again.requests
    operations = {op for op, _, _ in requests}
    assert {"ListObjectsV2", "HeadObject"} <= operations
    assert ("CopyObject" in operations and "UploadPartCopy" in operations) or mode == "stream"
    assert ("PutObject" in operations and "UploadPart" in operations) or mode != "stream"
    for operation, bucket, headers in requests:
        assert bucket in (src, dst)
        assert headers.get("x-amz-expected-bucket-owner") == OWNER, (operation, bucket)
        if operation in ("CopyObject", "UploadPartCopy"):
            assert headers.get("x-amz-source-expected-bucket-owner") == OWNER, operation


def test_a_bucket_of_another_owner_fails_every_object_clearly(versitygw: Any) -> None:
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    bodies = arrange(versitygw, src, count=3)
    endpoint = Endpoint(
        endpoint_url=versitygw.url,
        region="us-east-1",
        bucket_owners=((src, OWNER), (dst, "123456789012")),  # not who owns it now
    )

    results, _ = copy_prefix(endpoint, src, dst)

    assert {r.source_key: r.status for r in results} == dict.fromkeys(bodies, Status.FAILED)
    for result in results:
        assert "AccessDenied" in result.reason or "403" in result.reason, result.reason
        assert dst in result.reason, result.reason
    assert versitygw.keys(dst) == []


def test_requests_to_other_buckets_carry_no_owner(versitygw: Any) -> None:
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    arrange(versitygw, src, count=2)

    results, wire = copy_prefix(owned(versitygw, src), src, dst, mode="server-side")

    assert {r.status for r in results} == {Status.COPIED}
    for operation, bucket, headers in wire.requests:
        assert ("x-amz-expected-bucket-owner" in headers) == (bucket == src), (operation, bucket)
        if operation in ("CopyObject", "UploadPartCopy"):
            assert headers.get("x-amz-source-expected-bucket-owner") == OWNER


# -- listings only under the configured prefixes ------------------------------------------------


def test_every_listing_names_a_prefix_inside_the_configured_location(versitygw: Any) -> None:
    """`s3:ListBucket` is granted with `StringLike` on `s3:prefix`: a listing without a Prefix,
    or with one outside the location, would be refused. Destination windows list the common
    prefix of their keys, which lies inside the destination prefix."""
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    arrange(versitygw, src, count=30)
    endpoint = versitygw.endpoint

    _, first = copy_prefix(endpoint, src, dst)
    _, again = copy_prefix(endpoint, src, dst)

    listings = first.listings + again.listings
    assert {bucket for _, bucket, _ in listings} == {src, dst}
    for operation, bucket, params in listings:
        location = "data/" if bucket == src else "backup/"
        assert params.get("Prefix", "").startswith(location), (operation, bucket, params)


# -- a HEAD refused for a missing key -----------------------------------------------------------


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Any:
        yield self.data


DENIED = b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"


class PrefixOnlyListing:
    """IAM in front of versitygw for a role granted `s3:ListBucket` on `bucket` with
    `StringLike s3:prefix <prefix>*` (and the object actions): S3 answers a GET or HEAD of a
    missing key with 403 instead of 404 unless the caller may list, and that request carries
    no `s3:prefix` (HeadObject, "Permissions"; IAM condition operators: a key absent from the
    request fails every operator but ...IfExists). `denied_keys` are HEADs refused outright."""

    def __init__(self, server: Any, client: Any, bucket: str, prefix: str, denied_keys: set[str]) -> None:
        self.server, self.bucket, self.prefix, self.denied_keys = server, bucket, prefix, denied_keys
        client.meta.events.register("before-send.s3.HeadObject", self._head)
        client.meta.events.register("before-send.s3.ListObjectsV2", self._list)

    def _where(self, request: Any) -> tuple[str, str]:
        bucket, _, key = urlsplit(request.url).path.lstrip("/").partition("/")
        return unquote(bucket), unquote(key)

    def _head(self, request: Any, **_: Any) -> AWSResponse | None:
        bucket, key = self._where(request)
        if bucket != self.bucket:
            return None
        if key in self.denied_keys or key not in self.server.keys(bucket):
            return AWSResponse(request.url, 403, {}, _Body(b""))
        return None

    def _list(self, request: Any, **_: Any) -> AWSResponse | None:
        bucket, _ = self._where(request)
        query = dict(p.partition("=")[::2] for p in urlsplit(request.url).query.split("&") if p)
        if bucket == self.bucket and not unquote(query.get("prefix", "")).startswith(self.prefix):
            return AWSResponse(request.url, 403, {}, _Body(DENIED))
        return None


def test_a_missing_destination_key_refused_with_403_is_proved_absent_by_a_prefixed_listing(
    versitygw: Any,
) -> None:
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    keys = ["data/a.bin", "data/b.bin", "data/c.bin"]  # too few for a window listing: a HEAD each
    for key in keys:
        versitygw.client.put_object(Bucket=src, Key=key, Body=key.encode())
    versitygw.client.put_object(Bucket=dst, Key="backup/a.bin.old", Body=b"another key after a.bin")
    with Copier(versitygw.endpoint, versitygw.endpoint, concurrency=2) as copier:
        PrefixOnlyListing(versitygw, copier.ctx.dest_client, dst, "backup/", denied_keys=set())
        wire = Wire(copier.ctx.dest_client)
        results = copier.copy_batch([(SourceObject(src, k), Target(dst, "backup/" + k[5:])) for k in keys])

    assert [(r.source_key, r.status) for r in results] == [(k, Status.COPIED) for k in keys], [
        r.reason for r in results
    ]
    for _, bucket, params in wire.listings:
        assert bucket == dst and params["Prefix"].startswith("backup/")


def test_a_refused_head_of_an_existing_destination_key_still_fails(versitygw: Any) -> None:
    """Only a listing that shows the key absent turns a 403 into "absent": a key that is there
    but may not be read is an access problem, reported as one, and nothing is overwritten."""
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    versitygw.client.put_object(Bucket=src, Key="data/a.bin", Body=b"new")
    versitygw.client.put_object(Bucket=dst, Key="backup/a.bin", Body=b"old")
    with Copier(versitygw.endpoint, versitygw.endpoint, concurrency=1) as copier:
        PrefixOnlyListing(versitygw, copier.ctx.dest_client, dst, "backup/", denied_keys={"backup/a.bin"})
        (result,) = copier.copy_batch([(SourceObject(src, "data/a.bin"), Target(dst, "backup/a.bin"))])

    assert result.status == Status.FAILED
    assert "403" in result.reason or "AccessDenied" in result.reason, result.reason
    assert versitygw.client.get_object(Bucket=dst, Key="backup/a.bin")["Body"].read() == b"old"


def test_a_refused_listing_leaves_the_403_an_access_problem(versitygw: Any) -> None:
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    versitygw.client.put_object(Bucket=src, Key="data/a.bin", Body=b"new")
    with Copier(versitygw.endpoint, versitygw.endpoint, concurrency=1) as copier:
        # the role may list only under "elsewhere/": the listing that would prove absence is refused
        PrefixOnlyListing(versitygw, copier.ctx.dest_client, dst, "elsewhere/", denied_keys=set())
        (result,) = copier.copy_batch([(SourceObject(src, "data/a.bin"), Target(dst, "backup/a.bin"))])

    assert result.status == Status.FAILED
    assert versitygw.keys(dst) == []
