"""A fault-injecting HTTP proxy between Ferry and a real S3 server, for the reliability tests.

Ferry's `endpoint_url` is the proxy; the proxy forwards each request to the server unchanged
(method, path and query, every header, Host included, and the body byte for byte), so SigV4
signatures still verify at the server: the signature covers the Host the client sent, and the
server checks it against the Host it receives, which is the same. (Checked with versitygw
1.8.0 and MinIO; tests/faults/test_fault_injection.py would fail with SignatureDoesNotMatch
otherwise.) Chunked request bodies are de-framed and sent on with a Content-Length.

At configurable rates it injects, per request:

- `slowdown`: 503 SlowDown with S3's XML error body, the request never reaching the server;
- `internal`: 500 InternalError, likewise;
- `reset`: the connection reset (RST) mid-body: for a GET of an object, after the status line,
  the headers and part of the body. Any other request is reset either while its body is being
  read (or right after its headers), so the server never sees it, or, with the share
  `reset_after_share`, after the server has acted on it, mid-way through the answer (a
  CreateMultipartUpload that made an upload, a CompleteMultipartUpload that made the object,
  and the client never hears of it);
- `truncate`: a GET body cut short: fewer bytes than its Content-Length, then a clean close;
- `delay`: the response held back for `delay_seconds` (up to), then forwarded normally;
- `flip`: one byte of a GET body flipped, the response otherwise intact.

Decisions are reproducible: each request's fault is drawn from a random generator seeded
with (seed, the request's identity: method, key (not bucket), sorted query without upload ids and
signatures, Range; and how many times that identity was seen before), so the same run meets
the same faults in whatever order its threads happen to send. The proxy counts every request
and every fault it injected, per request kind, so a test can assert that each fault fired.
"""

from __future__ import annotations

import hashlib
import random
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from engine.server_quirks import HOP_BY_HOP, forward

FAULTS = ("slowdown", "internal", "reset", "truncate", "delay", "flip")
BODY_FAULTS = frozenset({"truncate", "flip"})  # only where the response carries object bytes
OBJECT_READS = frozenset({"get", "get-range"})

# The kinds of request Ferry sends, as the proxy names them (see request_kind).
KINDS = (
    "head",
    "get",
    "get-range",
    "put",
    "copy-object",
    "upload-part",
    "upload-part-copy",
    "create-multipart",
    "complete-multipart",
    "abort-multipart",
    "list",
    "delete",
    "other",
)

ERROR_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
    "<Resource>{resource}</Resource><RequestId>ferry-fault-{n}</RequestId>"
    "<HostId>ferry-fault-proxy</HostId></Error>"
)
ERRORS = {
    "slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    "internal": (
        500,
        "Internal Server Error",
        "InternalError",
        "We encountered an internal error. Please try again.",
    ),
}
# Query parameters that differ between runs or attempts, left out of a request's identity.
_VOLATILE = {"uploadId", "X-Amz-Signature", "X-Amz-Date", "X-Amz-Credential", "x-id"}


def request_kind(method: str, path: str, query: Mapping[str, str], headers: Mapping[str, str]) -> str:
    """Which S3 operation a request is, from its method, path, query and headers."""
    has_key = "/" in path.lstrip("/")
    copy = "x-amz-copy-source" in headers
    if method == "HEAD":
        return "head" if has_key else "other"
    if method == "GET":
        if not has_key:
            return "list" if not ({"acl", "policy", "versioning", "location"} & set(query)) else "other"
        if {"tagging", "acl", "uploadId", "attributes"} & set(query):
            return "other"
        return "get-range" if "range" in headers else "get"
    if method == "PUT":
        if not has_key or {"tagging", "acl"} & set(query):
            return "other"
        if "partNumber" in query:
            return "upload-part-copy" if copy else "upload-part"
        return "copy-object" if copy else "put"
    if method == "POST":
        if "uploads" in query:
            return "create-multipart"
        if "uploadId" in query:
            return "complete-multipart"
        return "other"
    if method == "DELETE":
        if "uploadId" in query:
            return "abort-multipart"
        return "delete" if has_key else "other"
    return "other"


@dataclass
class FaultPlan:
    """How often each fault hits a request, and which kinds it may hit.

    `rates` are probabilities per request (their sum at most 1); `boost` multiplies them for
    rare kinds (a few parts per run) so that those meet each fault many times too. Body
    faults apply to object GETs only; on other kinds their share passes unharmed.
    """

    rates: dict[str, float] = field(default_factory=dict)
    seed: int = 13
    boost: dict[str, float] = field(default_factory=dict)
    kinds: frozenset[str] = frozenset(KINDS)
    delay_seconds: float = 0.3
    reset_after_share: float = 0.5  # resets of non-GET requests that come after the server acted
    first_attempts: int | None = None  # fault only the first N sends of each request, if set

    def __post_init__(self) -> None:
        unknown = set(self.rates) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {FAULTS}")

    def draw(self, kind: str, identity: str, seen_before: int) -> tuple[str | None, random.Random]:
        """The fault for this request (or None), and the generator its details come from."""
        digest = hashlib.sha256(f"{self.seed}|{identity}|{seen_before}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        if kind not in self.kinds or (self.first_attempts is not None and seen_before >= self.first_attempts):
            return None, rng
        boost = self.boost.get(kind, 1.0)
        roll = rng.random()
        for fault in FAULTS:
            rate = self.rates.get(fault, 0.0) * boost
            if roll < rate:
                if fault in BODY_FAULTS and kind not in OBJECT_READS:
                    return None, rng
                return fault, rng
            roll -= rate
        return None, rng


@dataclass
class FaultProxy:
    upstream: str
    plan: FaultPlan
    url: str = ""
    requests: Counter[str] = field(default_factory=Counter)  # per kind
    injected: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, fault)
    _seen: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_attempt(self, kind: str, identity: str) -> int:
        with self._lock:
            self.requests[kind] += 1
            n = self._seen[identity]
            self._seen[identity] += 1
            return n

    def record(self, kind: str, fault: str) -> None:
        with self._lock:
            self.injected[(kind, fault)] += 1

    def faults(self) -> Counter[str]:
        """How many times each fault was injected, over all kinds (`reset-after`: the resets
        that came after the server acted, also counted as `reset`)."""
        with self._lock:
            totals: Counter[str] = Counter()
            for (_, fault), n in self.injected.items():
                totals[fault] += n
            return totals

    def faulted_kinds(self) -> Counter[str]:
        """How many requests of each kind met a fault (of any type)."""
        with self._lock:
            totals: Counter[str] = Counter()
            for (kind, fault), n in self.injected.items():
                if fault != "reset-after":
                    totals[kind] += n
            return totals

    def set_plan(self, plan: FaultPlan) -> None:
        with self._lock:
            self.plan = plan

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()
            self.injected.clear()
            self._seen.clear()


def _identity(method: str, path: str, query: Mapping[str, str], headers: Mapping[str, str]) -> str:
    """What names a request across runs: not its bucket (tests make fresh ones with random
    names), nor upload ids and signatures."""
    key = path.lstrip("/").partition("/")[2]
    stable = sorted((k, v) for k, v in query.items() if k not in _VOLATILE)
    return f"{method} {key} {stable} {headers.get('range', '')}"


def _handler(proxy: FaultProxy, idle_timeout: float) -> type[BaseHTTPRequestHandler]:
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
                            pass
                        return bytes(data)
                    data += self.rfile.read(size)
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _handle(self) -> None:
            split = urlsplit(self.path)
            query = dict(parse_qsl(split.query, keep_blank_values=True))
            headers = {k.lower(): v for k, v in self.headers.items()}
            kind = request_kind(self.command, split.path, query, headers)
            identity = _identity(self.command, split.path, query, headers)
            attempt = proxy.next_attempt(kind, identity)
            fault, rng = proxy.plan.draw(kind, identity, attempt)
            if fault == "reset" and kind not in OBJECT_READS:
                proxy.record(kind, fault)
                if rng.random() >= proxy.plan.reset_after_share:
                    self._reset_while_reading(rng)
                    return
                proxy.record(kind, "reset-after")
            body = self._body()
            if fault in ERRORS:
                proxy.record(kind, fault)
                self._answer_error(fault, split.path, attempt)
                return
            if fault == "delay":
                proxy.record(kind, fault)
                time.sleep(proxy.plan.delay_seconds * rng.uniform(0.5, 1.0))
            status, reason, out_headers, payload = forward(
                upstream, self.command, self.path, self.headers, body
            )
            if fault == "reset" and kind not in OBJECT_READS:
                self._reset_answer(status, reason, out_headers, payload, rng)
                return
            if fault in ("reset", "truncate", "flip"):
                if status not in (200, 206) or not payload:
                    fault = None  # nothing to cut or flip in an error answer: sent as it came
                else:
                    proxy.record(kind, fault)
            self.send_response(status, reason)
            for name, value in out_headers:
                if name.lower() in HOP_BY_HOP or name.lower() == "content-length":
                    continue
                self.send_header(name, value)
            if self.command != "HEAD":
                self.send_header("Content-Length", str(len(payload)))
            else:
                length = dict((k.lower(), v) for k, v in out_headers).get("content-length")
                if length is not None:
                    self.send_header("Content-Length", length)
            self.end_headers()
            if self.command == "HEAD":
                return
            if fault == "flip":
                at = rng.randrange(len(payload))
                payload = payload[:at] + bytes([payload[at] ^ (1 << rng.randrange(8))]) + payload[at + 1 :]
            if fault in ("reset", "truncate"):
                cut = rng.randrange(len(payload))  # at least one byte short
                self.wfile.write(payload[:cut])
                self.wfile.flush()
                if fault == "reset":
                    self._send_rst()
                else:
                    self._close_cleanly()
                return
            self.wfile.write(payload)

        def _reset_answer(
            self, status: int, reason: str, headers: list[tuple[str, str]], payload: bytes, rng: random.Random
        ) -> None:
            """The server acted; its answer is cut by a reset: mid-body when it has one, else
            mid-headers (a complete bodiless answer would already be an answer)."""
            if not payload or self.command == "HEAD":
                self.wfile.write(f"HTTP/1.1 {status} {reason}\r\n".encode())
            else:
                self.send_response(status, reason)
                for name, value in headers:
                    if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload[: rng.randrange(len(payload))])
            self.wfile.flush()
            self._send_rst()

        def _reset_while_reading(self, rng: random.Random) -> None:
            """Read part of the request body (if any), then reset: the server never sees it."""
            length = int(self.headers.get("Content-Length") or 0)
            if length and "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
                self.rfile.read(rng.randrange(length))
            self._send_rst()

        def _send_rst(self) -> None:
            """Close with SO_LINGER 0: the kernel sends RST, the client reads ECONNRESET."""
            self.close_connection = True
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
            except OSError:
                pass

        def _close_cleanly(self) -> None:
            self.close_connection = True
            with suppress(OSError):
                self.connection.shutdown(socket.SHUT_WR)

        def _answer_error(self, fault: str, path: str, n: int) -> None:
            status, reason, code, message = ERRORS[fault]
            payload = ERROR_BODY.format(code=code, message=message, resource=path, n=n).encode()
            self.send_response(status, reason)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", "0" if self.command == "HEAD" else str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

    return Handler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # many client threads connect at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-answer (or a reset we sent) is no news here


@contextmanager
def fault_proxy(
    upstream: str, plan: FaultPlan, *, lifetime: float = 900.0, idle_timeout: float = 30.0
) -> Iterator[FaultProxy]:
    """A FaultProxy on 127.0.0.1 in front of `upstream`; stops when the block ends, or by
    itself after `lifetime` seconds."""
    proxy = FaultProxy(upstream=upstream, plan=plan)
    server = _QuietServer(("127.0.0.1", 0), _handler(proxy, idle_timeout))
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    watchdog = threading.Timer(lifetime, server.shutdown)
    watchdog.daemon = True
    watchdog.start()
    try:
        yield proxy
    finally:
        watchdog.cancel()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
