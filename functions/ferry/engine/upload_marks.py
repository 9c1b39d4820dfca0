"""Upload marks: how Ferry knows, with no local state, which multipart uploads are its own.

Right after CreateMultipartUpload Ferry writes a small JSON object into the DESTINATION
bucket at `<marks_prefix><sha256(dest_key)[:32]>/<sha256(upload_id)[:32]>.json` naming the
upload, its source and its part plan; after CompleteMultipartUpload or AbortMultipartUpload
it deletes it. A process killed in between (SIGKILL, a Lambda timeout, a lost machine)
leaves the upload and its mark behind, so a later run can find the upload again
(ListMultipartUploads, then ListParts) and resume it, and `ferry clean-uploads` can remove
it. An upload without a mark is someone else's: Ferry never resumes, lists or aborts it.

The mark lives beside the data, not in a local file or a table, because the one thing every
door (CLI, Lambda, Fargate) shares is the destination bucket.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from ferry.models import DEFAULT_MARKS_PREFIX

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
_NOT_FOUND = ("NoSuchKey", "404", "NotFound")
_NO_UPLOAD = ("NoSuchUpload", "404")

__all__ = [
    "DEFAULT_MARKS_PREFIX",
    "FORMAT_VERSION",
    "FerryUpload",
    "UploadMark",
    "abort_ferry_upload",
    "delete_mark",
    "key_uploads",
    "list_ferry_uploads",
    "list_marks",
    "list_orphan_marks",
    "mark_key",
    "read_mark",
    "scan_marks",
    "write_mark",
]


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def mark_key(dest_key: str, upload_id: str, marks_prefix: str = DEFAULT_MARKS_PREFIX) -> str:
    """Where the mark of one upload lives: its key's folder, then the upload's own name.

    Hashes keep any destination key (up to 1024 bytes, any characters) a short, safe name,
    and one folder per key lets a run look up the marks of exactly one key.
    """
    return f"{marks_prefix}{_hash(dest_key)}/{_hash(upload_id)}.json"


@dataclass(frozen=True)
class UploadMark:
    """What Ferry wrote about one multipart upload it created."""

    dest_key: str
    upload_id: str
    job_id: str | None
    source_bucket: str
    source_key: str
    source_version: str | None
    source_etag: str
    source_size: int
    strategy: str
    algorithm: str | None
    part_bounds: tuple[tuple[int, int], ...]
    created: datetime
    version: int = FORMAT_VERSION

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": self.version,
                "dest_key": self.dest_key,
                "upload_id": self.upload_id,
                "job_id": self.job_id,
                "source": {
                    "bucket": self.source_bucket,
                    "key": self.source_key,
                    "version_id": self.source_version,
                    "etag": self.source_etag,
                    "size": self.source_size,
                },
                "strategy": self.strategy,
                "algorithm": self.algorithm,
                "part_bounds": [list(b) for b in self.part_bounds],
                "created": self.created.astimezone(UTC).isoformat(),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> UploadMark:
        """Raises ValueError for anything that is not a mark of a version this code knows."""
        try:
            data = json.loads(text)
            if data.get("version") != FORMAT_VERSION:
                raise ValueError(f"mark format version {data.get('version')!r} is not {FORMAT_VERSION}")
            source = data["source"]
            created = datetime.fromisoformat(data["created"])
            return cls(
                dest_key=str(data["dest_key"]),
                upload_id=str(data["upload_id"]),
                job_id=data.get("job_id"),
                source_bucket=str(source["bucket"]),
                source_key=str(source["key"]),
                source_version=source.get("version_id"),
                source_etag=str(source["etag"]),
                source_size=int(source["size"]),
                strategy=str(data["strategy"]),
                algorithm=data.get("algorithm"),
                part_bounds=tuple((int(a), int(b)) for a, b in data["part_bounds"]),
                created=created if created.tzinfo else created.replace(tzinfo=UTC),
            )
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as error:
            raise ValueError(f"not an upload mark: {error}") from error


@dataclass(frozen=True)
class FerryUpload:
    """An open multipart upload that carries Ferry's mark."""

    key: str
    upload_id: str
    initiated: datetime
    mark: UploadMark


def _code(error: BaseException) -> str:
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code", ""))
    return ""


def write_mark(
    client: Any, bucket: str, mark: UploadMark, *, marks_prefix: str = DEFAULT_MARKS_PREFIX
) -> None:
    """PUT the mark. Raises the client's error: the caller decides what a missing mark costs."""
    client.put_object(
        Bucket=bucket,
        Key=mark_key(mark.dest_key, mark.upload_id, marks_prefix),
        Body=mark.to_json().encode("utf-8"),
        ContentType="application/json",
    )


def read_mark(
    client: Any, bucket: str, dest_key: str, upload_id: str, *, marks_prefix: str = DEFAULT_MARKS_PREFIX
) -> UploadMark | None:
    """The mark of one upload; None when there is none (or it is not a mark of this upload).

    AccessDenied also reads as no mark: S3 answers 403 rather than 404 for a missing object
    to an identity without s3:ListBucket, and either way the upload cannot be proved Ferry's.
    """
    key = mark_key(dest_key, upload_id, marks_prefix)
    try:
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as error:
        if _code(error) in (*_NOT_FOUND, "AccessDenied", "403"):
            return None
        raise
    return _parse(body, key, dest_key, upload_id)


def _parse(body: bytes, key: str, dest_key: str | None, upload_id: str | None) -> UploadMark | None:
    try:
        mark = UploadMark.from_json(body)
    except ValueError as error:
        log.warning("ignoring %s: %s", key, error)
        return None
    if (dest_key is not None and mark.dest_key != dest_key) or (
        upload_id is not None and mark.upload_id != upload_id
    ):
        log.warning("ignoring %s: it names another upload", key)
        return None
    return mark


def delete_mark(
    client: Any, bucket: str, dest_key: str, upload_id: str, *, marks_prefix: str = DEFAULT_MARKS_PREFIX
) -> None:
    """Delete one upload's mark (deleting a missing object succeeds in S3)."""
    client.delete_object(Bucket=bucket, Key=mark_key(dest_key, upload_id, marks_prefix))


def open_uploads_of_key(client: Any, bucket: str, key: str) -> Iterator[dict[str, Any]]:
    """Open uploads of exactly `key`: ListMultipartUploads with the key as prefix, paginated,
    keeping only the exact key (a prefix also matches longer keys)."""
    paginator = client.get_paginator("list_multipart_uploads")
    for page in paginator.paginate(Bucket=bucket, Prefix=key):
        for upload in page.get("Uploads", []) or []:
            if upload.get("Key") == key:
                yield upload


def _initiated(upload: dict[str, Any]) -> datetime:
    value = upload.get("Initiated")
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromtimestamp(0, UTC)


def key_uploads(
    client: Any, bucket: str, key: str, *, marks_prefix: str = DEFAULT_MARKS_PREFIX
) -> Iterator[FerryUpload]:
    """Ferry's open uploads of one destination key (for resuming): one GET per open upload.

    Needs s3:ListBucketMultipartUploads on the bucket and s3:GetObject on the marks only.
    """
    for upload in open_uploads_of_key(client, bucket, key):
        mark = read_mark(client, bucket, key, upload["UploadId"], marks_prefix=marks_prefix)
        if mark is not None:
            yield FerryUpload(key, upload["UploadId"], _initiated(upload), mark)


def list_marks(
    client: Any, bucket: str, *, key_prefix: str = "", marks_prefix: str = DEFAULT_MARKS_PREFIX
) -> Iterator[UploadMark]:
    """Every readable mark under `marks_prefix` whose destination key starts with `key_prefix`.

    Marks are found by listing the marks prefix (ListObjectsV2), not the bucket's uploads, so
    the cost follows Ferry's own uploads, and servers that list uploads only for an exact key
    (MinIO) work the same.
    """
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=marks_prefix):
        for item in page.get("Contents", []) or []:
            key = item["Key"]
            if not key.endswith(".json"):
                continue
            try:
                body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            except ClientError as error:
                if _code(error) in _NOT_FOUND:
                    continue  # deleted since the listing: its upload ended
                raise
            mark = _parse(body, key, None, None)
            if mark is None or mark_key(mark.dest_key, mark.upload_id, marks_prefix) != key:
                continue
            if mark.dest_key.startswith(key_prefix):
                yield mark


def scan_marks(
    client: Any, bucket: str, *, key_prefix: str = "", marks_prefix: str = DEFAULT_MARKS_PREFIX
) -> Iterator[tuple[UploadMark, FerryUpload | None]]:
    """Each mark (destination key starting with `key_prefix`) with its open upload, or None
    when that upload no longer exists: one pass for a cleaner that handles both."""
    by_key: dict[str, list[UploadMark]] = {}
    for mark in list_marks(client, bucket, key_prefix=key_prefix, marks_prefix=marks_prefix):
        by_key.setdefault(mark.dest_key, []).append(mark)
    for key in sorted(by_key):
        open_by_id = {u["UploadId"]: u for u in open_uploads_of_key(client, bucket, key)}
        for mark in by_key[key]:
            upload = open_by_id.get(mark.upload_id)
            yield mark, (FerryUpload(key, mark.upload_id, _initiated(upload), mark) if upload else None)


def list_ferry_uploads(
    client: Any, bucket: str, *, key_prefix: str = "", marks_prefix: str = DEFAULT_MARKS_PREFIX
) -> Iterator[FerryUpload]:
    """Ferry's open multipart uploads whose key starts with `key_prefix`, each with its mark."""
    for _, upload in scan_marks(client, bucket, key_prefix=key_prefix, marks_prefix=marks_prefix):
        if upload is not None:
            yield upload


def list_orphan_marks(
    client: Any, bucket: str, *, key_prefix: str = "", marks_prefix: str = DEFAULT_MARKS_PREFIX
) -> Iterator[UploadMark]:
    """Marks whose upload no longer exists (completed, aborted or expired by a lifecycle
    rule while nobody could delete the mark)."""
    for mark, upload in scan_marks(client, bucket, key_prefix=key_prefix, marks_prefix=marks_prefix):
        if upload is None:
            yield mark


def abort_ferry_upload(
    client: Any, bucket: str, upload: FerryUpload, *, marks_prefix: str = DEFAULT_MARKS_PREFIX
) -> None:
    """Abort one of Ferry's uploads and delete its mark. An upload already gone is fine."""
    try:
        client.abort_multipart_upload(Bucket=bucket, Key=upload.key, UploadId=upload.upload_id)
    except ClientError as error:
        if _code(error) not in _NO_UPLOAD:
            raise
    delete_mark(client, bucket, upload.key, upload.upload_id, marks_prefix=marks_prefix)
