"""Encryption is preserved by kind: SSE-S3 stays SSE-S3, SSE-KMS keeps a usable key or says why not."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ferry import CopyPolicy, Endpoint, SourceObject, Status
from ferry.engine.attributes import encryption_args
from ferry.engine.budget import ByteBudget
from ferry.engine.context import TransferContext
from ferry.engine.copier import _encryption_note
from ferry.engine.outcome import Outcome
from ferry.engine.source import SourceInfo

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


def test_sse_s3_stays_sse_s3_and_unencrypted_gets_the_bucket_default():
    assert encryption_args(info({"ServerSideEncryption": "AES256"}), CopyPolicy(), None) == {
        "ServerSideEncryption": "AES256"
    }
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


def test_kms_source_landing_without_kms_is_reported():
    kms = info({"ServerSideEncryption": "aws:kms"})
    note = _encryption_note(kms, Outcome(Status.COPIED, "stream", encryption="AES256"))
    assert note and "pass --kms-key-id" in note
    assert _encryption_note(kms, Outcome(Status.COPIED, "stream", encryption="aws:kms")) is None
    assert _encryption_note(info({}), Outcome(Status.COPIED, "stream", encryption="AES256")) is None
