"""The lean request path (ferry.s3.lean_s3): the hot small-object requests are sent by hand,
answered exactly as botocore answers them, and everything it does not handle is botocore's.

Every request below goes to a real server (versitygw, MinIO, Garage), through a QuirkProxy
where the test needs to see who sent each request (the lean path marks its User-Agent) or
needs S3's rarer answers (throttling, an error in a 200, a closed keep-alive connection).
"""

from __future__ import annotations

import datetime
import io
import time
from typing import Any

import pytest
from botocore.credentials import RefreshableCredentials
from botocore.exceptions import ClientError

from ferry import Copier, CopyPolicy, Endpoint, SourceObject, Status, Target
from ferry.s3 import listing
from ferry.s3.clients import make_client
from ferry.s3.lean_s3 import LEAN_USER_AGENT_MARK, LeanClient, lean_requests_enabled


def _lean(seen: Any) -> bool:
    return LEAN_USER_AGENT_MARK in seen.headers.get("user-agent", "")


def _answer(response: dict[str, Any]) -> dict[str, Any]:
    """A response without what differs from one request to the next."""
    out = {k: v for k, v in response.items() if k not in ("ResponseMetadata", "Body")}
    if "Body" in response:
        out["Body"] = response["Body"].read()
    return out


@pytest.mark.parametrize("server_name", ["versitygw", "minio", "garage"])
def test_lean_answers_are_botocores_answers(request, server_name):
    """HEAD, ranged GET, PutObject, CopyObject (and GetObjectTagging where the server has
    tags) answer the same dicts, field for field and type for type, on both paths."""
    server = request.getfixturevalue(server_name)
    bucket = server.bucket("lean")
    key = "dir/mix ?#+%&=;@$,~!'()*[] é.txt"
    lean, plain = make_client(server.endpoint, lean=True), make_client(server.endpoint, lean=False)
    assert isinstance(lean, LeanClient) and not isinstance(plain, LeanClient)
    tags = {} if server_name == "garage" else {"Tagging": "kind=awkward"}
    put = lean.put_object(
        Bucket=bucket,
        Key=key,
        Body=io.BytesIO(b"0123456789"),
        Metadata={"k": "v"},
        ContentType="text/x",
        **tags,
    )
    assert put["ETag"] == '"781e5e245d69b566979b86e28d23f2c7"'
    for method, args in [
        ("head_object", {"Bucket": bucket, "Key": key, "ChecksumMode": "ENABLED"}),
        ("get_object", {"Bucket": bucket, "Key": key, "Range": "bytes=2-5", "IfMatch": put["ETag"]}),
    ] + ([("get_object_tagging", {"Bucket": bucket, "Key": key})] if tags else []):
        assert _answer(getattr(lean, method)(**args)) == _answer(getattr(plain, method)(**args)), method
    copies = [
        client.copy_object(
            Bucket=bucket,
            Key=f"copy-{n}",
            CopySource={"Bucket": bucket, "Key": key},
            CopySourceIfMatch=put["ETag"],
        )
        for n, client in enumerate((lean, plain))
    ]
    lean_copy, plain_copy = (_answer(c) for c in copies)
    assert lean_copy.keys() == plain_copy.keys()
    assert lean_copy["CopyObjectResult"]["ETag"] == plain_copy["CopyObjectResult"]["ETag"] == put["ETag"]
    assert type(lean_copy["CopyObjectResult"]["LastModified"]) is datetime.datetime
    assert lean.sent == (5 if tags else 4)
    assert lean.fallbacks == 0


def test_copies_take_the_lean_path_and_listings_stay_on_botocore(versitygw, quirks):
    """A server-side and a streamed copy: every HEAD, GET, PUT, CopyObject and
    GetObjectTagging is the lean path's; listings (not lean operations) are botocore's."""
    proxy = quirks(versitygw)
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    for n in range(3):
        versitygw.client.put_object(Bucket=src, Key=f"k{n}", Body=b"x" * 1000, Tagging="a=b")
    endpoint = Endpoint(endpoint_url=proxy.url, region="us-east-1")
    for mode in ("server-side", "stream"):
        with Copier(endpoint, endpoint, CopyPolicy(mode=mode)) as copier:
            results = [copier.copy(SourceObject(src, f"k{n}"), Target(dst, f"{mode}/k{n}")) for n in range(3)]
        assert [r.status for r in results] == [Status.COPIED] * 3, [r.reason for r in results]
    hot = [s for s in proxy.seen if "list-type" not in s.query]
    assert hot and all(_lean(s) for s in hot), [(s.method, s.path, s.query) for s in hot if not _lean(s)]
    assert versitygw.client.get_object(Bucket=dst, Key="stream/k1")["Body"].read() == b"x" * 1000
    assert versitygw.client.get_object_tagging(Bucket=dst, Key="server-side/k2")["TagSet"] == [
        {"Key": "a", "Value": "b"}
    ]


def test_final_errors_are_botocores_client_errors_sent_once(versitygw, quirks):
    """A HEAD of a missing key (404) and a copy whose source changed (412) raise the
    ClientError botocore raises, from one request: neither is retried or redirected."""
    proxy = quirks(versitygw)
    bucket = versitygw.bucket("lean")
    versitygw.client.put_object(Bucket=bucket, Key="there", Body=b"1")
    endpoint = Endpoint(endpoint_url=proxy.url, region="us-east-1")
    lean, plain = make_client(endpoint, lean=True), make_client(endpoint, lean=False)
    errors = []
    for client in (lean, plain):
        with pytest.raises(ClientError) as missing:
            client.head_object(Bucket=bucket, Key="not there")
        with pytest.raises(ClientError) as changed:
            client.copy_object(
                Bucket=bucket,
                Key="copy",
                CopySource={"Bucket": bucket, "Key": "there"},
                CopySourceIfMatch='"0"',
            )
        errors.append([(e.value.response["Error"], type(e.value).__name__) for e in (missing, changed)])
    assert errors[0] == errors[1]
    assert errors[0][0][0]["Code"] == "404"
    assert errors[0][1][0]["Code"] == "PreconditionFailed"
    lean_requests = [s for s in proxy.seen if _lean(s)]
    assert [(s.method, s.status) for s in lean_requests] == [("HEAD", 404), ("PUT", 412)]
    assert len(proxy.seen) == 4  # each request once per path


@pytest.mark.parametrize("quirk", ["copy-slowdown-once", "copy-200-error-once"])
def test_throttling_and_an_error_in_a_200_go_back_through_botocore(versitygw, quirks, quirk):
    """A throttled CopyObject (503 SlowDown) and one answered 200 with an <Error> body are
    sent again by botocore, which retries them: the copy is made, and proved."""
    proxy = quirks(versitygw, quirk)
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    versitygw.client.put_object(Bucket=src, Key="k", Body=b"payload")
    endpoint = Endpoint(endpoint_url=proxy.url, region="us-east-1")
    client = make_client(endpoint, lean=True)
    calls: list[str] = []
    client.meta.events.register("before-call.s3.CopyObject", lambda **_: calls.append("copy"))
    head = versitygw.client.head_object(Bucket=src, Key="k")
    response = client.copy_object(
        Bucket=dst, Key="k", CopySource={"Bucket": src, "Key": "k"}, CopySourceIfMatch=head["ETag"]
    )
    assert response["CopyObjectResult"]["ETag"] == head["ETag"]
    copies = proxy.requests(method="PUT")
    assert [(_lean(s), s.refused) for s in copies] == [(True, True), (False, False)]
    assert client.fallbacks == 1 and client.sent == 0
    assert calls == ["copy", "copy"]  # a request hook sees both requests sent
    assert versitygw.client.get_object(Bucket=dst, Key="k")["Body"].read() == b"payload"


def test_not_implemented_is_botocores_client_error_sent_once(versitygw, quirks):
    """A 501 (a store without object tagging) is final for botocore too (neither retried nor
    redirected): the lean path raises the same ClientError from one request, and a
    before-call hook registered on the client counts that one request."""
    proxy = quirks(versitygw, "no-tagging")
    bucket = versitygw.bucket("lean")
    versitygw.client.put_object(Bucket=bucket, Key="k", Body=b"1")
    endpoint = Endpoint(endpoint_url=proxy.url, region="us-east-1")
    errors = []
    for lean in (True, False):
        client = make_client(endpoint, lean=lean)
        calls: list[str] = []
        client.meta.events.register(
            "before-call.s3.GetObjectTagging", lambda calls=calls, **_: calls.append("t")
        )
        with pytest.raises(ClientError) as refused:
            client.get_object_tagging(Bucket=bucket, Key="k")
        errors.append((type(refused.value), refused.value.response["Error"]))
        assert calls == ["t"]
    assert errors[0] == errors[1]
    assert errors[0][1]["Code"] == "NotImplemented"
    assert [_lean(s) for s in proxy.requests(query="tagging")] == [True, False]


def test_a_closed_keep_alive_connection_goes_back_through_botocore(versitygw, quirks):
    """The server closes an idle keep-alive connection: the next request on it fails to get
    an answer, and botocore sends it instead. The request after that is lean again."""
    from contextlib import ExitStack

    from engine.server_quirks import quirk_proxy

    bucket = versitygw.bucket("lean")
    versitygw.client.put_object(Bucket=bucket, Key="k", Body=b"1")
    with ExitStack() as stack:
        proxy = stack.enter_context(quirk_proxy(versitygw.url, idle_timeout=0.3))
        client = make_client(Endpoint(endpoint_url=proxy.url, region="us-east-1"), lean=True)
        assert client.head_object(Bucket=bucket, Key="k")["ContentLength"] == 1
        assert proxy.wait_closed(1)  # the proxy has closed the idle connection
        assert client.head_object(Bucket=bucket, Key="k")["ContentLength"] == 1
        assert client.head_object(Bucket=bucket, Key="k")["ContentLength"] == 1
        assert [_lean(s) for s in proxy.seen] == [True, False, True]
        assert (client.sent, client.fallbacks) == (2, 1)


def test_get_body_closed_early_does_not_spoil_the_next_request(versitygw):
    """A GET body closed unread (the engine's one-byte probe) closes its connection: the
    next request on that thread opens a new one instead of reading the old body's bytes."""
    bucket = versitygw.bucket("lean")
    versitygw.client.put_object(Bucket=bucket, Key="big", Body=b"y" * 200_000)
    client = make_client(versitygw.endpoint, lean=True)
    client.get_object(Bucket=bucket, Key="big")["Body"].close()
    assert client.head_object(Bucket=bucket, Key="big")["ContentLength"] == 200_000
    body = client.get_object(Bucket=bucket, Key="big", Range="bytes=10-19")["Body"]
    assert body.read() == b"y" * 10
    assert (client.sent, client.fallbacks) == (3, 0)


def test_refreshable_credentials_are_refreshed_before_signing(versitygw):
    """The lean path signs with the session's own refreshable credentials: credentials that
    expire within botocore's mandatory refresh window are refreshed before the request."""
    bucket = versitygw.bucket("lean")
    versitygw.client.put_object(Bucket=bucket, Key="k", Body=b"1")
    from conftest import ACCESS_KEY, SECRET_KEY

    fetched: list[int] = []

    def fetch() -> dict[str, Any]:
        fetched.append(1)
        expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
        return {
            "access_key": ACCESS_KEY,
            "secret_key": SECRET_KEY,
            "token": None,
            "expiry_time": expiry.isoformat(),
        }

    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=1)
    stale = {
        "access_key": "wrong",
        "secret_key": "wrong-secret",
        "token": None,
        "expiry_time": soon.isoformat(),
    }
    credentials = RefreshableCredentials.create_from_metadata(stale, fetch, "test")
    client = make_client(versitygw.endpoint, lean=True)
    client._credentials = credentials  # as clients.session_for installs role or secret credentials
    assert client.head_object(Bucket=bucket, Key="k")["ContentLength"] == 1
    assert fetched == [1]
    assert (client.sent, client.fallbacks) == (1, 0)


def test_endpoints_it_does_not_speak_stay_on_botocore(monkeypatch):
    """S3 Express, access point ARNs, FIPS, dualstack and proxies are botocore's; nothing is
    sent to decide it."""
    aws = make_client(Endpoint(region="eu-west-1"), lean=True)
    assert aws.route("head_object", Bucket="plain-bucket", Key="k") == "lean"
    assert aws.route("copy_object", Bucket="plain-bucket", Key="k", CopySource="a/b") == "lean"
    assert "ARN" in aws.route(
        "head_object", Bucket="arn:aws:s3:eu-west-1:123456789012:accesspoint/ap", Key="k"
    )
    assert "s3express" in aws.route("get_object", Bucket="bkt--euw1-az1--x-s3", Key="k")
    assert "botocore computes" in aws.route(
        "put_object", Bucket="b", Key="k", Body=b"", ChecksumAlgorithm="CRC32"
    )
    assert aws.route("list_objects_v2", Bucket="plain-bucket", Prefix="p/") == "lean"
    assert "not sent on the lean path" in aws.route("list_multipart_uploads", Bucket="b")
    monkeypatch.setenv("AWS_USE_FIPS_ENDPOINT", "true")
    assert "fips" in make_client(Endpoint(region="us-east-1"), lean=True).route(
        "head_object", Bucket="b", Key="k"
    )
    monkeypatch.delenv("AWS_USE_FIPS_ENDPOINT")
    monkeypatch.setenv("AWS_USE_DUALSTACK_ENDPOINT", "true")
    assert "dualstack" in make_client(Endpoint(region="us-east-1"), lean=True).route(
        "head_object", Bucket="b", Key="k"
    )
    monkeypatch.delenv("AWS_USE_DUALSTACK_ENDPOINT")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    assert "proxy" in make_client(Endpoint(region="us-east-1"), lean=True).route(
        "head_object", Bucket="b", Key="k"
    )


def test_the_option_turns_the_lean_path_off(monkeypatch, versitygw):
    monkeypatch.setenv("FERRY_LEAN_REQUESTS", "0")
    assert not lean_requests_enabled()
    assert not isinstance(make_client(versitygw.endpoint), LeanClient)
    monkeypatch.setenv("FERRY_LEAN_REQUESTS", "1")
    assert isinstance(make_client(versitygw.endpoint), LeanClient)
    assert not isinstance(make_client(versitygw.endpoint, lean=False), LeanClient)
    monkeypatch.delenv("FERRY_LEAN_REQUESTS")
    assert lean_requests_enabled()


@pytest.fixture(scope="module")
def tls_versitygw(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """versitygw over https with a self-signed certificate for 127.0.0.1: (url, cert path)."""
    import os
    import subprocess

    from conftest import (
        ACCESS_KEY,
        SECRET_KEY,
        free_port,
        self_signed_certificate,
        server_binary,
        wait_for_port,
    )

    root = tmp_path_factory.mktemp("tls-vgw")
    cert_path, key_path = root / "cert.pem", root / "key.pem"
    self_signed_certificate(cert_path, key_path)
    (root / "data").mkdir()
    port = free_port()
    env = dict(os.environ, ROOT_ACCESS_KEY_ID=ACCESS_KEY, ROOT_SECRET_ACCESS_KEY=SECRET_KEY)
    command = [server_binary("versitygw"), "--port", f"127.0.0.1:{port}", "--cert", str(cert_path)]
    command += ["--key", str(key_path), "posix", str(root / "data")]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for_port(port)
        yield f"https://127.0.0.1:{port}", str(cert_path)
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_tls_is_verified_with_the_clients_ca_bundle(tls_versitygw, monkeypatch):
    """Over https the lean path trusts what botocore trusts: the server's certificate is
    accepted with AWS_CA_BUNDLE naming it, and refused without (botocore then refuses too,
    with its own SSLError): the lean path never sends over an unverified connection."""
    from botocore.exceptions import SSLError

    url, cert = tls_versitygw
    endpoint = Endpoint(endpoint_url=url, region="us-east-1")
    monkeypatch.setenv("AWS_CA_BUNDLE", cert)
    trusting = make_client(endpoint, lean=True)
    trusting.create_bucket(Bucket="tls")
    trusting.put_object(Bucket="tls", Key="k", Body=b"over tls")
    assert trusting.get_object(Bucket="tls", Key="k")["Body"].read() == b"over tls"
    assert (trusting.sent, trusting.fallbacks) == (2, 0)
    monkeypatch.delenv("AWS_CA_BUNDLE")
    # botocore retries an SSLError like any connection error; one attempt shows the refusal
    # as well as eight, without waiting out their backoff.
    monkeypatch.setattr("ferry.s3.clients.MAX_ATTEMPTS", 1)
    untrusting = make_client(endpoint, lean=True)
    with pytest.raises(SSLError):
        untrusting.head_object(Bucket="tls", Key="k")
    assert (untrusting.sent, untrusting.fallbacks) == (0, 1)


def test_the_adaptive_rate_limiter_sees_every_lean_answer(versitygw):
    """After throttling, botocore's adaptive mode raises its send rate again only as it sees
    successful answers: each lean 2xx reaches the client's rate limiter, once."""
    from botocore.retries.adaptive import ClientRateLimiter

    bucket = versitygw.bucket("lean")
    versitygw.client.put_object(Bucket=bucket, Key="k", Body=b"1")
    client = make_client(versitygw.endpoint, lean=True)
    handlers = client.meta.events._emitter._handlers.prefix_search("needs-retry.s3.HeadObject")
    (limiter,) = {h.__self__ for h in handlers if isinstance(getattr(h, "__self__", None), ClientRateLimiter)}
    seen: list[float] = []
    success = limiter._rate_adjustor.success_received
    limiter._rate_adjustor.success_received = lambda timestamp: seen.append(timestamp) or success(timestamp)
    for _ in range(3):
        client.head_object(Bucket=bucket, Key="k")
    assert client.sent == 3 and len(seen) == 3


def _page(page: dict[str, Any]) -> dict[str, Any]:
    """A listing page without its continuation tokens, which MinIO makes anew for each listing."""
    out = _answer(page)
    for name in ("ContinuationToken", "NextContinuationToken"):
        out[name] = bool(out.get(name))
    return out


@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_lean_listings_are_botocores_listings(request, server_name):
    """ListObjectsV2 page for page: keys any XML can carry (sent url-encoded and decoded, as
    botocore does), common prefixes, continuation tokens, sizes, ETags and times."""
    server = request.getfixturevalue(server_name)
    bucket = server.bucket("lean")
    keys = ["dir/mix ?#+%&=;@$,~!'()*[] é.txt", "dir/a+b c", "dir/sub/x", "dir/sub/y", "dir/%41", "other"]
    for key in keys:
        server.client.put_object(Bucket=bucket, Key=key, Body=key.encode())
    lean, plain = make_client(server.endpoint, lean=True), make_client(server.endpoint, lean=False)
    for args in [
        {"Prefix": "dir/"},
        {"Prefix": "dir/", "Delimiter": "/"},
        {"Prefix": "dir/", "MaxKeys": 2},
        {"Prefix": "dir/", "MaxKeys": 2, "StartAfter": "dir/a+b c"},
        {"Prefix": "none/"},
    ]:
        pages = []
        for client in (lean, plain):
            pages.append([_page(p) for p in listing.list_pages(client, Bucket=bucket, **args)])
        assert pages[0] == pages[1], args
    assert lean.sent >= 5 and lean.fallbacks == 0
    listed = [o.key for o in listing.list_objects(lean, bucket, "dir/")]
    assert sorted(listed) == sorted(k for k in keys if k.startswith("dir/"))


@pytest.mark.parametrize("split", [False, True])
def test_answers_are_framed_as_http_client_frames_them(split):
    """The lean path reads an answer's head itself: a 100 Continue skipped, repeated headers
    joined, a folded line continued, a chunked body, the connection's Connection: close, and a
    head that arrives in pieces (read line by line), all as http.client reads them."""
    import socket
    import threading

    from ferry.s3.lean_s3 import _LeanResponse

    raw = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nx-amz-meta-a: 1\r\nX-Amz-Meta-A: 2\r\nx-folded: one\r\n two\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    )
    ours, theirs = socket.socketpair()

    def serve() -> None:
        if split:  # the head in pieces, so no one read brings it whole
            for n in range(0, len(raw), 7):
                theirs.sendall(raw[n : n + 7])
                time.sleep(0.002)
        else:
            theirs.sendall(raw)

    sender = threading.Thread(target=serve)
    sender.start()
    response = _LeanResponse(ours, method="GET")
    response.begin()
    sender.join()
    assert (response.status, response.reason, response.chunked, response.will_close) == (
        200,
        "OK",
        True,
        True,
    )
    assert response.headers.lower["x-amz-meta-a"] == "1, 2"
    assert response.getheader("x-amz-meta-a") == "1, 2"
    assert response.headers.lower["x-folded"] == "one two"
    assert response.read() == b"hello"
    ours.close()
    theirs.close()


@pytest.mark.parametrize("algorithm", ["crc32", "crc32c", "crc64nvme", "sha256"])
def test_a_checked_get_body_passes_whole_and_fails_damaged_under_each_algorithm(algorithm: str) -> None:
    """The lean path checks a GET's body against its x-amz-checksum-* header as botocore does
    (its CRC32 computed by zlib-ng, the others by botocore's own classes): the body as sent
    reads through; one bit flipped on the way raises botocore's FlexibleChecksumError."""
    import base64
    import io
    import random

    from botocore.exceptions import FlexibleChecksumError
    from botocore.response import StreamingBody

    from ferry.engine.proofs.checksums import digest
    from ferry.s3.lean_s3 import _checked_body

    body = random.Random(3).randbytes(3 * 1024 * 1024 + 5)
    header = {
        f"x-amz-checksum-{algorithm}": base64.b64encode(digest(algorithm.upper(), body)).decode(),
        "content-length": str(len(body)),
    }
    checked = _checked_body(StreamingBody(io.BytesIO(body), len(body)), header)
    assert b"".join(iter(lambda: checked.read(1024 * 1024), b"")) == body
    damaged = bytearray(body)
    damaged[len(body) // 2] ^= 0x01
    checked = _checked_body(StreamingBody(io.BytesIO(bytes(damaged)), len(body)), header)
    with pytest.raises(FlexibleChecksumError):
        while checked.read(1024 * 1024):
            pass
