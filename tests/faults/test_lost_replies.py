"""The server acted, the reply was lost: one fault at a time, on the first send of one kind of
request, through the fault proxy (tests/faults/proxy.py), on versitygw and MinIO.

botocore retries a request whose connection broke. For CreateMultipartUpload that retry makes a
second upload (the first is never heard of); for CompleteMultipartUpload the retry finds the
upload already completed (MinIO answers NoSuchUpload). Each test copies one multipart object
with the reply to its first such request cut mid-body, and checks the copy from the server.
"""

from __future__ import annotations

import hashlib
import random

import pytest

from conftest import S3Server
from faults.proxy import FaultPlan, fault_proxy
from ferry.engine.strategies.copier import Copier
from ferry.models import CopyPolicy, Endpoint, Mode, SourceObject, Status, Target

MiB = 1024 * 1024


@pytest.fixture(params=["versitygw", "minio"])
def server(request: pytest.FixtureRequest) -> S3Server:
    return request.getfixturevalue(request.param)


def _multipart_source(server: S3Server, bucket: str, key: str) -> bytes:
    """Two parts with a COMPOSITE CRC32: a server-side copy of it goes part by part (one
    CopyObject could not keep its checksum), on versitygw as on MinIO."""
    rng = random.Random(7)
    parts = [rng.randbytes(5 * MiB), rng.randbytes(300 * 1024)]
    upload_id = server.client.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm="CRC32")[
        "UploadId"
    ]
    done = []
    for n, data in enumerate(parts, 1):
        response = server.client.upload_part(
            Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=n, Body=data, ChecksumAlgorithm="CRC32"
        )
        done.append({"PartNumber": n, "ETag": response["ETag"], "ChecksumCRC32": response["ChecksumCRC32"]})
    server.client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": done}
    )
    return b"".join(parts)


@pytest.mark.parametrize("mode", [Mode.STREAM, Mode.SERVER_SIDE])
@pytest.mark.parametrize("kind", ["create-multipart", "complete-multipart"])
def test_reply_lost_after_the_server_acted(server: S3Server, kind: str, mode: Mode) -> None:
    src, dst = server.bucket("lost-src"), server.bucket("lost-dst")
    data = _multipart_source(server, src, "big")
    plan = FaultPlan(rates={"reset": 1.0}, kinds=frozenset({kind}), reset_after_share=1.0, first_attempts=1)
    with fault_proxy(server.url, plan) as proxy:
        endpoint = Endpoint(endpoint_url=proxy.url, region="us-east-1")
        policy = CopyPolicy(mode=mode, multipart_threshold=5 * MiB)
        with Copier(endpoint, endpoint, policy) as copier:
            result = copier.copy(SourceObject(src, "big"), Target(dst, "big"))
        assert proxy.injected[(kind, "reset-after")] == 1  # the fault did happen, after the server acted
    uploads = server.open_uploads(dst)
    assert not uploads, f"uploads left open: {uploads}"
    assert result.status == Status.COPIED, result.reason
    body = server.client.get_object(Bucket=dst, Key="big")["Body"].read()
    assert hashlib.sha256(body).hexdigest() == hashlib.sha256(data).hexdigest()
