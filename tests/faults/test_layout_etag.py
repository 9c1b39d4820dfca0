"""A multipart source proved only by its `-N` ETag, streamed in parts of another size
(`--part-size`): the copy is proved by the source's ETag recomputed over the source's own parts
(ferry.engine.proofs.layout_etag), so a byte flipped in a ranged GET (tests/faults/proxy.py) fails the
copy instead of reaching the destination as `copied`, verified by size.

On MinIO the source has no checksum (the case this is about); versitygw stores a full-object
CRC64NVME for every object, which proves the copy by itself.
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
OTHER_PARTS = CopyPolicy(mode=Mode.STREAM, part_size=6 * MiB, multipart_threshold=5 * MiB)


@pytest.fixture(params=["versitygw", "minio"])
def server(request: pytest.FixtureRequest) -> S3Server:
    return request.getfixturevalue(request.param)


def _source(server: S3Server, bucket: str) -> bytes:
    """11 MiB in parts of 5, 5 and 1 MiB, uploaded without a checksum."""
    rng = random.Random(11)
    parts = [rng.randbytes(5 * MiB), rng.randbytes(5 * MiB), rng.randbytes(1 * MiB)]
    upload_id = server.client.create_multipart_upload(Bucket=bucket, Key="big")["UploadId"]
    done = [
        {
            "PartNumber": n,
            "ETag": server.client.upload_part(
                Bucket=bucket, Key="big", UploadId=upload_id, PartNumber=n, Body=d
            )["ETag"],
        }
        for n, d in enumerate(parts, 1)
    ]
    server.client.complete_multipart_upload(
        Bucket=bucket, Key="big", UploadId=upload_id, MultipartUpload={"Parts": done}
    )
    return b"".join(parts)


@pytest.mark.parametrize("flip", [False, True], ids=["clean", "flipped"])
def test_streamed_in_other_parts_is_proved_by_the_sources_etag(server: S3Server, flip: bool) -> None:
    src, dst = server.bucket("layout-src"), server.bucket("layout-dst")
    data = _source(server, src)
    rates = {"flip": 1.0} if flip else {}
    plan = FaultPlan(rates=rates, kinds=frozenset({"get-range"}), first_attempts=1)
    with fault_proxy(server.url, plan) as proxy:
        endpoint = Endpoint(endpoint_url=proxy.url, region="us-east-1")
        with Copier(endpoint, endpoint, OTHER_PARTS) as copier:
            result = copier.copy(SourceObject(src, "big"), Target(dst, "big"))
        flipped = proxy.injected[("get-range", "flip")]
    assert server.open_uploads(dst) == []
    if not flip:
        assert result.status == Status.COPIED, result.reason
        assert result.verified_by in ("etag", "crc64nvme (full object)")
        assert hashlib.sha256(server.client.get_object(Bucket=dst, Key="big")["Body"].read()).digest() == (
            hashlib.sha256(data).digest()
        )
        return
    assert flipped >= 1
    assert result.status == Status.FAILED, (result.status, result.verified_by)
    assert "verification failed" in (result.reason or "")
    assert server.keys(dst) == []
