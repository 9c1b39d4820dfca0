"""A loopback proxy that makes a real S3 server behave like the S3-compatible stores users meet.

Ferry is tested on versitygw and MinIO, which implement most of S3. Other stores (object
gateways, appliances, small self-hosted servers) answer `501 NotImplemented` ("A header you
provided implies functionality that is not implemented") where they lack a feature, or accept
a header and ignore it. Seen in the field, and emulated here:

- `tagging-directive`: CopyObject with `x-amz-tagging-directive` is refused (501), even with
  `COPY`, S3's default; a CopyObject without the header works.
- `no-tagging`: no object tagging at all: GetObjectTagging / PutObjectTagging (`?tagging`)
  and any write carrying `x-amz-tagging` answer 501, and HEAD does not say `x-amz-tagging-count`.
- `drops-tags`: writes with `x-amz-tagging` succeed but the object keeps no tags (the proxy
  removes them upstream, with its own signed request, before answering).
- `refuses-write-tags`: tagging can be read, but a write carrying `x-amz-tagging` answers 501.
- `head-part-number`: HeadObject with `partNumber` answers 501, so no part layout is learned.
- `ignores-range`: a GET's `Range` is ignored: the whole object comes back, `200 OK`, as from
  a server or proxy without ranged reads (the proxy fetches it with its own signed request).

Every other request is forwarded unchanged: method, path and query, every header the client
signed (Host included) and the body byte for byte, so SigV4 still verifies at the server.
Chunked request bodies (botocore's aws-chunked uploads) are de-framed and sent on with a
Content-Length (neither header is signed). Keep-alive connections are served until the client
closes them or they sit idle for `idle_timeout`. The proxy listens on 127.0.0.1 only and stops
when its `with` block ends, or by itself after `lifetime` seconds.
"""

from __future__ import annotations

import copy
import http.client
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

NOT_IMPLEMENTED_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NotImplemented</Code>'
    "<Message>A header you provided implies functionality that is not implemented</Message>"
    "<Resource>{resource}</Resource><RequestId>ferry-quirk</RequestId></Error>"
)
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade", "expect"}


def forward(
    upstream: Any, command: str, path: str, headers: Any, body: bytes
) -> tuple[int, str, list[tuple[str, str]], bytes]:
    """Send one request on to the real server unchanged (its SigV4 signature still holds: the
    Host header is the client's own) and read the whole answer. Shared by the fault proxy."""
    connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=120)
    try:
        connection.putrequest(command, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            if name.lower() in HOP_BY_HOP or name.lower() == "content-length":
                continue
            connection.putheader(name, value)
        if body or command in ("PUT", "POST"):
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body or None)
        response = connection.getresponse()
        payload = response.read()
        return response.status, response.reason, response.getheaders(), payload
    finally:
        connection.close()


@dataclass(frozen=True)
class Refuse:
    """Answer 501 NotImplemented to requests that match every condition given."""

    method: str | None = None  # e.g. "HEAD"; None: any
    query: str | None = None  # a query parameter that must be present, e.g. "tagging"
    header: str | None = None  # a request header that must be present (lower case)

    def matches(self, method: str, query: dict[str, str], headers: dict[str, str]) -> bool:
        return (
            (self.method is None or method == self.method)
            and (self.query is None or self.query in query)
            and (self.header is None or self.header in headers)
        )


@dataclass(frozen=True)
class DropTags:
    """Accept writes carrying tags, then keep none (removed upstream before answering)."""


@dataclass(frozen=True)
class HideResponseHeader:
    """Leave a header out of every response (a server that never sends it), or out of the
    answers to one method only."""

    header: str
    method: str | None = None


@dataclass
class AnswerFirst:
    """Answer the first `times` requests that match with `status` and `body` instead of
    forwarding them (S3's throttling 503 SlowDown; a CopyObject that fails after S3 started
    answering 200, whose error then comes in the body). Later requests are forwarded."""

    status: int
    body: str
    match: Refuse
    times: int = 1


@dataclass(frozen=True)
class IgnoreRange:
    """Answer a GET with a Range with the whole object, 200 OK."""


Rule = Refuse | DropTags | HideResponseHeader | AnswerFirst | IgnoreRange

SLOW_DOWN_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    "<Message>Please reduce your request rate.</Message><RequestId>ferry-quirk</RequestId></Error>"
)
COPY_ERROR_IN_200_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
    "<Message>We encountered an internal error. Please try again.</Message>"
    "<RequestId>ferry-quirk</RequestId></Error>"
)

QUIRKS: dict[str, tuple[Rule, ...]] = {
    "tagging-directive": (Refuse(method="PUT", header="x-amz-tagging-directive"),),
    "no-tagging": (
        Refuse(query="tagging"),
        Refuse(header="x-amz-tagging"),
        HideResponseHeader("x-amz-tagging-count"),
    ),
    "drops-tags": (DropTags(),),
    "refuses-write-tags": (Refuse(header="x-amz-tagging"),),
    "head-part-number": (Refuse(method="HEAD", query="partNumber"),),
    "ignores-range": (IgnoreRange(),),
    # Writes (PutObject, CopyObject) answered without naming the object's encryption, which a
    # HEAD still reports: the answer proves nothing about encryption.
    "no-encryption-in-write-answers": (
        HideResponseHeader("x-amz-server-side-encryption", method="PUT"),
        HideResponseHeader("x-amz-server-side-encryption-aws-kms-key-id", method="PUT"),
    ),
    # One throttled CopyObject, then S3 as usual.
    "copy-slowdown-once": (
        AnswerFirst(503, SLOW_DOWN_BODY, Refuse(method="PUT", header="x-amz-copy-source")),
    ),
    # One CopyObject answered "200 OK" with an error in its body, then S3 as usual.
    "copy-200-error-once": (
        AnswerFirst(200, COPY_ERROR_IN_200_BODY, Refuse(method="PUT", header="x-amz-copy-source")),
    ),
}


@dataclass
class Seen:
    """One request as the proxy saw it, and what it answered."""

    method: str
    path: str  # unquoted, without the query
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    status: int = 0
    refused: bool = False


@dataclass
class QuirkProxy:
    upstream: str  # http://127.0.0.1:PORT
    rules: tuple[Rule, ...]
    url: str = ""
    seen: list[Seen] = field(default_factory=list)
    untag: Any = None  # a boto3 client for the upstream, for DropTags
    closed: int = 0  # client connections the proxy has closed (idle, or at the client's end)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closing: threading.Condition = field(default_factory=threading.Condition)

    def connection_closed(self) -> None:
        with self._closing:
            self.closed += 1
            self._closing.notify_all()

    def wait_closed(self, count: int, timeout: float = 10.0) -> bool:
        """Until `count` client connections have been closed; False if not within `timeout`."""
        with self._closing:
            return self._closing.wait_for(lambda: self.closed >= count, timeout)

    def record(self, entry: Seen) -> None:
        with self._lock:
            self.seen.append(entry)

    def requests(self, method: str | None = None, query: str | None = None) -> list[Seen]:
        with self._lock:
            return [
                s
                for s in self.seen
                if (method is None or s.method == method) and (query is None or query in s.query)
            ]

    def refused(self) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.refused]

    def clear(self) -> None:
        with self._lock:
            self.seen.clear()


def _handler(proxy: QuirkProxy, idle_timeout: float) -> type[BaseHTTPRequestHandler]:
    upstream = urlsplit(proxy.upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, and 100-continue answered for the client
        timeout = idle_timeout

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet tests
            pass

        def _body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                data = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass  # trailers of the HTTP framing (none from botocore)
                        return bytes(data)
                    data += self.rfile.read(size)
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _handle(self) -> None:
            split = urlsplit(self.path)
            query = dict(parse_qsl(split.query, keep_blank_values=True))
            headers = {k.lower(): v for k, v in self.headers.items()}
            body = self._body()
            entry = Seen(self.command, unquote(split.path), query, headers)
            rules = proxy.rules
            for rule in rules:
                if isinstance(rule, AnswerFirst) and rule.match.matches(self.command, query, headers):
                    with proxy._lock:
                        due, rule.times = rule.times > 0, rule.times - 1
                    if due:
                        entry.status, entry.refused = rule.status, True
                        proxy.record(entry)
                        self._answer(rule.status, rule.body.encode())
                        return
            if any(isinstance(r, Refuse) and r.matches(self.command, query, headers) for r in rules):
                entry.status, entry.refused = 501, True
                proxy.record(entry)
                self._answer_not_implemented(split.path)
                return
            status, reason, out_headers, payload = forward(
                upstream, self.command, self.path, self.headers, body
            )
            if (
                self.command == "GET"
                and "range" in headers
                and status == 206
                and any(isinstance(r, IgnoreRange) for r in rules)
            ):
                status, reason, out_headers, payload = _whole_object(proxy.untag, unquote(split.path))
            if (
                status == 200
                and any(isinstance(r, DropTags) for r in rules)
                and _writes_tags(self.command, query, headers)
            ):
                bucket, _, key = unquote(split.path).lstrip("/").partition("/")
                proxy.untag.delete_object_tagging(Bucket=bucket, Key=key)
            hidden = {
                r.header
                for r in rules
                if isinstance(r, HideResponseHeader) and r.method in (None, self.command)
            }
            entry.status = status
            proxy.record(entry)
            self.send_response(status, reason)
            for name, value in out_headers:
                if name.lower() in HOP_BY_HOP or name.lower() in hidden:
                    continue
                if name.lower() == "content-length" and self.command != "HEAD":
                    continue
                self.send_header(name, value)
            if self.command != "HEAD":
                self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        def _answer(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _answer_not_implemented(self, path: str) -> None:
            payload = NOT_IMPLEMENTED_BODY.format(resource=path).encode()
            self.send_response(501, "Not Implemented")
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", "0" if self.command == "HEAD" else str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

    return Handler


def _whole_object(client: Any, path: str) -> tuple[int, str, list[tuple[str, str]], bytes]:
    """The object at `path`, whole, as the answer to a GET: its own headers, not the range's."""
    bucket, _, key = path.lstrip("/").partition("/")
    answer = client.get_object(Bucket=bucket, Key=key)
    headers = answer["ResponseMetadata"]["HTTPHeaders"]
    kept = [(k, v) for k, v in headers.items() if k.lower() not in ("content-range", "content-length")]
    return 200, "OK", kept, answer["Body"].read()


def _writes_tags(method: str, query: dict[str, str], headers: dict[str, str]) -> bool:
    """A request that creates an object with tags: PutObject, CopyObject (whose tags S3 copies
    unless told otherwise) or CompleteMultipartUpload (whose tags were given at its start)."""
    if method == "PUT" and "partNumber" not in query and "tagging" not in query:
        return "x-amz-tagging" in headers or "x-amz-copy-source" in headers
    return method == "POST" and "uploadId" in query


class _CountingServer(ThreadingHTTPServer):
    """Tells the proxy each client connection it has closed, once its socket is shut."""

    proxy: QuirkProxy

    def shutdown_request(self, request: Any) -> None:
        try:
            super().shutdown_request(request)
        finally:
            self.proxy.connection_closed()


@contextmanager
def quirk_proxy(
    upstream: str,
    *quirks: str,
    untag_client: Any = None,
    lifetime: float = 600.0,
    idle_timeout: float = 30.0,
) -> Iterator[QuirkProxy]:
    """A proxy on 127.0.0.1 in front of `upstream` behaving as the named QUIRKS."""
    # AnswerFirst counts down: each proxy gets its own copy of every rule.
    rules = tuple(copy.copy(rule) for name in quirks for rule in QUIRKS[name])
    proxy = QuirkProxy(upstream=upstream, rules=rules, untag=untag_client)
    server = _CountingServer(("127.0.0.1", 0), _handler(proxy, idle_timeout))
    server.proxy = proxy
    server.daemon_threads = True
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    stop_at = time.monotonic() + lifetime
    watchdog = threading.Timer(lifetime, server.shutdown)  # stops by itself, whatever the test does
    watchdog.daemon = True
    watchdog.start()
    try:
        yield proxy
    finally:
        watchdog.cancel()
        if time.monotonic() < stop_at:
            server.shutdown()
        server.server_close()
        thread.join(timeout=10)
