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

Versioned buckets. A plain DeleteObject there removes nothing: it stacks a delete marker on
the mark, and the mark's version and the marker stay in the bucket's history for good (storage
billed, and shown by every version listing). So a mark is always deleted by its own version
id (DeleteObject with VersionId, s3:DeleteObjectVersion), which removes it outright and adds
no marker: the id the PutObject that wrote it answered, or the GetObject that read it; for a
mark written by an earlier process and not read since (a checkpoint names its upload), a HEAD
asks which version the mark holds. A bucket that is not versioned (or whose versioning is
suspended) answers no id: its mark is the `null` version, deleted as such, so a suspended
bucket gets no marker either. The other way out, keeping marks where versioning cannot reach
them, is not open: the destination bucket is the only place every door can write, and its
versioning is the bucket's, not the prefix's.

Object Lock. A bucket whose Object Lock configuration sets a default retention locks every new
version, a mark's too, and no identity can delete a locked version before its retention ends
(GOVERNANCE only with s3:BypassGovernanceRetention, which Ferry is never given). Ferry writes
no marks into such a bucket (`default_retention`, asked once per run and bucket, said once
in the run's notes): a copy killed mid-way there starts its upload again, and the one it left
is removed by the bucket's lifecycle rule (AbortIncompleteMultipartUpload), as an unmarked
upload always is. A lock-enabled bucket without a default retention locks nothing by itself:
marks are written there and leave nothing, as in any versioned bucket.

Marks left by earlier versions of Ferry (a version and a delete marker per upload) are
`mark_leftovers`, which `ferry clean-uploads` deletes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from ferry.models import DEFAULT_MARKS_PREFIX

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
# The version id S3 gives an object in a bucket that is not versioned, or whose versioning is
# suspended: DeleteObject with it removes that object and adds no delete marker.
NULL_VERSION = "null"
_NOT_FOUND = ("NoSuchKey", "404", "NotFound")
_NO_UPLOAD = ("NoSuchUpload", "404")
_NO_VERSION = ("NoSuchVersion", "NoSuchKey", "404")
# A DeleteObject with VersionId=null refused by an identity without s3:DeleteObjectVersion, or
# by a store without versions: on a bucket that answered no version id, a plain delete does.
_NULL_REFUSED = ("AccessDenied", "403", "NotImplemented", "501", "InvalidArgument")
# GetObjectLockConfiguration's answers for a bucket that locks nothing (or a store without
# Object Lock: Garage answers NotImplemented).
_NO_LOCK = ("ObjectLockConfigurationNotFoundError", "NoSuchObjectLockConfiguration", "NotImplemented", "501")

__all__ = [
    "DEFAULT_MARKS_PREFIX",
    "FORMAT_VERSION",
    "FerryUpload",
    "UploadMark",
    "MarkLeftover",
    "MarkableBuckets",
    "NULL_VERSION",
    "abort_ferry_upload",
    "default_retention",
    "delete_leftover",
    "delete_mark",
    "key_uploads",
    "list_ferry_uploads",
    "list_marks",
    "list_orphan_marks",
    "mark_key",
    "mark_leftovers",
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
    # The version the bucket stored this mark as, from the PutObject that wrote it or the
    # GetObject that read it (NULL_VERSION in a bucket that gives none); None when not known.
    # Not part of the mark's JSON, and not of its equality.
    stored_as: str | None = field(default=None, compare=False)

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


def _stored_as(answer: dict[str, Any]) -> str:
    """The version id an answer names; a bucket without versions names none: `null`."""
    return str(answer.get("VersionId") or NULL_VERSION)


def write_mark(
    client: Any, bucket: str, mark: UploadMark, *, marks_prefix: str = DEFAULT_MARKS_PREFIX
) -> str:
    """PUT the mark; returns the version it was stored as (for `delete_mark`). Raises the
    client's error: the caller decides what a missing mark costs."""
    answer = client.put_object(
        Bucket=bucket,
        Key=mark_key(mark.dest_key, mark.upload_id, marks_prefix),
        Body=mark.to_json().encode("utf-8"),
        ContentType="application/json",
    )
    return _stored_as(answer)


def read_mark(
    client: Any, bucket: str, dest_key: str, upload_id: str, *, marks_prefix: str = DEFAULT_MARKS_PREFIX
) -> UploadMark | None:
    """The mark of one upload; None when there is none (or it is not a mark of this upload).

    AccessDenied also reads as no mark: S3 answers 403 rather than 404 for a missing object
    to an identity without s3:ListBucket, and either way the upload cannot be proved Ferry's.
    """
    key = mark_key(dest_key, upload_id, marks_prefix)
    try:
        answer = client.get_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if _code(error) in (*_NOT_FOUND, "AccessDenied", "403"):
            return None
        raise
    return _parse(answer, key, dest_key, upload_id)


def _parse(
    answer: dict[str, Any], key: str, dest_key: str | None, upload_id: str | None
) -> UploadMark | None:
    """The mark a GetObject answered, with the version it was read from."""
    try:
        mark = UploadMark.from_json(answer["Body"].read())
    except ValueError as error:
        log.warning("ignoring %s: %s", key, error)
        return None
    if (dest_key is not None and mark.dest_key != dest_key) or (
        upload_id is not None and mark.upload_id != upload_id
    ):
        log.warning("ignoring %s: it names another upload", key)
        return None
    return replace(mark, stored_as=_stored_as(answer))


def delete_mark(
    client: Any,
    bucket: str,
    dest_key: str,
    upload_id: str,
    *,
    marks_prefix: str = DEFAULT_MARKS_PREFIX,
    stored_as: str | None = None,
) -> None:
    """Delete one upload's mark, leaving no version and no delete marker behind: by the
    version it was stored as (`stored_as`, from its PUT or GET), else by the one a HEAD finds.
    A mark already gone is fine."""
    key = mark_key(dest_key, upload_id, marks_prefix)
    version = stored_as if stored_as is not None else _version_now(client, bucket, key)
    if version is not None:
        delete_version(client, bucket, key, version)


def _version_now(client: Any, bucket: str, key: str) -> str | None:
    """The version a mark holds now; None when there is none. A 403 reads as none, as in
    read_mark: S3 answers it for a missing key to an identity that may not list the bucket."""
    try:
        return _stored_as(client.head_object(Bucket=bucket, Key=key))
    except ClientError as error:
        if _code(error) in (*_NOT_FOUND, "AccessDenied", "403"):
            return None
        raise


def delete_version(client: Any, bucket: str, key: str, version: str) -> None:
    """Delete exactly one version of one of Ferry's own objects: no delete marker is made.

    The `null` version is the object of a bucket that gave no version id: where the identity
    may not delete versions (or the store has none), a plain DeleteObject removes it the same
    way on an unversioned bucket. A version id refused is raised: a plain delete would only
    stack a marker on it."""
    try:
        client.delete_object(Bucket=bucket, Key=key, VersionId=version)
    except ClientError as error:
        if _code(error) in _NO_VERSION:
            return
        if version != NULL_VERSION or _code(error) not in _NULL_REFUSED:
            raise
        client.delete_object(Bucket=bucket, Key=key)


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
                answer = client.get_object(Bucket=bucket, Key=key)
            except ClientError as error:
                if _code(error) in _NOT_FOUND:
                    continue  # deleted since the listing: its upload ended
                raise
            mark = _parse(answer, key, None, None)
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
    delete_mark(
        client,
        bucket,
        upload.key,
        upload.upload_id,
        marks_prefix=marks_prefix,
        stored_as=upload.mark.stored_as,
    )


# -- Object Lock: where marks may not go -------------------------------------------------------


def default_retention(client: Any, bucket: str) -> str | None:
    """The retention the bucket gives every new version, as "GOVERNANCE, 30 days", from its
    Object Lock configuration (s3:GetBucketObjectLockConfiguration); None when it gives none:
    no Object Lock, Object Lock without a default rule, or a store without Object Lock. Raises
    any other refusal."""
    try:
        config = client.get_object_lock_configuration(Bucket=bucket).get("ObjectLockConfiguration") or {}
    except ClientError as error:
        if _code(error) in _NO_LOCK:
            return None
        raise
    default = (config.get("Rule") or {}).get("DefaultRetention") or {}
    if config.get("ObjectLockEnabled") != "Enabled" or not default.get("Mode"):
        return None
    years, days = int(default.get("Years") or 0), int(default.get("Days") or 0)  # one is set
    count, unit = (years, "year") if years else (days, "day")
    return f"{default['Mode']}, {count} {unit}{'' if count == 1 else 's'}"


def _refusal(client: Any, bucket: str) -> str | None:
    try:
        retention = default_retention(client, bucket)
    except Exception as error:  # not known: marks are written, and one left behind is said
        log.info(
            "could not read the Object Lock configuration of s3://%s (%s): marks are written", bucket, error
        )
        return None
    if retention is None:
        return None
    sentence = (
        f"s3://{bucket} keeps every new version under Object Lock ({retention}): no upload marks are "
        "written there, as one could not be deleted before its retention ends; a copy killed mid-way "
        "there starts its upload again, and the upload it left is removed by the bucket's lifecycle "
        "rule (AbortIncompleteMultipartUpload), not by `ferry clean-uploads`"
    )
    log.warning("%s", sentence)  # the pipeline's workers say it in their log; the CLI in its notes too
    return sentence


class MarkableBuckets:
    """Per destination bucket, asked once a run (thread-safe): why marks may not be written
    there, as a sentence for the run's notes, or None when they may."""

    def __init__(self) -> None:
        self._known: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def refusal(self, client: Any, bucket: str) -> str | None:
        with self._lock:  # one question per bucket: the other workers wait for its answer
            if bucket not in self._known:
                self._known[bucket] = _refusal(client, bucket)
            return self._known[bucket]


# -- what plain deletes of marks left in a versioned bucket -----------------------------------


@dataclass(frozen=True)
class MarkLeftover:
    """A version or delete marker under the marks prefix that no upload needs: a mark deleted
    without its version id (as Ferry did before deleting by version) left its version behind a
    delete marker, for good. Only the current version of a mark can name an open upload; every
    noncurrent version and every delete marker is a leftover.

    `dest_key` is the destination key the mark at that key names (read from a version there),
    None when not read (a whole-bucket clean needs no key) or when no version is left to say."""

    key: str
    version_id: str
    delete_marker: bool
    last_modified: datetime
    dest_key: str | None = None


def mark_leftovers(
    client: Any, bucket: str, *, key_prefix: str = "", marks_prefix: str = DEFAULT_MARKS_PREFIX
) -> list[MarkLeftover]:
    """Every leftover under `marks_prefix` (ListObjectVersions, s3:ListBucketVersions) whose
    mark names a destination key starting with `key_prefix`; versions before delete markers,
    so a marker is deleted only after what it hides. A store without versions (NotImplemented)
    has none. With a `key_prefix`, each leftover version is read (GetObject by VersionId) to
    learn its key; a delete marker belongs where a version at its key does, and one with no
    version beside it only to a whole-bucket clean."""
    found: list[MarkLeftover] = []
    try:
        pages = client.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=marks_prefix)
        for page in pages:
            for version in page.get("Versions", []) or []:
                if not version.get("IsLatest"):
                    found.append(_leftover(version, delete_marker=False))
            for marker in page.get("DeleteMarkers", []) or []:
                found.append(_leftover(marker, delete_marker=True))
    except ClientError as error:
        if _code(error) in ("NotImplemented", "501"):
            return []
        raise
    if key_prefix:
        found = _within(client, bucket, found, key_prefix)
    return sorted(found, key=lambda f: (f.delete_marker, f.key, f.last_modified))


def _leftover(entry: dict[str, Any], *, delete_marker: bool) -> MarkLeftover:
    modified = entry.get("LastModified")
    return MarkLeftover(
        key=str(entry["Key"]),
        version_id=str(entry.get("VersionId") or NULL_VERSION),
        delete_marker=delete_marker,
        last_modified=modified if isinstance(modified, datetime) else datetime.fromtimestamp(0, UTC),
    )


def _within(client: Any, bucket: str, found: list[MarkLeftover], key_prefix: str) -> list[MarkLeftover]:
    """The leftovers whose mark names a key under `key_prefix`, each with that key."""
    named: dict[str, str] = {}
    versions = []
    for leftover in (f for f in found if not f.delete_marker):
        dest_key = _named_key(client, bucket, leftover)
        if dest_key is not None:
            named.setdefault(leftover.key, dest_key)
            versions.append(replace(leftover, dest_key=dest_key))
    markers = [replace(f, dest_key=named.get(f.key)) for f in found if f.delete_marker]
    return [f for f in versions + markers if f.dest_key is not None and f.dest_key.startswith(key_prefix)]


def _named_key(client: Any, bucket: str, leftover: MarkLeftover) -> str | None:
    """The destination key a leftover version's mark names; None for what is not a mark."""
    try:
        answer = client.get_object(Bucket=bucket, Key=leftover.key, VersionId=leftover.version_id)
    except ClientError as error:
        if _code(error) in _NO_VERSION:
            return None
        raise
    mark = _parse(answer, leftover.key, None, None)
    return mark.dest_key if mark is not None else None


def delete_leftover(client: Any, bucket: str, leftover: MarkLeftover) -> None:
    """Delete one leftover by its version id (never a plain delete, which would add a marker).
    A version under Object Lock retention is refused until its retention ends: raised."""
    try:
        client.delete_object(Bucket=bucket, Key=leftover.key, VersionId=leftover.version_id)
    except ClientError as error:
        if _code(error) not in _NO_VERSION:
            raise
