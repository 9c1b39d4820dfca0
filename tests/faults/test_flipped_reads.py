"""A byte flipped on the way from the source (tests/faults/proxy.py), caught by botocore's check
of the checksum S3 stored (a copy started from the listing asks for it with ChecksumMode), is
read again like a truncated body: the object is copied intact, not failed for one bad GET.

(A flip caught by Ferry's own proof before the PUT fails the copy and writes nothing:
tests/engine/test_integrity.py.)
"""

from __future__ import annotations

import hashlib
import random

import pytest

from conftest import S3Server
from faults.proxy import FaultPlan, fault_proxy
from ferry.engine.strategies.copier import Copier
from ferry.models import CopyPolicy, Endpoint, Mode, SourceObject, Status, Target


@pytest.fixture(params=["versitygw", "minio"])
def server(request: pytest.FixtureRequest) -> S3Server:
    return request.getfixturevalue(request.param)


def test_get_failing_its_stored_checksum_is_read_again(server: S3Server) -> None:
    src, dst = server.bucket("flip-src"), server.bucket("flip-dst")
    data = random.Random(3).randbytes(200_000)
    server.client.put_object(Bucket=src, Key="k", Body=data, ChecksumAlgorithm="CRC32")
    listed = server.client.list_objects_v2(Bucket=src)["Contents"][0]
    obj = SourceObject(
        src, "k", size=listed["Size"], etag=listed["ETag"].strip('"'), storage_class="STANDARD"
    )
    plan = FaultPlan(rates={"flip": 1.0}, kinds=frozenset({"get"}), first_attempts=1)
    with fault_proxy(server.url, plan) as proxy:
        endpoint = Endpoint(endpoint_url=proxy.url, region="us-east-1")
        # Without skip-existing no HEAD is sent first: the GET's headers are the evidence.
        policy = CopyPolicy(mode=Mode.STREAM, skip_existing=False)
        with Copier(endpoint, endpoint, policy) as copier:
            result = copier.copy(obj, Target(dst, "k"))
        assert proxy.injected[("get", "flip")] == 1
    assert result.status == Status.COPIED, result.reason
    body = server.client.get_object(Bucket=dst, Key="k")["Body"].read()
    assert hashlib.sha256(body).digest() == hashlib.sha256(data).digest()
