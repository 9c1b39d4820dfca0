"""An S3 endpoint of virtual objects: objects of any size, up to S3's 5 TiB and 10,000 parts,
whose bytes are made from a seed when read and never stored, so the engine's real request
path (botocore over HTTP, checkpoints, ListParts, CompleteMultipartUpload) runs at S3's
limits on a machine that could not hold them.

Run it as a process (`python virtual_s3.py --port N`): it has a GIL of its own, as a real
server has. What it keeps:
- an object is a list of segments (a content's seed, start, end), or bytes for small ones
  (Ferry's upload marks). A server-side part copy keeps the segment, not the bytes;
- a part's ETag is the MD5 of its bytes where those are small enough to hash (`REAL_MD5_LIMIT`,
  what a streamed copy reads and sends), else the MD5 of the content's seed and range: what
  S3 would compute cannot be computed for 5 TiB here, and the copy's proof only needs it to be
  the same for the same bytes in the same place, which it is;
- the multipart object's ETag is S3's: MD5 of the parts' MD5s, `-N`;
- S3's multipart rules: 1-10,000 parts, parts ascending and each but the last at least
  `--min-part-size` (S3's 5 MiB by default; a test of 10,000 parts streamed sets it lower, the
  bytes being simulated), the object at most 5 TiB, CopySourceIfMatch honoured.
It stores no checksums (as an older S3-compatible server) and ignores signatures.

A bucket keeps versions once PutBucketVersioning enables them (suspending is refused): every
write (PutObject, CopyObject, CompleteMultipartUpload, a virtual object) adds a version with an
id of its own, answered in x-amz-version-id; a DeleteObject without a VersionId adds a delete
marker, with one deletes that version outright. HEAD, GET, GetObjectTagging and a CopySource's
`?versionId=` read a given version; ListObjectVersions lists each key's versions newest first,
in pages (max-keys, key-marker and version-id-marker). A bucket that never enabled versioning
behaves as before: no version ids, a delete removes the object.

`GET /_virtual/log` returns every part request received; `POST /_virtual/object` makes a
virtual source object (JSON: bucket, key, seed, part_sizes; in a versioned bucket a new version,
its id answered as VersionId).
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import itertools
import json
import random
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

MiB = 1024 * 1024
TiB = 1024**4
MAX_PARTS = 10_000
MAX_OBJECT = 5 * TiB
MAX_COPY = 5 * 1024**3  # CopyObject's and UploadPartCopy's largest source range
NULL_VERSION = "null"  # the version id of an object written before versioning was enabled
REAL_MD5_LIMIT = 64 * MiB
_BLOCK_LEN = 1_048_573  # a prime: parts at power-of-two offsets do not repeat one another


@dataclass(frozen=True)
class Segment:
    seed: str  # the content these bytes are a range of
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


_blocks: dict[str, bytes] = {}


def _block(seed: str) -> bytes:
    if seed not in _blocks:
        _blocks[seed] = random.Random(seed).randbytes(_BLOCK_LEN)
    return _blocks[seed]


def content(segment: Segment, start: int, end: int) -> bytes:
    """Bytes [start, end) of the segment, as made from its seed."""
    block = _block(segment.seed)
    a, b = segment.start + start, segment.start + end
    out = bytearray()
    while a < b:
        offset = a % _BLOCK_LEN
        take = min(b - a, _BLOCK_LEN - offset)
        out += block[offset : offset + take]
        a += take
    return bytes(out)


def segment_md5(segment: Segment) -> bytes:
    if segment.size <= REAL_MD5_LIMIT:
        return hashlib.md5(content(segment, 0, segment.size)).digest()
    return hashlib.md5(f"{segment.seed}:{segment.start}:{segment.end}".encode()).digest()


@dataclass
class Part:
    segments: list[Segment | bytes]
    md5: bytes

    def __post_init__(self) -> None:
        self.size = sum(s.size if isinstance(s, Segment) else len(s) for s in self.segments)


def _piece_size(piece: Segment | bytes) -> int:
    return piece.size if isinstance(piece, Segment) else len(piece)


@dataclass
class Obj:
    parts: list[Part]  # one part for an object written whole
    etag: str
    multipart: bool
    modified: float = field(default_factory=time.time)
    version_id: str = NULL_VERSION

    def __post_init__(self) -> None:
        self.starts = list(itertools.accumulate((p.size for p in self.parts), initial=0))
        self.size = self.starts[-1]

    def pieces(self, start: int, end: int) -> Iterator[tuple[Segment | bytes, int, int]]:
        """The stored pieces that bytes [start, end) cover, each with the range of it wanted."""
        first = max(0, bisect.bisect_right(self.starts, start) - 1)
        for index in range(first, len(self.parts)):
            offset = self.starts[index]
            if offset >= end:
                return
            for piece in self.parts[index].segments:
                size = _piece_size(piece)
                a, b = max(start, offset), min(end, offset + size)
                if a < b:
                    yield piece, a - offset, b - offset
                offset += size

    def read(self, start: int, end: int) -> bytes:
        out = bytearray()
        for piece, a, b in self.pieces(start, end):
            out += content(piece, a, b) if isinstance(piece, Segment) else piece[a:b]
        return bytes(out)

    def slice(self, start: int, end: int) -> list[Segment | bytes]:
        """The pieces of bytes [start, end), kept as segments (never read)."""
        return [
            Segment(piece.seed, piece.start + a, piece.start + b)
            if isinstance(piece, Segment)
            else piece[a:b]
            for piece, a, b in self.pieces(start, end)
        ]


@dataclass
class DeleteMarker:
    """A versioned bucket's delete marker: a version without bytes that hides its key."""

    version_id: str
    modified: float = field(default_factory=time.time)


Entry = Obj | DeleteMarker


@dataclass
class Upload:
    bucket: str
    key: str
    upload_id: str
    initiated: float
    parts: dict[int, Part] = field(default_factory=dict)


def pieces_md5(pieces: list[Segment | bytes]) -> bytes:
    if len(pieces) == 1 and isinstance(pieces[0], Segment):
        return segment_md5(pieces[0])
    digest = hashlib.md5()
    for piece in pieces:
        if isinstance(piece, Segment):
            if piece.size > REAL_MD5_LIMIT:
                digest.update(segment_md5(piece))
            else:
                digest.update(content(piece, 0, piece.size))
        else:
            digest.update(piece)
    return digest.digest()


def multipart_etag(parts: list[Part]) -> str:
    return hashlib.md5(b"".join(p.md5 for p in parts)).hexdigest() + f"-{len(parts)}"


class State:
    def __init__(self, min_part_size: int) -> None:
        self.lock = threading.Lock()
        self.min_part_size = min_part_size
        self.buckets: dict[str, dict[str, Obj]] = {}
        self.uploads: dict[str, Upload] = {}
        self.log: list[dict[str, Any]] = []
        # Buckets that enabled versioning: each key's versions and delete markers, oldest
        # first. `buckets` keeps each key's current object (none under a delete marker).
        self.histories: dict[str, dict[str, list[Entry]]] = {}

    def make_virtual(self, bucket: str, key: str, seed: str, part_sizes: list[int]) -> Obj:
        parts, offset = [], 0
        for size in part_sizes:
            segment = Segment(seed, offset, offset + size)
            parts.append(Part([segment], segment_md5(segment)))
            offset += size
        self.buckets.setdefault(bucket, {})
        return self.store(bucket, key, Obj(parts, multipart_etag(parts), multipart=True))

    # -- versions (the caller holds the lock) --------------------------------------------------

    def versioned(self, bucket: str) -> bool:
        return bucket in self.histories

    def enable_versioning(self, bucket: str) -> None:
        """The objects already there become each key's `null` version."""
        if not self.versioned(bucket):
            self.histories[bucket] = {key: [obj] for key, obj in self.buckets[bucket].items()}

    def store(self, bucket: str, key: str, obj: Obj) -> Obj:
        """Write the key's current object: a new version in a versioned bucket, else in place."""
        if self.versioned(bucket):
            obj.version_id = _new_version_id()
            self.histories[bucket].setdefault(key, []).append(obj)
        self.buckets[bucket][key] = obj
        return obj

    def add_delete_marker(self, bucket: str, key: str) -> DeleteMarker:
        marker = DeleteMarker(_new_version_id())
        self.histories[bucket].setdefault(key, []).append(marker)
        self.buckets[bucket].pop(key, None)
        return marker

    def delete_version(self, bucket: str, key: str, version_id: str) -> Entry | None:
        """Remove one version outright (no marker); the newest left, if an object, is current."""
        history = self.histories[bucket].get(key, [])
        gone = next((e for e in history if e.version_id == version_id), None)
        if gone is None:
            return None
        history.remove(gone)
        if history and isinstance(history[-1], Obj):
            self.buckets[bucket][key] = history[-1]
        else:
            self.buckets[bucket].pop(key, None)
            if not history:
                del self.histories[bucket][key]
        return gone

    def version(self, bucket: str, key: str, version_id: str) -> Obj:
        """One version of a key in a versioned bucket, as GET and HEAD answer for it."""
        entry = next((e for e in self.histories[bucket].get(key, []) if e.version_id == version_id), None)
        if entry is None:
            raise S3Error(404, "NoSuchVersion", "The specified version does not exist.")
        if isinstance(entry, DeleteMarker):
            raise S3Error(
                405, "MethodNotAllowed", "The specified method is not allowed against this resource."
            )
        return entry


def _new_version_id() -> str:
    return uuid.uuid4().hex


class S3Error(Exception):
    def __init__(self, status: int, code: str, message: str = "") -> None:
        super().__init__(message or code)
        self.status, self.code, self.message = status, code, message or code


_RANGE = re.compile(r"bytes=(\d+)-(\d*)")


def _http_date(ts: float) -> str:
    return formatdate(ts, usegmt=True)


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(ts))


def _xml(root: str, body: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<{root} xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"{body}</{root}>"
    ).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body are two writes: with Nagle's algorithm on, the body waits for the
    # client's delayed ACK of the headers (40 ms on Linux), and a test of 10,000 parts waits
    # on that instead of working.
    disable_nagle_algorithm = True
    state: State

    def log_message(self, *args: Any) -> None:
        pass

    # -- plumbing ------------------------------------------------------------------------------

    def _route(self) -> tuple[str, str, dict[str, list[str]]]:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        path = unquote(parts.path).lstrip("/")
        bucket, _, key = path.partition("/")
        return bucket, key, query

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if "aws-chunked" in (self.headers.get("Content-Encoding") or ""):
            return _unchunk(raw)
        return raw

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _error(self, error: S3Error) -> None:
        body = b"" if self.command == "HEAD" else _xml_error(error)
        self._send(error.status, body, {"Content-Type": "application/xml"})

    def _dispatch(self) -> None:
        try:
            self._body_cache = self._body() if self.command in ("PUT", "POST") else b""
            bucket, key, query = self._route()
            if bucket == "_virtual":
                self._virtual(key)
                return
            getattr(self, f"_{self.command.lower()}")(bucket, key, query)
        except S3Error as error:
            self._error(error)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _dispatch  # noqa: N815

    # -- test control --------------------------------------------------------------------------

    def _virtual(self, what: str) -> None:
        if what == "log":
            with self.state.lock:
                body = json.dumps(self.state.log).encode()
            self._send(200, body, {"Content-Type": "application/json"})
        elif what == "object":
            spec = json.loads(self._body_cache)
            with self.state.lock:
                obj = self.state.make_virtual(spec["bucket"], spec["key"], spec["seed"], spec["part_sizes"])
                version = {"VersionId": obj.version_id} if self.state.versioned(spec["bucket"]) else {}
            self._send(200, json.dumps({"ETag": obj.etag, "Size": obj.size, **version}).encode())
        else:
            raise S3Error(404, "NoSuchKey")

    # -- objects -------------------------------------------------------------------------------

    def _bucket(self, bucket: str) -> dict[str, Obj]:
        if bucket not in self.state.buckets:
            raise S3Error(404, "NoSuchBucket", f"The specified bucket does not exist: {bucket}")
        return self.state.buckets[bucket]

    def _object(self, bucket: str, key: str, version_id: str | None = None) -> Obj:
        """The key's current object, or in a versioned bucket the version asked for (a bucket
        without versions ignores a version id, as it always did here)."""
        objects = self._bucket(bucket)
        if version_id is not None and self.state.versioned(bucket):
            return self.state.version(bucket, key, version_id)
        obj = objects.get(key)
        if obj is None:
            raise S3Error(404, "NoSuchKey", "The specified key does not exist.")
        return obj

    def _version_headers(self, bucket: str, entry: Entry) -> dict[str, str]:
        """x-amz-version-id where the bucket keeps versions; nothing where it never did."""
        if not self.state.versioned(bucket):
            return {}
        headers = {"x-amz-version-id": entry.version_id}
        if isinstance(entry, DeleteMarker):
            headers["x-amz-delete-marker"] = "true"
        return headers

    def _object_headers(
        self, bucket: str, obj: Obj, query: dict[str, list[str]]
    ) -> tuple[dict[str, str], int, int]:
        start, end = 0, obj.size
        headers = {
            "ETag": f'"{obj.etag}"',
            "Last-Modified": _http_date(obj.modified),
            "Accept-Ranges": "bytes",
            "Content-Type": "binary/octet-stream",
            **self._version_headers(bucket, obj),
        }
        if obj.multipart:
            headers["x-amz-mp-parts-count"] = str(len(obj.parts))
        if "partNumber" in query:
            number = int(query["partNumber"][0])
            if not 1 <= number <= len(obj.parts):
                raise S3Error(416, "InvalidPartNumber", "The requested partnumber is not satisfiable")
            start, end = obj.starts[number - 1], obj.starts[number]
        elif self.headers.get("Range"):
            match = _RANGE.match(self.headers["Range"])
            if not match:
                raise S3Error(416, "InvalidRange")
            start = int(match.group(1))
            end = min(obj.size, int(match.group(2)) + 1) if match.group(2) else obj.size
            if start >= obj.size:
                raise S3Error(416, "InvalidRange", "The requested range is not satisfiable")
        if (start, end) != (0, obj.size):
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{obj.size}"
        headers["Content-Length"] = str(end - start)
        return headers, start, end

    def _head(self, bucket: str, key: str, query: dict[str, list[str]]) -> None:
        with self.state.lock:
            if not key:
                self._bucket(bucket)
                self._send(200)
                return
            obj = self._object(bucket, key, _version_asked(query))
        headers, start, end = self._object_headers(bucket, obj, query)
        partial = (start, end) != (0, obj.size)
        self._send(206 if partial else 200, b"", headers)

    def _get(self, bucket: str, key: str, query: dict[str, list[str]]) -> None:
        if not key:
            self._get_bucket(bucket, query)
            return
        if "uploadId" in query:
            self._list_parts(bucket, key, query)
            return
        if "tagging" in query:
            with self.state.lock:
                self._object(bucket, key, _version_asked(query))
            self._send(200, _xml("Tagging", "<TagSet></TagSet>"), {"Content-Type": "application/xml"})
            return
        if "attributes" in query:
            raise S3Error(501, "NotImplemented", "GetObjectAttributes is not implemented")
        with self.state.lock:
            obj = self._object(bucket, key, _version_asked(query))
        headers, start, end = self._object_headers(bucket, obj, query)
        body = obj.read(start, end)
        self._send(206 if "Content-Range" in headers else 200, body, headers)

    def _put(self, bucket: str, key: str, query: dict[str, list[str]]) -> None:
        if not key and "versioning" in query:
            self._put_versioning(bucket)
            return
        if not key:
            with self.state.lock:
                self.state.buckets.setdefault(bucket, {})
            self._send(200)
            return
        if "uploadId" in query:
            self._upload_part(bucket, key, query)
            return
        if "tagging" in query:
            self._send(200)
            return
        if self.headers.get("x-amz-copy-source"):
            self._copy_object(bucket, key)
            return
        body = self._body_cache
        with self.state.lock:
            self._bucket(bucket)
            md5 = hashlib.md5(body).digest()
            obj = self.state.store(bucket, key, Obj([Part([body], md5)], md5.hex(), multipart=False))
            headers = self._version_headers(bucket, obj)
        self._send(200, b"", {"ETag": f'"{md5.hex()}"', **headers})

    def _put_versioning(self, bucket: str) -> None:
        """PutBucketVersioning: Enabled only (nothing here needs a suspended bucket)."""
        status = re.search(r"<Status>(\w+)</Status>", self._body_cache.decode())
        if status is None or status.group(1) != "Enabled":
            raise S3Error(501, "NotImplemented", "only enabling versioning is implemented here")
        with self.state.lock:
            self._bucket(bucket)
            self.state.enable_versioning(bucket)
        self._send(200)

    def _copy_object(self, bucket: str, key: str) -> None:
        """CopyObject of a whole source (up to 5 GiB) as one part: the copy is not multipart,
        so its ETag is its bytes' MD5 (see `pieces_md5` for a large one's)."""
        source = self.headers["x-amz-copy-source"]
        pieces, source_version = self._copied_range(source)
        md5 = pieces_md5(pieces)
        with self.state.lock:
            self._bucket(bucket)
            obj = self.state.store(bucket, key, Obj([Part(pieces, md5)], md5.hex(), multipart=False))
            headers = {**self._version_headers(bucket, obj), **source_version}
        body = f"<ETag>&quot;{obj.etag}&quot;</ETag><LastModified>{_iso(obj.modified)}</LastModified>"
        self._send(200, _xml("CopyObjectResult", body), {"Content-Type": "application/xml", **headers})

    def _delete(self, bucket: str, key: str, query: dict[str, list[str]]) -> None:
        headers: dict[str, str] = {}
        with self.state.lock:
            if "uploadId" in query:
                upload = self.state.uploads.pop(query["uploadId"][0], None)
                if upload is None:
                    raise S3Error(404, "NoSuchUpload", "The specified upload does not exist.")
            elif self.state.versioned(bucket):
                headers = self._delete_in_versioned(bucket, key, _version_asked(query))
            else:
                self._bucket(bucket).pop(key, None)
        self._send(204, b"", headers)

    def _delete_in_versioned(self, bucket: str, key: str, version_id: str | None) -> dict[str, str]:
        """Without a version id a delete marker on top; with one, that version gone for good."""
        if version_id is None:
            return self._version_headers(bucket, self.state.add_delete_marker(bucket, key))
        gone = self.state.delete_version(bucket, key, version_id)
        return self._version_headers(bucket, gone) if gone else {"x-amz-version-id": version_id}

    def _post(self, bucket: str, key: str, query: dict[str, list[str]]) -> None:
        if "uploads" in query:
            with self.state.lock:
                self._bucket(bucket)
                upload = Upload(bucket, key, uuid.uuid4().hex, time.time())
                self.state.uploads[upload.upload_id] = upload
            body = f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(key)}</Key><UploadId>{upload.upload_id}</UploadId>"
            self._send(200, _xml("InitiateMultipartUploadResult", body), {"Content-Type": "application/xml"})
            return
        if "uploadId" in query:
            self._complete(bucket, key, query["uploadId"][0])
            return
        raise S3Error(501, "NotImplemented")

    # -- multipart -----------------------------------------------------------------------------

    def _upload(self, upload_id: str, bucket: str, key: str) -> Upload:
        upload = self.state.uploads.get(upload_id)
        if upload is None or (upload.bucket, upload.key) != (bucket, key):
            raise S3Error(404, "NoSuchUpload", "The specified upload does not exist.")
        return upload

    def _upload_part(self, bucket: str, key: str, query: dict[str, list[str]]) -> None:
        number = int(query["partNumber"][0])
        if not 1 <= number <= MAX_PARTS:
            raise S3Error(400, "InvalidArgument", "Part number must be an integer between 1 and 10000")
        source = self.headers.get("x-amz-copy-source")
        with self.state.lock:
            upload = self._upload(query["uploadId"][0], bucket, key)
            operation = "UploadPartCopy" if source else "UploadPart"
            self.state.log.append({"op": operation, "upload": upload.upload_id, "part": number})
        pieces, source_version = self._copied_range(source) if source else ([self._body_cache], {})
        part = Part(pieces, pieces_md5(pieces))
        with self.state.lock:
            upload = self._upload(query["uploadId"][0], bucket, key)
            upload.parts[number] = part
        etag = f'"{part.md5.hex()}"'
        if source:
            body = f"<ETag>{escape(etag)}</ETag><LastModified>{_iso(time.time())}</LastModified>"
            self._send(
                200, _xml("CopyPartResult", body), {"Content-Type": "application/xml", **source_version}
            )
        else:
            self._send(200, b"", {"ETag": etag})

    def _copied_range(self, source: str) -> tuple[list[Segment | bytes], dict[str, str]]:
        """The pieces a copy reads (`bucket/key[?versionId=...]`, the range header if any),
        with the x-amz-copy-source-version-id header to answer where the source is versioned."""
        path, _, query = source.partition("?")
        src_bucket, _, src_key = unquote(path).lstrip("/").partition("/")
        with self.state.lock:
            obj = self._object(src_bucket, src_key, _version_asked(parse_qs(query)))
            source_version = (
                {"x-amz-copy-source-version-id": obj.version_id} if self.state.versioned(src_bucket) else {}
            )
        wanted = self.headers.get("x-amz-copy-source-if-match")
        if wanted and wanted.strip('"') != obj.etag:
            raise S3Error(
                412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold"
            )
        start, end = 0, obj.size
        if self.headers.get("x-amz-copy-source-range"):
            match = _RANGE.match(self.headers["x-amz-copy-source-range"])
            if not match or not match.group(2):
                raise S3Error(
                    400,
                    "InvalidArgument",
                    "The x-amz-copy-source-range value must be of the form bytes=first-last",
                )
            start, end = int(match.group(1)), int(match.group(2)) + 1
            if end > obj.size:
                raise S3Error(400, "InvalidRange", "The requested range is not satisfiable")
        if end - start > MAX_COPY:
            raise S3Error(400, "InvalidRequest", "The specified copy source is larger than 5 GB")
        return obj.slice(start, end), source_version

    def _list_parts(self, bucket: str, key: str, query: dict[str, list[str]]) -> None:
        marker = int((query.get("part-number-marker") or ["0"])[0] or 0)
        limit = min(1000, int((query.get("max-parts") or ["1000"])[0]))
        with self.state.lock:
            upload = self._upload(query["uploadId"][0], bucket, key)
            numbers = sorted(n for n in upload.parts if n > marker)
            page = [(n, upload.parts[n]) for n in numbers[:limit]]
        truncated = len(numbers) > limit
        body = [
            f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(key)}</Key><UploadId>{upload.upload_id}</UploadId>"
        ]
        body.append(f"<PartNumberMarker>{marker}</PartNumberMarker><MaxParts>{limit}</MaxParts>")
        if page:
            body.append(f"<NextPartNumberMarker>{page[-1][0]}</NextPartNumberMarker>")
        body.append(f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>")
        for number, part in page:
            body.append(
                f"<Part><PartNumber>{number}</PartNumber><LastModified>{_iso(upload.initiated)}</LastModified>"
                f"<ETag>&quot;{part.md5.hex()}&quot;</ETag><Size>{part.size}</Size></Part>"
            )
        self._send(200, _xml("ListPartsResult", "".join(body)), {"Content-Type": "application/xml"})

    def _complete(self, bucket: str, key: str, upload_id: str) -> None:
        listed = [
            (int(n), e.strip('"').replace("&quot;", ""))
            for n, e in re.findall(
                r"<PartNumber>(\d+)</PartNumber>\s*<ETag>(.*?)</ETag>", self._body_cache.decode()
            )
        ]
        with self.state.lock:
            upload = self._upload(upload_id, bucket, key)
            if not listed:
                raise S3Error(400, "MalformedXML", "The XML you provided was not well-formed")
            if len(listed) > MAX_PARTS:
                raise S3Error(400, "InvalidArgument", "Part number must be an integer between 1 and 10000")
            numbers = [n for n, _ in listed]
            if numbers != sorted(set(numbers)):
                raise S3Error(400, "InvalidPartOrder", "The list of parts was not in ascending order.")
            parts = []
            for number, etag in listed:
                part = upload.parts.get(number)
                if part is None or part.md5.hex() != etag:
                    raise S3Error(
                        400, "InvalidPart", f"One or more of the specified parts could not be found: {number}"
                    )
                parts.append(part)
            if any(p.size < self.state.min_part_size for p in parts[:-1]):
                raise S3Error(
                    400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size"
                )
            obj = Obj(parts, multipart_etag(parts), multipart=True)
            if obj.size > MAX_OBJECT:
                raise S3Error(400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size")
            self._bucket(bucket)
            self.state.store(bucket, key, obj)
            del self.state.uploads[upload_id]
            headers = self._version_headers(bucket, obj)
        body = f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(key)}</Key><ETag>&quot;{obj.etag}&quot;</ETag>"
        self._send(
            200, _xml("CompleteMultipartUploadResult", body), {"Content-Type": "application/xml", **headers}
        )

    # -- listings ------------------------------------------------------------------------------

    def _get_bucket(self, bucket: str, query: dict[str, list[str]]) -> None:
        if "uploads" in query:
            self._list_uploads(bucket, query)
        elif "versions" in query:
            self._list_versions(bucket, query)
        elif "versioning" in query:
            with self.state.lock:
                self._bucket(bucket)
                status = "<Status>Enabled</Status>" if self.state.versioned(bucket) else ""
            self._send(200, _xml("VersioningConfiguration", status), {"Content-Type": "application/xml"})
        elif "location" in query:
            self._send(200, _xml("LocationConstraint", ""), {"Content-Type": "application/xml"})
        else:
            self._list_objects(bucket, query)

    def _list_uploads(self, bucket: str, query: dict[str, list[str]]) -> None:
        prefix = (query.get("prefix") or [""])[0]
        with self.state.lock:
            self._bucket(bucket)
            found = sorted(
                (u.key, u.initiated, u.upload_id)
                for u in self.state.uploads.values()
                if u.bucket == bucket and u.key.startswith(prefix)
            )
        body = [
            f"<Bucket>{escape(bucket)}</Bucket><Prefix>{escape(prefix)}</Prefix><IsTruncated>false</IsTruncated>"
        ]
        for key, initiated, upload_id in found:
            body.append(
                f"<Upload><Key>{escape(key)}</Key><UploadId>{upload_id}</UploadId>"
                f"<Initiated>{_iso(initiated)}</Initiated><StorageClass>STANDARD</StorageClass></Upload>"
            )
        self._send(
            200, _xml("ListMultipartUploadsResult", "".join(body)), {"Content-Type": "application/xml"}
        )

    def _list_objects(self, bucket: str, query: dict[str, list[str]]) -> None:
        prefix = (query.get("prefix") or [""])[0]
        after = (query.get("continuation-token") or query.get("start-after") or [""])[0]
        limit = min(1000, int((query.get("max-keys") or ["1000"])[0]))
        with self.state.lock:
            objects = self._bucket(bucket)
            keys = sorted(k for k in objects if k.startswith(prefix) and k > after)
            page = [(k, objects[k]) for k in keys[:limit]]
        truncated = len(keys) > limit
        body = [
            f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix><KeyCount>{len(page)}</KeyCount>"
        ]
        body.append(
            f"<MaxKeys>{limit}</MaxKeys><IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"
        )
        if truncated:
            body.append(f"<NextContinuationToken>{escape(page[-1][0])}</NextContinuationToken>")
        for key, obj in page:
            body.append(
                f"<Contents><Key>{escape(key)}</Key><LastModified>{_iso(obj.modified)}</LastModified>"
                f"<ETag>&quot;{obj.etag}&quot;</ETag><Size>{obj.size}</Size>"
                "<StorageClass>STANDARD</StorageClass></Contents>"
            )
        self._send(200, _xml("ListBucketResult", "".join(body)), {"Content-Type": "application/xml"})

    def _list_versions(self, bucket: str, query: dict[str, list[str]]) -> None:
        """ListObjectVersions: keys in order, each key's versions newest first, a page from
        just after (key-marker, version-id-marker); a bucket without versions lists its
        objects as `null` versions."""
        prefix = (query.get("prefix") or [""])[0]
        key_marker = (query.get("key-marker") or [""])[0]
        version_marker = (query.get("version-id-marker") or [""])[0]
        limit = min(1000, int((query.get("max-keys") or ["1000"])[0]))
        with self.state.lock:
            entries = self._versions_after(bucket, prefix, key_marker, version_marker)
        page, truncated = entries[:limit], len(entries) > limit
        body = [
            f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix>"
            f"<KeyMarker>{escape(key_marker)}</KeyMarker><VersionIdMarker>{escape(version_marker)}</VersionIdMarker>"
            f"<MaxKeys>{limit}</MaxKeys><IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"
        ]
        if truncated:
            key, entry, _ = page[-1]
            body.append(
                f"<NextKeyMarker>{escape(key)}</NextKeyMarker>"
                f"<NextVersionIdMarker>{entry.version_id}</NextVersionIdMarker>"
            )
        body.extend(_version_element(key, entry, latest) for key, entry, latest in page)
        self._send(200, _xml("ListVersionsResult", "".join(body)), {"Content-Type": "application/xml"})

    def _versions_after(
        self, bucket: str, prefix: str, key_marker: str, version_marker: str
    ) -> list[tuple[str, Entry, bool]]:
        """(key, version, is latest) in listing order, from just after the markers: after the
        key-marker's last version, or with a version-id-marker after that one version."""
        objects = self._bucket(bucket)
        histories = self.state.histories.get(bucket) or {k: [o] for k, o in objects.items()}
        listed = [
            (key, entry, index == 0)
            for key in sorted(k for k in histories if k.startswith(prefix))
            for index, entry in enumerate(reversed(histories[key]))
        ]
        if not key_marker:
            return listed
        if version_marker:
            position = next(
                (
                    i
                    for i, (k, e, _) in enumerate(listed)
                    if (k, e.version_id) == (key_marker, version_marker)
                ),
                None,
            )
            if position is None:
                raise S3Error(400, "InvalidArgument", "Invalid version id specified")
            return listed[position + 1 :]
        return [item for item in listed if item[0] > key_marker]


def _version_asked(query: dict[str, list[str]]) -> str | None:
    return (query.get("versionId") or [None])[0]


def _version_element(key: str, entry: Entry, latest: bool) -> str:
    common = (
        f"<Key>{escape(key)}</Key><VersionId>{entry.version_id}</VersionId>"
        f"<IsLatest>{'true' if latest else 'false'}</IsLatest><LastModified>{_iso(entry.modified)}</LastModified>"
    )
    if isinstance(entry, DeleteMarker):
        return f"<DeleteMarker>{common}</DeleteMarker>"
    return (
        f"<Version>{common}<ETag>&quot;{entry.etag}&quot;</ETag><Size>{entry.size}</Size>"
        "<StorageClass>STANDARD</StorageClass></Version>"
    )


def _unchunk(raw: bytes) -> bytes:
    """The payload of an aws-chunked body (chunk sizes in hex, optional signatures and trailer)."""
    out = bytearray()
    position = 0
    while True:
        line_end = raw.index(b"\r\n", position)
        size = int(raw[position:line_end].split(b";")[0], 16)
        position = line_end + 2
        if size == 0:
            return bytes(out)
        out += raw[position : position + size]
        position += size + 2


def _xml_error(error: S3Error) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{error.code}</Code>'
        f"<Message>{escape(error.message)}</Message></Error>"
    ).encode()


def serve(port: int, min_part_size: int) -> None:
    Handler.state = State(min_part_size)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"listening on {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--min-part-size", type=int, default=5 * MiB)
    arguments = parser.parse_args()
    serve(arguments.port, arguments.min_part_size)
