"""A lean request path for the hot requests of small objects, beside the botocore client.

`LeanClient` stands in for a botocore S3 client: every attribute is the client's, except
HeadObject, GetObject, PutObject, CopyObject, GetObjectTagging, ListObjectsV2, HeadBucket and
DeleteObject, which it sends itself (hand-signed SigV4 over one keep-alive connection per
thread, the request written and the answer's head read by this module, the rest by
`http.client`) and answers with the dict botocore would have returned. botocore costs 1.0-1.5 ms of client CPU per request,
mostly outside signing and the network; this path 0.2-0.45 ms (`make bench-lean`).

What stays botocore's, so nothing is re-invented:
- credentials: the same (refreshable) credentials object the client signs with;
- the endpoint: botocore's own endpoint rules resolve each bucket once (addressing style,
  region, auth scheme); anything but plain SigV4 to `s3` (S3 Express, access point ARNs,
  FIPS, dualstack, accelerate), a proxy, a client certificate or unverified TLS stays on
  botocore; TLS is verified with the client's own CA bundle (AWS_CA_BUNDLE / `verify`);
- parameters: serialised from the service model's own member locations; the S3 parameter
  handlers botocore runs (CopySource quoting, SSE-C key MD5, ASCII metadata, bucket names)
  are called as they are;
- every answer but a clean 2xx: the request is sent again through botocore with the same
  arguments, which keeps retries with backoff, adaptive throttling, region redirects, "200
  with an error body" and ClientError shapes. The resend is safe: Ferry's writes are
  conditional or idempotent (CopyObject with x-amz-copy-source-if-match, PutObject of the
  same bytes to the same key, reads), so a request that did reach S3 and is sent again
  writes the same object or is refused. Only 404, 304, 412 and 501, which botocore neither
  retries nor redirects, are answered here, parsed by botocore's own parser (a HEAD of a key
  not there yet is the common case: sending it twice would double its cost);
- events: hooks registered on the client after it was made (tests counting requests, the
  Stubber) are called as botocore calls them (provide-client-params, before-parameter-build,
  before-call, after-call); before-send goes to every handler, and needs-retry to the
  adaptive rate limiter (every handler for an answer that is not a 2xx), so the limiter sees
  each request and response, and moto's in-process mock answers them.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import http.client
import os
import socket
import ssl
import threading
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterable, Iterator
from email.utils import format_datetime
from typing import Any
from urllib.parse import quote, urlsplit

from botocore import handlers as botocore_handlers
from botocore import httpchecksum
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import MissingDependencyException, ReadTimeoutError, ResponseStreamingError
from botocore.response import StreamingBody
from botocore.retries import adaptive as adaptive_retries
from botocore.retries import standard as standard_retries
from zlib_ng import zlib_ng

LEAN_ENV = "FERRY_LEAN_REQUESTS"
# Client method -> operation sent on the lean path.
LEAN_OPERATIONS = {
    "head_object": "HeadObject",
    "get_object": "GetObject",
    "put_object": "PutObject",
    "copy_object": "CopyObject",
    "get_object_tagging": "GetObjectTagging",
    "list_objects_v2": "ListObjectsV2",
    "head_bucket": "HeadBucket",
    "delete_object": "DeleteObject",
}
# Answers botocore neither retries nor redirects: parsed here rather than sent twice.
FINAL_ERRORS = frozenset({304, 404, 412, 501})
# Error codes botocore retries whatever the status (standard and adaptive modes): never final.
RETRIED_CODES = frozenset(
    getattr(standard_retries.ThrottledRetryableChecker, "_THROTTLED_ERROR_CODES", [])
    + getattr(standard_retries.TransientRetryableChecker, "_TRANSIENT_ERROR_CODES", [])
)
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
# Not signed, as botocore does not sign them (SIGNED_HEADERS_BLACKLIST) or sets them later.
UNSIGNED_HEADERS = frozenset(
    {"user-agent", "x-amzn-trace-id", "expect", "transfer-encoding", "content-length"}
)
# Endpoint hosts this path does not speak to (they need other signing or routing).
FOREIGN_HOSTS = (
    "fips",
    "dualstack",
    "s3-accelerate",
    "s3express",
    "s3-accesspoint",
    "s3-object-lambda",
    "s3-outposts",
)
LEAN_USER_AGENT_MARK = "ferry-lean"
# botocore event prefixes whose client-made handlers this path replaces; later ones are called.
_HOOKED = ("provide-client-params", "before-parameter-build", "before-call", "after-call")


# Lambda sets the function's name for the life of the process, and a trace header per invocation.
_IN_LAMBDA = bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME"))


def lean_requests_enabled(environ: Any = None) -> bool:
    """On unless FERRY_LEAN_REQUESTS is 0/false/no/off (`--no-lean-requests` sets it)."""
    value = (environ if environ is not None else os.environ).get(LEAN_ENV, "1")
    return value.strip().lower() not in ("0", "false", "no", "off")


class Unsupported(Exception):
    """This request (or client) is sent by botocore: reason in the message."""


class _Fallback(Exception):
    """Send this request again through botocore (after the lean attempt got no clean answer)."""


# -- serialising from the service model ---------------------------------------------------


class _Operation:
    """One operation's model, turned once into tables: where each parameter goes."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.name = model.name
        self.method = model.http["method"]
        uri = model.http["requestUri"]
        self.query_suffix = uri.partition("?")[2]  # "tagging" (GetObjectTagging), "list-type=2"
        self.headers: dict[str, tuple[str, str]] = {}  # member -> (header name, type)
        self.query: dict[str, tuple[str, str]] = {}
        self.meta_prefix: tuple[str, str] | None = None  # (member, "x-amz-meta-")
        self.payload = model.input_shape.serialization.get("payload")
        for member, shape in model.input_shape.members.items():
            location = shape.serialization.get("location")
            name = shape.serialization.get("name", member)
            if location == "header":
                self.headers[member] = (name, shape.type_name)
            elif location == "querystring":
                self.query[member] = (name, shape.type_name)
            elif location == "headers":
                self.meta_prefix = (member, name)
        self.known = set(self.headers) | set(self.query) | {"Bucket", "Key"}
        if self.meta_prefix:
            self.known.add(self.meta_prefix[0])
        if self.payload and model.input_shape.members[self.payload].type_name == "blob":
            self.known.add(self.payload)
        output = model.output_shape
        self.out_headers: dict[str, tuple[str, str]] = {}  # lower header -> (member, type)
        self.out_meta: tuple[str, str] | None = None
        self.out_payload = output.serialization.get("payload") if output is not None else None
        self.output = output
        for member, shape in output.members.items() if output is not None else ():
            location = shape.serialization.get("location")
            name = shape.serialization.get("name", member)
            if location == "header":
                self.out_headers[name.lower()] = (member, shape.type_name)
            elif location == "headers":
                self.out_meta = (member, name.lower())
        self.has_expires = "expires" in self.out_headers


def _header_value(value: Any, type_name: str) -> str:
    if type_name == "string":
        if not isinstance(value, str):
            raise Unsupported("a non-string header value")
        return value
    if type_name == "boolean":
        return "true" if value else "false"
    if type_name in ("integer", "long"):
        return str(int(value))
    if type_name == "timestamp" and hasattr(value, "astimezone"):
        import datetime

        return format_datetime(value.astimezone(datetime.UTC), usegmt=True)
    raise Unsupported(f"a {type_name} header")


@functools.lru_cache(maxsize=8)
def _ssl_context(ca_path: str | None) -> ssl.SSLContext:
    """A verifying TLS context with the CA bundle (file or directory) botocore verifies with,
    made once per bundle and only when an https connection needs it: loading the bundle costs
    17 ms of CPU, a tenth of a plain-http run's start-up."""
    if ca_path is None:
        return ssl.create_default_context()
    if os.path.isdir(ca_path):
        return ssl.create_default_context(capath=ca_path)
    return ssl.create_default_context(cafile=ca_path)


def _quote(value: str, safe: str) -> str:
    return quote(value.encode("utf-8"), safe=safe)


# -- responses -------------------------------------------------------------------------------


class LeanBody(StreamingBody):
    """botocore's StreamingBody over an http.client response: reads are checked against
    Content-Length as botocore checks them; a timeout or broken connection raises botocore's
    own exceptions (the engine retries reading on those). A body closed before its end closes
    its connection (from whichever thread closes it): a connection with unread bytes in it
    cannot carry another request; the thread that owns it opens a new one next time."""

    def __init__(
        self,
        response: http.client.HTTPResponse,
        length: int,
        connection: http.client.HTTPConnection,
        url: str,
    ) -> None:
        super().__init__(response, length)
        self._response = response
        self._connection = connection
        self._url = url

    def read(self, amt: int | None = None) -> bytes:
        try:
            return super().read(amt)
        except TimeoutError as error:
            self._connection.close()
            raise ReadTimeoutError(endpoint_url=self._url, error=error) from error
        except (OSError, http.client.HTTPException) as error:
            self._connection.close()
            raise ResponseStreamingError(error=error) from error

    def close(self) -> None:
        if not self._response.isclosed():
            self._connection.close()
        self._response.close()


# The order botocore's GetObject model lists its response algorithms in (responseAlgorithms).
_RESPONSE_ALGORITHMS = ("crc64nvme", "crc32", "crc32c", "sha256", "sha1")


class _Crc32Checksum(httpchecksum.BaseChecksum):
    """botocore's CRC32 of a body, by zlib-ng rather than awscrt (ferry.engine.proofs.checksums says
    why: a twentieth of the speed, paid on every GET of an object uploaded with boto3's default)."""

    def __init__(self) -> None:
        self._int_crc32 = 0

    def update(self, chunk: bytes) -> None:
        self._int_crc32 = zlib_ng.crc32(chunk, self._int_crc32)

    def digest(self) -> bytes:
        return self._int_crc32.to_bytes(4, byteorder="big")


_CHECKSUM_CLS = {**httpchecksum._CHECKSUM_CLS, "crc32": _Crc32Checksum}


def _checked_body(body: Any, headers: dict[str, str]) -> Any:
    """The body checked against its x-amz-checksum-* header as it is read, as botocore's
    handle_checksum_body does with ChecksumMode=ENABLED: a damaged GET raises botocore's
    FlexibleChecksumError at its end, which the engine reads again (a part's composite
    "-N" value cannot be checked this way, as in botocore)."""
    for algorithm in _RESPONSE_ALGORITHMS:
        expected = headers.get(f"x-amz-checksum-{algorithm}")
        if not expected or "-" in expected:
            continue
        try:
            checksum = _CHECKSUM_CLS[algorithm]()
        except MissingDependencyException:  # CRC64NVME needs awscrt, as in botocore
            continue
        return httpchecksum.StreamingChecksumBody(body, headers.get("content-length"), checksum, expected)
    return body


@functools.lru_cache(maxsize=64)
def _members_by_xml_name(shape: Any) -> dict[str, tuple[str, Any]]:
    """A structure's members by the element name they arrive under (made once per shape)."""
    return {m.serialization.get("name", n): (n, m) for n, m in shape.members.items()}


def _xml_value(element: Any, shape: Any, parse_time: Callable[[Any], Any]) -> Any:
    """An element as botocore's rest-xml parser gives it, for the shapes these outputs use."""
    kind = shape.type_name
    if kind == "structure":
        out: dict[str, Any] = {}
        by_name = _members_by_xml_name(shape)
        for child in element:
            tag = child.tag.rpartition("}")[2]
            if tag in by_name:
                name, member = by_name[tag]
                if member.type_name == "list" and member.serialization.get("flattened"):
                    out.setdefault(name, []).append(_xml_value(child, member.member, parse_time))
                else:
                    out[name] = _xml_value(child, member, parse_time)
        return out
    if kind == "list":
        member = shape.member
        return [_xml_value(child, member, parse_time) for child in element]
    text = element.text or ""
    if kind == "timestamp":
        return parse_time(text)
    if kind in ("integer", "long"):
        return int(text)
    if kind == "boolean":
        return text == "true"
    return text


# -- answers -------------------------------------------------------------------------------------


class _Headers:
    """An answer's headers as http.client and this module read them, parsed without the email
    package: http.client hands header lines to email's FeedParser, which took a third of the
    lean path's CPU per request (content-type and multipart checks, a policy per header).
    `lower` maps each lower-case name to its value (repeats joined with ", ", as botocore
    joins them)."""

    __slots__ = ("_items", "lower")

    def __init__(self, lines: list[str]) -> None:
        items: list[tuple[str, str]] = []
        lower: dict[str, str] = {}
        for line in lines:
            if not line:
                break
            if line[0] in " \t" and items:  # an obsolete folded line continues the one before
                name, value = items[-1]
                items[-1] = (name, f"{value} {line.strip()}")
                key = name.lower()
                lower[key] = f"{lower[key]} {line.strip()}"
                continue
            name, sep, value = line.partition(":")
            if not sep:
                continue
            value = value.strip()
            items.append((name, value))
            key = name.lower()
            lower[key] = f"{lower[key]}, {value}" if key in lower else value
        self._items = items
        self.lower = lower

    def get(self, name: str, default: Any = None) -> Any:
        return self.lower.get(name.lower(), default)

    def get_all(self, name: str, failobj: Any = None) -> Any:
        key = name.lower()
        return [v for n, v in self._items if n.lower() == key] or failobj

    def items(self) -> list[tuple[str, str]]:
        return list(self._items)

    def keys(self) -> list[str]:
        return [n for n, _ in self._items]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self.lower

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())


def _buffered_head(fp: Any) -> list[str] | None:
    """The status line and header lines of an answer whose whole head is in the reader's
    buffer (one read from the socket brings an S3 answer's head, and usually its body), read
    in one piece instead of a readline per line; None when it is not all there yet."""
    buffered = fp.peek(1)  # at most one read from the socket
    end = buffered.find(b"\r\n\r\n")
    if end < 0:
        return None
    return fp.read(end + 4).decode("iso-8859-1").split("\r\n")[:-2]


def _status_line(line: str) -> tuple[str, int, str]:
    """(version, status, reason), refused as http.client refuses a malformed status line."""
    version, _, rest = line.partition(" ")
    code, _, reason = rest.strip().partition(" ")
    if not version.startswith("HTTP/") or not (len(code) == 3 and code.isdigit()) or code < "100":
        raise http.client.BadStatusLine(line)
    return version, int(code), reason


class _LeanResponse(http.client.HTTPResponse):
    """http.client's answer, its status line and headers read as `HTTPResponse.begin` reads
    them (the same framing rules: 1xx skipped, chunked, Content-Length, HEAD and 204/304 empty,
    Connection: close) but parsed by `_Headers`."""

    def begin(self) -> None:
        if self.headers is not None:
            return
        while True:
            lines = _buffered_head(self.fp)
            if lines is None:  # a head longer than one read brought: line by line, as http.client
                version, status, reason = self._read_status()  # type: ignore[attr-defined]
            else:
                version, status, reason = _status_line(lines[0])
            if status != http.client.CONTINUE:
                break
            if lines is None:
                http.client._read_headers(self.fp)  # type: ignore[attr-defined]
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        if lines is None:
            read = http.client._read_headers(self.fp)  # type: ignore[attr-defined]
            lines = [""] + [raw.decode("iso-8859-1").rstrip("\r\n") for raw in read]
        header_lines = lines[1:]
        headers = _Headers(header_lines)
        self.headers = self.msg = headers  # type: ignore[assignment]
        encoding = headers.lower.get("transfer-encoding")
        self.chunked = bool(encoding) and encoding.lower() == "chunked"  # type: ignore[union-attr]
        self.chunk_left = None
        self.will_close = self._check_close()  # type: ignore[attr-defined]
        self.length = None
        length = headers.lower.get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            else:
                if self.length < 0:
                    self.length = None
        if status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) or 100 <= status < 200:
            self.length = 0
        if self._method == "HEAD":  # type: ignore[attr-defined]
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True


def _round_trip(
    connection: http.client.HTTPConnection,
    method: str,
    path: str,
    headers: dict[str, str],
    data: bytes | None,
) -> _LeanResponse:
    """One request written in one piece on the connection's socket, and its answer's head.

    http.client writes a request header by header, checking each against two regular
    expressions (a tenth of the lean path's CPU per request): here the names and values,
    which this module made from the service model, are checked for what could break the
    framing (a colon or space in a name, a line break anywhere), and the head goes out with
    the body in one write. The answer is read as http.client reads it (`_LeanResponse`); one
    that will close its connection drops it, as http.client does.
    """
    lines = [f"{method} {path} HTTP/1.1"]
    for name, value in headers.items():
        if not name or ":" in name or name != name.strip() or "\n" in value or "\r" in value or "\n" in name:
            raise ValueError(f"a header http.client would refuse: {name!r}")
        lines.append(f"{name}: {value}")
    lines.append("\r\n")
    head = "\r\n".join(lines).encode("latin-1")
    sock = connection.sock
    if data and len(data) <= 1 << 20:
        sock.sendall(head + data)  # one write: a copy of a small body costs less than a second send
    else:
        sock.sendall(head)
        if data:
            sock.sendall(data)
    response = _LeanResponse(sock, method=method)
    try:
        response.begin()
    except BaseException:
        response.close()
        raise
    if response.will_close:
        connection.close()  # the answer keeps its own reference to the socket until it is read
    return response


# -- connections -------------------------------------------------------------------------------


class _Connections:
    """One keep-alive connection per thread and host, for one LeanClient."""

    def __init__(self, ca_path: str | None, connect_timeout: float, read_timeout: float) -> None:
        self._local = threading.local()
        self._ca_path = ca_path  # the TLS context is made on the first https connection only
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._all: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def get(self, scheme: str, host: str, port: int) -> http.client.HTTPConnection:
        pool = getattr(self._local, "pool", None)
        if pool is None:
            pool = self._local.pool = {}
        key = (scheme, host, port)
        connection = pool.get(key)
        if connection is None:
            if scheme == "https":
                connection = http.client.HTTPSConnection(
                    host, port, timeout=self._connect_timeout, context=_ssl_context(self._ca_path)
                )
            else:
                connection = http.client.HTTPConnection(host, port, timeout=self._connect_timeout)
            connection.response_class = _LeanResponse
            pool[key] = connection
            with self._lock:
                self._all.append(connection)
        if connection.sock is None:  # new, closed after a broken or abandoned answer, or by the server
            connection.connect()
            connection.sock.settimeout(self._read_timeout)
            connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        return connection

    def close(self) -> None:
        with self._lock:
            connections, self._all = self._all, []
        for connection in connections:
            connection.close()


# -- the client ---------------------------------------------------------------------------------


class _Target:
    """Where one bucket's requests go: resolved once by botocore's endpoint rules."""

    def __init__(self, url: str, region: str, proxied: bool) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or parts.query or parts.fragment:
            raise Unsupported(f"endpoint {url}")
        if any(word in (parts.hostname or "") for word in FOREIGN_HOSTS):
            raise Unsupported(f"endpoint {parts.hostname}")
        if proxied:
            raise Unsupported("a proxy is configured")
        self.scheme = parts.scheme
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        default = 443 if parts.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if self.port == default else f"{host}:{self.port}"
        self.base_path = parts.path.rstrip("/")
        self.region = region
        self.url_prefix = f"{parts.scheme}://{self.host_header}"


class LeanClient:
    """A botocore S3 client whose hot small-object requests take the lean path.

    Every other attribute (meta, exceptions, paginators, other operations) is the client's.
    """

    def __init__(
        self,
        client: Any,
        credentials: Any,
        *,
        timestamp_parser: Callable[[Any], Any],
        user_agent: str,
    ) -> None:
        self._client = client
        self._credentials = credentials
        self._parse_time = timestamp_parser
        self._user_agent = f"{user_agent} {LEAN_USER_AGENT_MARK}"
        config = client.meta.config
        self._region = client.meta.region_name
        http_session = client._endpoint.http_session  # botocore's own TLS and proxy settings
        verify = http_session._verify
        if verify is False or http_session._cert_file:
            raise Unsupported("TLS verification is off or a client certificate is configured")
        if credentials is None:
            raise Unsupported("no credentials")
        self._proxy_config = http_session._proxy_config
        ca_path = verify if isinstance(verify, str) else None
        self._connections = _Connections(ca_path, config.connect_timeout, config.read_timeout)
        self._operations = {
            op: _Operation(client.meta.service_model.operation_model(op)) for op in LEAN_OPERATIONS.values()
        }
        self._targets: dict[tuple[str, str], _Target | str] = {}  # a str: why not lean
        self._signing_key: tuple[tuple[str, str, str], bytes] | None = None
        emitter = client.meta.events._emitter  # the HierarchicalEmitter behind the aliaser
        self._emitter = emitter
        self._baseline = {
            name: list(emitter._handlers.prefix_search(name))
            for op in LEAN_OPERATIONS.values()
            for name in (f"{prefix}.s3.{op}" for prefix in (*_HOOKED, "needs-retry"))
        }
        self._hooked: dict[str, tuple[Any, list[Any]]] = {}
        self._reporters: dict[str, tuple[list[Any], list[Any]]] = {}
        self.sent = 0  # requests this path answered (fallbacks not included)
        self.fallbacks = 0  # requests sent again through botocore after a lean attempt

    # Everything that is not a lean operation is the botocore client's.
    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def head_object(self, **kwargs: Any) -> dict[str, Any]:
        return self._call("head_object", kwargs)

    def get_object(self, **kwargs: Any) -> dict[str, Any]:
        return self._call("get_object", kwargs)

    def put_object(self, **kwargs: Any) -> dict[str, Any]:
        return self._call("put_object", kwargs)

    def copy_object(self, **kwargs: Any) -> dict[str, Any]:
        return self._call("copy_object", kwargs)

    def get_object_tagging(self, **kwargs: Any) -> dict[str, Any]:
        return self._call("get_object_tagging", kwargs)

    def list_objects_v2(self, **kwargs: Any) -> dict[str, Any]:
        return self._call("list_objects_v2", kwargs)

    def head_bucket(self, **kwargs: Any) -> dict[str, Any]:
        return self._call("head_bucket", kwargs)

    def delete_object(self, **kwargs: Any) -> dict[str, Any]:
        return self._call("delete_object", kwargs)

    def close(self) -> None:
        self._connections.close()
        self._client.close()

    # -- events -------------------------------------------------------------------------------

    def _later_handlers(self, event: str) -> list[Any]:
        """Handlers registered on the client after it was made, in their order."""
        emitter = self._emitter
        handlers = emitter._lookup_cache.get(event)
        if handlers is None:
            handlers = emitter._handlers.prefix_search(event)
            emitter._lookup_cache[event] = handlers
        cached = self._hooked.get(event)
        if cached is not None and cached[0] is handlers:
            return cached[1]
        baseline = self._baseline.get(event, [])
        later = [h for h in handlers if not any(h is b for b in baseline)]
        self._hooked[event] = (handlers, later)
        return later

    @staticmethod
    def _call_handlers(handlers: Iterable[Any], event: str, until_response: bool, **kwargs: Any) -> Any:
        kwargs["event_name"] = event
        result = None
        for handler in handlers:
            response = handler(**kwargs)
            if response is not None:
                if until_response:
                    return response
                result = result if result is not None else response
        return result

    # -- one request --------------------------------------------------------------------------

    def _call(self, method: str, kwargs: dict[str, Any]) -> Any:
        op = self._operations[LEAN_OPERATIONS[method]]
        fallback = getattr(self._client, method)
        if _unsupported_params(op, kwargs):
            return fallback(**kwargs)
        body_start = _tell(kwargs.get("Body"))
        try:
            return self._send(op, kwargs)
        except (_Fallback, Unsupported):
            if body_start is not None:
                kwargs["Body"].seek(body_start)
            target = self._targets.get((op.name, kwargs["Bucket"]))
            if not isinstance(target, str):  # resolved again next time: botocore may have been redirected
                self._targets.pop((op.name, kwargs["Bucket"]), None)
            return fallback(**kwargs)

    def _send(self, op: _Operation, kwargs: dict[str, Any]) -> Any:
        model = op.model
        context: dict[str, Any] = {"client_region": self._region, "client_config": self._client.meta.config}
        params = dict(kwargs)
        event = f"provide-client-params.s3.{op.name}"
        later = self._later_handlers(event)
        if later:
            params = (
                self._call_handlers(later, event, False, params=params, model=model, context=context)
                or params
            )
        self._apply_builtin_handlers(op, params, context)
        event = f"before-parameter-build.s3.{op.name}"
        later = self._later_handlers(event)
        if later:
            self._call_handlers(later, event, False, params=params, model=model, context=context)
        target = self._target(op, params, context)
        request = self._serialise(op, params, target)
        request["context"] = context
        event = f"before-call.s3.{op.name}"
        later = self._later_handlers(event)
        if later:
            answered = self._call_handlers(
                later, event, True, model=model, params=request, request_signer=None, context=context
            )
            if answered is not None:
                http, parsed = answered
                return self._finish(op, http, parsed, context)
        status, headers, response, raw, connection = self._exchange(op, request, target)
        if response is not None and (op.out_payload != "Body" or not 200 <= status < 300):
            raw = self._read_whole(response, connection)
        if status in FINAL_ERRORS:
            parsed = self._parse_error(op, status, headers, raw if raw is not None else response.read())
            if parsed.get("Error", {}).get("Code") not in RETRIED_CODES:
                self._report(op, request, status, headers)
                http = AWSResponse(request["url"], status, headers, None)
                return self._finish(op, http, parsed, context)
            self.fallbacks += 1
            raise _Fallback(f"HTTP {status} {parsed['Error']['Code']}")
        if 200 <= status < 300:
            self._report(op, request, status, headers)
        else:
            if response is not None:
                response.read()
            self.fallbacks += 1
            raise _Fallback(f"HTTP {status}")
        parsed = self._parse(op, status, headers, response, raw, request["url"], connection)
        if op.name == "ListObjectsV2":
            botocore_handlers.decode_list_object_v2(parsed, context)
        if params.get("ChecksumMode") == "ENABLED" and "Body" in parsed:
            parsed["Body"] = _checked_body(parsed["Body"], headers)
        self.sent += 1
        event = f"after-call.s3.{op.name}"
        later = self._later_handlers(event)
        if later:
            http = AWSResponse(request["url"], status, headers, None)
            self._call_handlers(
                later, event, False, http_response=http, parsed=parsed, model=model, context=context
            )
        return parsed

    def _finish(self, op: _Operation, http: Any, parsed: dict[str, Any], context: dict[str, Any]) -> Any:
        """As botocore ends a call: after-call, then the parsed answer or its ClientError."""
        event = f"after-call.s3.{op.name}"
        later = self._later_handlers(event)
        if later:
            self._call_handlers(
                later, event, False, http_response=http, parsed=parsed, model=op.model, context=context
            )
        if http.status_code >= 300:
            code = parsed.get("Error", {}).get("Code")
            raise self._client.exceptions.from_code(code)(parsed, op.name)
        return parsed

    @staticmethod
    def _apply_builtin_handlers(op: _Operation, params: dict[str, Any], context: dict[str, Any]) -> None:
        """The parameter handlers botocore runs for these operations, called as they are."""
        botocore_handlers.validate_bucket_name(params)
        if op.name == "CopyObject":
            botocore_handlers.handle_copy_source_param(params)
            botocore_handlers.copy_source_sse_md5(params)
        if op.name in ("CopyObject", "PutObject"):
            botocore_handlers.validate_ascii_metadata(params)
        botocore_handlers.sse_md5(params)
        if op.name == "ListObjectsV2":  # keys any XML can carry, decoded after parsing
            botocore_handlers.set_list_objects_encoding_type_url(params, context)

    def _target(self, op: _Operation, params: dict[str, Any], context: dict[str, Any]) -> _Target:
        """The bucket's endpoint, resolved once; raises Unsupported (remembered) where this
        path does not go."""
        key = (op.name, params["Bucket"])
        target = self._targets.get(key)
        if target is None:
            try:
                target = self._resolve(op, params)
            except Unsupported as reason:
                target = str(reason)
            self._targets[key] = target
        if isinstance(target, str):
            raise Unsupported(target)
        return target

    def route(self, method: str, **params: Any) -> str:
        """ "lean" if this request would take the lean path, else why botocore sends it.
        Sends nothing (for tests and for debugging a configuration)."""
        op = self._operations.get(LEAN_OPERATIONS.get(method, ""))
        if op is None:
            return f"{method} is not sent on the lean path"
        reason = _unsupported_params(op, params)
        if reason:
            return reason
        try:
            self._target(op, params, {})
        except Unsupported as unsupported:
            return str(unsupported)
        return "lean"

    def _resolve(self, op: _Operation, params: dict[str, Any]) -> _Target:
        context = {"client_region": self._region, "client_config": self._client.meta.config}
        context["auth_type"] = op.model.resolved_auth_type
        url, headers, _ = self._client._resolve_endpoint_ruleset(op.model, params, context)
        signing = context.get("signing", {})
        if (
            headers
            or context.get("auth_type") not in ("v4", None)
            or signing.get("signing_name", "s3") != "s3"
        ):
            raise Unsupported(f"auth {context.get('auth_type')} for {params['Bucket']}")
        proxied = bool(self._proxy_config.proxy_url_for(url))
        return _Target(url, signing.get("region") or self._region, proxied)

    def _serialise(self, op: _Operation, params: dict[str, Any], target: _Target) -> dict[str, Any]:
        headers: dict[str, str] = {}
        for member, value in params.items():
            spec = op.headers.get(member)
            if spec is not None:
                if value is not None:
                    headers[spec[0]] = _header_value(value, spec[1])
            elif op.meta_prefix and member == op.meta_prefix[0]:
                for name, text in value.items():
                    headers[f"{op.meta_prefix[1]}{name}"] = text
        query: list[tuple[str, str]] = []
        for member, (name, type_name) in op.query.items():
            if member in params:
                if type_name not in ("string", "integer"):
                    raise Unsupported(f"a {type_name} query parameter")
                query.append((_quote(name, "-_.~"), _quote(str(params[member]), "-_.~")))
        key = params.get("Key")  # none for a bucket's operation (a listing)
        path = f"{target.base_path}/{_quote(key, '/~')}" if key is not None else (target.base_path or "/")
        query.sort()
        suffix = [op.query_suffix.partition("=")[::2]] if op.query_suffix else []
        canonical_query = "&".join(f"{k}={v}" for k, v in sorted(suffix + query))
        url_query = "&".join([op.query_suffix] * bool(op.query_suffix) + [f"{k}={v}" for k, v in query])
        body = params.get(op.payload) if op.payload else None
        return {
            "operation": op.name,
            "url_path": path,
            "query_string": url_query,
            "canonical_query": canonical_query,
            "method": op.method,
            "headers": headers,
            "body": body,
            "url": f"{target.url_prefix}{path}{'?' + url_query if url_query else ''}",
        }

    # -- signing and sending -----------------------------------------------------------------

    def _key(self, secret: str, day: str, region: str) -> bytes:
        cached = self._signing_key
        if cached is not None and cached[0] == (secret, day, region):
            return cached[1]
        key = hmac.digest(f"AWS4{secret}".encode(), day.encode(), "sha256")
        for part in (region, "s3", "aws4_request"):
            key = hmac.digest(key, part.encode(), "sha256")
        self._signing_key = ((secret, day, region), key)
        return key

    def _sign(self, request: dict[str, Any], target: _Target, payload_hash: str) -> dict[str, str]:
        credentials = self._credentials.get_frozen_credentials()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        headers = {k.lower(): v for k, v in request["headers"].items()}
        headers["host"] = target.host_header
        headers["x-amz-date"] = stamp
        headers["x-amz-content-sha256"] = payload_hash
        if credentials.token:
            headers["x-amz-security-token"] = credentials.token
        trace = os.environ.get("_X_AMZN_TRACE_ID") if _IN_LAMBDA else None
        if trace:
            headers.setdefault("x-amzn-trace-id", quote(trace, safe="-=;:+&[]{}\"',"))
        signed = sorted(name for name in headers if name not in UNSIGNED_HEADERS)
        canonical_headers = "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in signed)
        signed_names = ";".join(signed)
        canonical = (
            f"{request['method']}\n{request['url_path']}\n{request['canonical_query']}\n"
            f"{canonical_headers}\n{signed_names}\n{payload_hash}"
        )
        scope = f"{stamp[:8]}/{target.region}/s3/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        signature = hmac.new(
            self._key(credentials.secret_key, stamp[:8], target.region), to_sign.encode(), hashlib.sha256
        ).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={signed_names}, Signature={signature}"
        )
        headers["user-agent"] = self._user_agent
        return headers

    def _exchange(
        self, op: _Operation, request: dict[str, Any], target: _Target
    ) -> tuple[int, dict[str, str], Any, bytes | None, Any]:
        """Send one request: (status, lower-case headers, open response, body if a hook
        answered, connection)."""
        for value in request["headers"].values():
            if not value.isascii():
                raise Unsupported("a header that is not ASCII")
        data = _body_bytes(request["body"])
        if data is None:
            payload_hash = EMPTY_SHA256
        elif target.scheme == "https":
            payload_hash = UNSIGNED_PAYLOAD  # TLS protects the body, as botocore does over https
        else:
            payload_hash = hashlib.sha256(data).hexdigest()  # botocore signs the body over http
        headers = self._sign(request, target, payload_hash)
        if data is not None or op.method in ("PUT", "POST"):
            headers["content-length"] = str(len(data or b""))
        prepared = AWSPreparedRequest(request["method"], request["url"], headers, data, False)
        # The emitter itself, not the client's EventAliaser in front of it: S3's event names
        # have no alias, and renaming each event cost more than the handlers it reaches.
        answered = self._emitter.emit_until_response(f"before-send.s3.{op.name}", request=prepared)[1]
        if answered is not None:  # moto's in-process mock, or a test's hook
            status, out = answered.status_code, {k.lower(): v for k, v in answered.headers.items()}
            return status, out, None, answered.content, None
        target_path = request["url_path"] + (f"?{request['query_string']}" if request["query_string"] else "")
        connection = None
        try:
            connection = self._connections.get(target.scheme, target.host, target.port)
            response = _round_trip(connection, request["method"], target_path, headers, data)
        except (OSError, http.client.HTTPException, ValueError) as error:
            # ValueError: a header http.client refuses to send (botocore then raises its own error)
            if connection is not None:
                connection.close()
            self.fallbacks += 1
            raise _Fallback(f"connection: {error}") from error
        return response.status, dict(response.headers.lower), response, None, connection

    def _read_whole(self, response: Any, connection: Any) -> bytes:
        """A reply's whole body; a connection that breaks while it is read (the server may
        have acted: a CopyObject made, its answer lost) goes back through botocore, whose
        resend of Ferry's conditional requests is safe."""
        try:
            return response.read()
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            self.fallbacks += 1
            raise _Fallback(f"connection: {error}") from error

    def _report(self, op: _Operation, request: dict[str, Any], status: int, headers: dict[str, str]) -> None:
        """needs-retry for an answer nothing retries (2xx, 404, 412, 304, 501): the adaptive
        rate limiter measures the send rate from it and recovers after throttling. Other
        answers are not reported here: botocore reports its own resend of them.

        A clean 2xx goes only to the handlers it can change: the rate limiter and hooks added
        after the client was made. botocore's retry handler and region redirector return
        without effect on a 2xx (the retry quota is released on after-call, which this path
        does not take from botocore), and emitting to them cost 13 % of the CPU of copying
        small objects."""
        event = f"needs-retry.s3.{op.name}"
        handlers = self._success_reporters(event) if 200 <= status < 300 else None
        kwargs = {
            "response": (_StatusOnly(status, headers), {}),
            "endpoint": self._client._endpoint,
            "operation": op.model,
            "attempts": 1,
            "caught_exception": None,
            "request_dict": request,
        }
        if handlers is None:
            self._emitter.emit(event, **kwargs)
            return
        for handler in handlers:
            handler(event_name=event, **kwargs)

    def _success_reporters(self, event: str) -> list[Any]:
        """The needs-retry handlers a clean 2xx can change: the adaptive rate limiter's, then
        those registered after the client was made (tests, the Stubber), in their order."""
        later = self._later_handlers(event)
        cached = self._reporters.get(event)
        if cached is not None and cached[0] is later:
            return cached[1]
        handlers = self._emitter._lookup_cache.get(event) or self._emitter._handlers.prefix_search(event)
        limiters = [
            h
            for h in handlers
            if isinstance(getattr(h, "__self__", None), adaptive_retries.ClientRateLimiter)
        ]
        reporters = limiters + [h for h in later if not any(h is x for x in limiters)]
        self._reporters[event] = (later, reporters)
        return reporters

    # -- parsing ------------------------------------------------------------------------------

    def _parse_error(
        self, op: _Operation, status: int, headers: dict[str, str], body: bytes
    ) -> dict[str, Any]:
        """An error botocore would not retry, parsed by botocore's own parser."""
        from botocore.awsrequest import HeadersDict

        response = {
            "status_code": status,
            "headers": HeadersDict(headers),
            "body": body,
            "context": {"operation_name": op.name},
        }
        parsed: dict[str, Any] = self._client._response_parser.parse(response, op.output)
        parsed.setdefault("ResponseMetadata", {})["RetryAttempts"] = 0
        return parsed

    def _parse(
        self,
        op: _Operation,
        status: int,
        headers: dict[str, str],
        response: Any,
        raw: bytes | None,
        url: str,
        connection: Any,
    ) -> dict[str, Any]:
        parsed: dict[str, Any] = {
            "ResponseMetadata": {
                "RequestId": headers.get("x-amz-request-id", ""),
                "HostId": headers.get("x-amz-id-2", ""),
                "HTTPStatusCode": status,
                "HTTPHeaders": headers,
                "RetryAttempts": 0,
            }
        }
        table = op.out_headers
        meta = op.out_meta
        metadata: dict[str, str] = {}
        for name, value in headers.items():
            spec = table.get(name)
            if spec is not None:
                member, kind = spec
                if kind == "string":
                    parsed[member] = value
                elif kind in ("integer", "long"):
                    parsed[member] = int(value)
                elif kind == "boolean":
                    parsed[member] = value.lower() == "true"
                elif kind == "timestamp":
                    try:
                        parsed[member] = self._parse_time(value)
                    except (ValueError, TypeError, RuntimeError):
                        if member != "Expires":
                            raise
                else:
                    parsed[member] = value
            elif meta is not None and name.startswith(meta[1]):
                metadata[name[len(meta[1]) :]] = value
        if meta is not None:
            parsed[meta[0]] = metadata
        if op.has_expires and "expires" in headers:
            parsed["ExpiresString"] = headers["expires"]  # botocore's handle_expires_header
        if op.out_payload == "Body":
            if response is None:
                import io

                body: Any = StreamingBody(io.BytesIO(raw or b""), len(raw or b""))
            else:
                length = int(headers.get("content-length", "0"))
                body = LeanBody(response, length, connection, url)
            parsed["Body"] = body
            return parsed
        data = raw if raw is not None else response.read()
        if op.output is not None and any(
            m.serialization.get("location") is None for m in op.output.members.values()
        ):
            parsed.update(self._parse_xml(op, data))
        elif data:
            raise _Fallback("an unexpected body")
        return parsed

    def _parse_xml(self, op: _Operation, data: bytes) -> dict[str, Any]:
        """The XML body of a 200: anything but the expected root (an <Error> in a 200, which
        S3 sends when a copy fails after it started answering) goes back to botocore."""
        try:
            root = ElementTree.fromstring(data)
        except ElementTree.ParseError as error:
            self.fallbacks += 1
            raise _Fallback("a body that is not XML") from error
        tag = root.tag.rpartition("}")[2]
        if op.out_payload:
            shape = op.output.members[op.out_payload]
            expected = shape.serialization.get("name", op.out_payload)
            if tag != expected and tag != shape.name:
                self.fallbacks += 1
                raise _Fallback(f"a 200 answered <{tag}>")
            return {op.out_payload: _xml_value(root, shape, self._parse_time)}
        if tag == "Error":
            self.fallbacks += 1
            raise _Fallback("a 200 answered <Error>")
        return dict(_xml_value(root, op.output, self._parse_time))


class _StatusOnly:
    """What needs-retry handlers read from an http.client answer: its status."""

    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status_code = status
        self.headers = headers
        self.content = b""


def _unsupported_params(op: _Operation, params: dict[str, Any]) -> str | None:
    unknown = params.keys() - op.known
    if unknown:
        return f"parameters {sorted(unknown)} are sent by botocore"
    if str(params.get("Bucket", "")).startswith("arn:"):
        return "an access point or outpost ARN"
    if op.name == "PutObject" and "ChecksumAlgorithm" in params:
        algorithm = str(params["ChecksumAlgorithm"]).upper()
        if f"Checksum{algorithm}" not in params:
            return "botocore computes the checksum asked for"
    return None


def _tell(body: Any) -> int | None:
    try:
        return body.tell() if body is not None and hasattr(body, "seek") else None
    except (OSError, ValueError):
        return None


def _body_bytes(body: Any) -> bytes | None:
    """The request body as bytes (a file-like body is read from where it stands; rewound if
    the request goes to botocore)."""
    if body is None:
        return None
    if isinstance(body, bytes):
        return body
    if isinstance(body, bytearray | memoryview):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    if hasattr(body, "read"):
        start = body.tell()
        end = body.seek(0, 2)
        body.seek(start)
        return body.read(end - start) if end > start else b""
    raise Unsupported("a body of another type")


def make_lean(
    client: Any, credentials: Any, *, timestamp_parser: Callable[[Any], Any], user_agent: str
) -> Any:
    """The client with the lean path in front, or the client itself where the path cannot
    serve it (the reason is logged once at debug level)."""
    import logging

    try:
        return LeanClient(client, credentials, timestamp_parser=timestamp_parser, user_agent=user_agent)
    except (Unsupported, AttributeError) as reason:
        logging.getLogger(__name__).debug("lean requests off for this client: %s", reason)
        return client
