"""Encryption is preserved by kind: SSE-S3 stays SSE-S3, SSE-KMS keeps a usable key or says why not."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from ferry import CopyPolicy, Endpoint, SourceObject, Status
from ferry.engine.compare.dest_listing import ABSENT
from ferry.engine.proofs.source import SourceInfo
from ferry.engine.run.budget import ByteBudget
from ferry.engine.run.context import TransferContext
from ferry.engine.run.outcome import Outcome
from ferry.engine.strategies.attributes import encryption_args
from ferry.engine.strategies.copier import _encryption_note
from ferry.s3.clients import make_client

KEY = "arn:aws:kms:us-east-1:111111111111:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def info(head: dict) -> SourceInfo:
    return SourceInfo(SourceObject("b", "k"), head, 1, "e" * 32, None, "STANDARD", None)


def context(source: Endpoint, destination: Endpoint) -> TransferContext:
    return TransferContext(
        source, destination, None, None, CopyPolicy(), ThreadPoolExecutor(1), 1, ByteBudget(1), None
    )


def test_configured_destination_key_wins():
    args = encryption_args(
        info({"ServerSideEncryption": "AES256"}), CopyPolicy(dest_kms_key_id="alias/dst"), None
    )
    assert args == {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "alias/dst"}


def test_sse_s3_and_unencrypted_sources_get_the_bucket_default():
    # No header: the destination bucket's default (at least SSE-S3 on AWS) applies.
    assert encryption_args(info({"ServerSideEncryption": "AES256"}), CopyPolicy(), None) == {}
    assert encryption_args(info({}), CopyPolicy(), None) == {}


def test_kms_source_keeps_its_key_where_usable_else_the_bucket_default_applies():
    head = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": KEY, "BucketKeyEnabled": True}
    kept = encryption_args(info(head), CopyPolicy(), KEY)
    assert kept == {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": KEY, "BucketKeyEnabled": True}
    # Never `aws:kms` without a key id: that would silently mean the AWS-managed aws/s3 key.
    assert encryption_args(info(head), CopyPolicy(), None) == {}


def test_source_key_is_reused_only_on_the_same_endpoint_and_in_its_region():
    head = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": KEY}
    same = context(Endpoint(region="us-east-1"), Endpoint(region="us-east-1"))
    assert same.reusable_source_key(info(head)) == KEY
    other_region = context(Endpoint(region="us-east-1"), Endpoint(region="eu-west-1"))
    assert other_region.reusable_source_key(info(head)) is None
    other_endpoint = context(Endpoint(region="us-east-1"), Endpoint(endpoint_url="http://127.0.0.1:1"))
    assert other_endpoint.reusable_source_key(info(head)) is None


def test_source_key_is_reused_only_where_the_caller_says_the_identity_may_write_with_it():
    """The pipeline names the keys its workers may encrypt with; its endpoints name no region,
    so the destination client's region stands for the destination's."""
    head = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": KEY}
    allowed = context(Endpoint(region="us-east-1"), Endpoint(region="us-east-1"))
    allowed.reusable_kms_keys = frozenset({KEY})
    assert allowed.reusable_source_key(info(head)) == KEY
    decrypt_only = context(Endpoint(region="us-east-1"), Endpoint(region="us-east-1"))
    decrypt_only.reusable_kms_keys = frozenset()
    assert decrypt_only.reusable_source_key(info(head)) is None

    workers = context(Endpoint(), Endpoint())
    workers.reusable_kms_keys = frozenset({KEY})
    workers.dest_client = SimpleNamespace(meta=SimpleNamespace(region_name="eu-west-1"))
    assert workers.reusable_source_key(info(head)) is None  # a us-east-1 key cannot encrypt there
    workers.dest_client = SimpleNamespace(meta=SimpleNamespace(region_name="us-east-1"))
    assert workers.reusable_source_key(info(head)) == KEY


def test_kms_source_landing_without_kms_is_reported():
    kms = info({"ServerSideEncryption": "aws:kms"})
    note = _encryption_note(kms, Outcome(Status.COPIED, "stream", encryption="AES256"))
    assert note and "pass --kms-key-id" in note
    assert _encryption_note(kms, Outcome(Status.COPIED, "stream", encryption="aws:kms")) is None
    assert _encryption_note(info({}), Outcome(Status.COPIED, "stream", encryption="AES256")) is None


# -- against a server: the destination bucket's default encryption applies to SSE-S3 sources --

BUCKET_KEY = "arn:aws:kms:us-east-1:123456789012:key/0000aaaa-bb11-cc22-dd33-destination0"
MiB = 1024 * 1024


def _sse_s3_source(client, bucket: str, key: str, data: bytes, part_size: int | None) -> dict:
    """An SSE-S3 object, uploaded whole or in parts of `part_size` (so it has a layout)."""
    if part_size is None:
        client.put_object(Bucket=bucket, Key=key, Body=data, ServerSideEncryption="AES256")
    else:
        upload = client.create_multipart_upload(Bucket=bucket, Key=key, ServerSideEncryption="AES256")
        parts = []
        for number, start in enumerate(range(0, len(data), part_size), start=1):
            part = client.upload_part(
                Bucket=bucket,
                Key=key,
                UploadId=upload["UploadId"],
                PartNumber=number,
                Body=data[start : start + part_size],
            )
            parts.append({"PartNumber": number, "ETag": part["ETag"]})
        client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload["UploadId"], MultipartUpload={"Parts": parts}
        )
    head = client.head_object(Bucket=bucket, Key=key)
    assert head["ServerSideEncryption"] == "AES256"
    return head


ROUTES = {
    # (mode, multipart source, start from the listing)
    "copy-object-from-head": ("server-side", False, False),
    "copy-object-as-listed": ("server-side", False, True),
    "upload-part-copy": ("server-side", True, False),
    "stream-put": ("stream", False, False),
    "stream-multipart": ("stream", True, False),
}


@pytest.mark.parametrize("route", ROUTES.values(), ids=ROUTES.keys())
def test_sse_s3_source_gets_the_destination_buckets_default_kms(motoserver, moto_buckets, route):
    """S3 encrypts a copy sent without encryption headers with the destination bucket's default
    (CopyObject's ServerSideEncryption documentation); an explicit AES256 would override a
    default SSE-KMS, and be refused by a bucket policy that requires aws:kms."""
    from ferry import Copier, Target

    mode, multipart, listed = route
    src, dst = moto_buckets
    motoserver.client.put_bucket_encryption(
        Bucket=dst,
        ServerSideEncryptionConfiguration={
            "Rules": [
                {
                    "ApplyServerSideEncryptionByDefault": {
                        "SSEAlgorithm": "aws:kms",
                        "KMSMasterKeyID": BUCKET_KEY,
                    }
                }
            ]
        },
    )
    data = os.urandom(10 * MiB + 1 if multipart else 1024)
    head = _sse_s3_source(motoserver.client, src, "k", data, 5 * MiB if multipart else None)
    obj = (
        SourceObject(src, "k", size=len(data), etag=head["ETag"].strip('"'), storage_class="STANDARD")
        if listed
        else SourceObject(src, "k")
    )
    sent: list[dict] = []
    dest_client = make_client(motoserver.endpoint)
    for operation in ("CopyObject", "PutObject", "CreateMultipartUpload"):
        dest_client.meta.events.register(
            f"provide-client-params.s3.{operation}", lambda params, **_: sent.append(dict(params))
        )

    policy = CopyPolicy(mode=mode, multipart_threshold=5 * MiB)
    with Copier(motoserver.endpoint, motoserver.endpoint, policy, dest_client=dest_client) as copier:
        # As copy_batch's destination listing says: absent. A listed object starts without a HEAD.
        result = copier.copy(obj, Target(dst, "k"), listed=ABSENT)

    assert result.status == Status.COPIED, result.reason
    assert result.note is None  # copied once, nothing to report
    assert sent  # every request that created the object stated no encryption of its own
    assert [(p.get("ServerSideEncryption"), p.get("SSEKMSKeyId")) for p in sent] == [(None, None)] * len(sent)
    dest = motoserver.client.head_object(Bucket=dst, Key="k")
    assert (dest["ServerSideEncryption"], dest.get("SSEKMSKeyId")) == ("aws:kms", BUCKET_KEY)
    assert motoserver.client.get_object(Bucket=dst, Key="k")["Body"].read() == data
