"""The fault proxy itself (tests/faults/proxy.py): each fault does to a client what it claims,
a request it spares reaches the server signed as sent, and its decisions repeat with the seed."""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from conftest import S3Server
from faults.proxy import FaultPlan, fault_proxy, request_kind

DATA = bytes(range(256)) * 400


def _client(url: str) -> Any:
    """A client that does not retry, so the fault itself is what the call meets."""
    config = Config(
        s3={"addressing_style": "path"},
        retries={"mode": "standard", "total_max_attempts": 1},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return boto3.client("s3", endpoint_url=url, region_name="us-east-1", config=config)


def _get(client: Any, bucket: str) -> bytes:
    return client.get_object(Bucket=bucket, Key="k")["Body"].read()


def test_each_fault_reaches_the_client(versitygw: S3Server) -> None:
    bucket = versitygw.bucket("proxy")
    versitygw.client.put_object(Bucket=bucket, Key="k", Body=DATA)

    with fault_proxy(versitygw.url, FaultPlan(rates={})) as proxy:
        assert _get(_client(proxy.url), bucket) == DATA  # signed for the proxy's Host, verified upstream

    for fault, code in (("slowdown", "SlowDown"), ("internal", "InternalError")):
        with fault_proxy(versitygw.url, FaultPlan(rates={fault: 1.0})) as proxy:
            with pytest.raises(ClientError) as raised:
                _get(_client(proxy.url), bucket)
            assert raised.value.response["Error"]["Code"] == code
            assert proxy.injected[("get", fault)] == 1

    for fault in ("reset", "truncate"):
        with fault_proxy(versitygw.url, FaultPlan(rates={fault: 1.0})) as proxy, pytest.raises(BotoCoreError):
            _get(_client(proxy.url), bucket)

    with fault_proxy(versitygw.url, FaultPlan(rates={"flip": 1.0})) as proxy:
        flipped = _get(_client(proxy.url), bucket)
    assert len(flipped) == len(DATA)
    assert sum(a != b for a, b in zip(flipped, DATA, strict=True)) == 1

    with fault_proxy(versitygw.url, FaultPlan(rates={"delay": 1.0}, delay_seconds=0.4)) as proxy:
        started = time.monotonic()
        assert _get(_client(proxy.url), bucket) == DATA
        assert time.monotonic() - started >= 0.2


def test_a_reset_after_the_server_acted_reaches_the_server(versitygw: S3Server) -> None:
    bucket = versitygw.bucket("proxy")
    plan = FaultPlan(rates={"reset": 1.0}, kinds=frozenset({"put"}), reset_after_share=1.0)
    with fault_proxy(versitygw.url, plan) as proxy, pytest.raises(BotoCoreError):
        _client(proxy.url).put_object(Bucket=bucket, Key="acted", Body=b"x" * 1000)
    assert versitygw.keys(bucket) == ["acted"]  # the server acted; the client never heard


def test_the_same_seed_draws_the_same_faults() -> None:
    plan = FaultPlan(rates={"internal": 0.3, "flip": 0.3}, seed=5)
    draws = [plan.draw("get", f"GET k{n} [] ", 0)[0] for n in range(200)]
    assert draws == [plan.draw("get", f"GET k{n} [] ", 0)[0] for n in range(200)]
    assert {"internal", "flip", None} == set(draws)
    other = FaultPlan(rates={"internal": 0.3, "flip": 0.3}, seed=6)
    assert draws != [other.draw("get", f"GET k{n} [] ", 0)[0] for n in range(200)]
    # Body faults spare requests without object bytes.
    assert all(plan.draw("put", f"PUT k{n} [] ", 0)[0] != "flip" for n in range(200))


@pytest.mark.parametrize(
    "method, path, query, headers, kind",
    [
        ("HEAD", "/b/k", {}, {}, "head"),
        ("GET", "/b/k", {}, {"range": "bytes=0-9"}, "get-range"),
        ("GET", "/b", {"list-type": "2"}, {}, "list"),
        (
            "PUT",
            "/b/k",
            {"partNumber": "1", "uploadId": "u"},
            {"x-amz-copy-source": "b/s"},
            "upload-part-copy",
        ),
        ("PUT", "/b/k", {}, {"x-amz-copy-source": "b/s"}, "copy-object"),
        ("POST", "/b/k", {"uploads": ""}, {}, "create-multipart"),
        ("POST", "/b/k", {"uploadId": "u"}, {}, "complete-multipart"),
        ("DELETE", "/b/k", {"uploadId": "u"}, {}, "abort-multipart"),
    ],
)
def test_request_kinds(
    method: str, path: str, query: dict[str, str], headers: dict[str, str], kind: str
) -> None:
    assert request_kind(method, path, query, headers) == kind
