"""The engine's typed vocabulary: where objects are, what to copy, how, and what happened.

Every door (CLI, Lambda, Fargate) builds these same values, so a job means the same thing
wherever it runs.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from ferry.errors import ConfigError
from ferry.limits import DEFAULT_MULTIPART_THRESHOLD, MAX_SINGLE_COPY, check_part_size, format_size

CHECKSUM_ALGORITHMS = ("CRC32C", "CRC32", "CRC64NVME", "SHA256", "SHA1")
ARCHIVE_CLASSES = frozenset({"GLACIER", "DEEP_ARCHIVE"})
RESTORE_TIERS = {"bulk": "Bulk", "standard": "Standard", "expedited": "Expedited"}
# Where Ferry marks its own multipart uploads in each destination bucket (engine/records/upload_marks.py).
DEFAULT_MARKS_PREFIX = ".ferry/uploads/"
# Why a local symbolic link was not copied: a local source reports it, every door counts it.
SYMLINK_SKIPPED = "a symbolic link: not followed (--follow-symlinks copies what it points to)"


class Mode(StrEnum):
    AUTO = "auto"
    SERVER_SIDE = "server-side"
    STREAM = "stream"


class Status(StrEnum):
    COPIED = "copied"
    SKIPPED = "skipped"
    FAILED = "failed"
    PENDING = "pending"


class Strategy(StrEnum):
    COPY_OBJECT = "server-side"
    COPY_MULTIPART = "server-side-multipart"
    STREAM_PUT = "stream"
    STREAM_MULTIPART = "stream-multipart"
    # To and from a local folder (ferry copy with a local path on one side).
    UPLOAD = "upload"
    UPLOAD_MULTIPART = "upload-multipart"
    DOWNLOAD = "download"
    DOWNLOAD_RANGES = "download-ranges"


class Compare(StrEnum):
    """How skip-existing decides that the destination already holds an object."""

    CHECKSUM = "checksum"  # the same size and content evidence (checksum or ETag)
    SIZE_MTIME = "size-mtime"  # the same size, and the destination not older
    SIZE = "size"  # the same size alone (rclone's --size-only)
    EXISTENCE = "existence"  # any object at the key, whatever it holds (rclone's --ignore-existing)


def check_endpoint_url(url: str) -> str:
    """An endpoint as botocore takes it: http:// or https://, then a host. Without the scheme
    (`127.0.0.1:9000`, as servers print their address) botocore raises a bare ValueError."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest.strip("/"):
        bare = rest if sep else url
        raise ConfigError(f"endpoint {url!r} is not a URL: write http://{bare} (or https://{bare} for TLS)")
    return url


def check_server_side_reach(
    mode: Mode, source: Endpoint, destination: Endpoint, field: str = "--mode"
) -> None:
    """A server copies server-side only from itself: CopyObject sent to the destination's
    endpoint names a bucket there, so a source on another endpoint is never read (at best
    "no such bucket", at worst that server's own bucket of the same name). Refused where the
    copy is asked for (`field`: the option or the spec's field), before anything is written."""
    if mode == Mode.SERVER_SIDE and source.endpoint_url != destination.endpoint_url:
        raise ConfigError(
            f"{field} server-side needs one endpoint for both sides, but the source is at "
            f"{source.endpoint_url or 'AWS'} and the destination at {destination.endpoint_url or 'AWS'}: "
            f"use {field} stream (or auto, which streams between endpoints)"
        )


@dataclass(frozen=True)
class Endpoint:
    """How to reach one side of a copy: each side can be another account, region or service."""

    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    role_arn: str | None = None
    # An IAM session policy (JSON) passed when assuming role_arn: the session may do only what
    # both the role and this policy allow (a replication's deletes refuse version deletes).
    session_policy: str | None = None
    # A Secrets Manager secret (name or ARN) holding {"access_key_id", "secret_access_key"}:
    # the keys for another partition or an S3-compatible store (clients.session_for).
    credentials_secret: str | None = None
    requester_pays: bool = False
    # (bucket, 12-digit account id) pairs: every request to such a bucket names its owner, so a
    # bucket deleted and re-created by another account is refused, not written to (s3/clients.py).
    bucket_owners: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.endpoint_url is not None:
            check_endpoint_url(self.endpoint_url)

    @property
    def identity(self) -> tuple[str | None, str | None, str | None, str | None]:
        """Who signs this side's requests: equal for two sides only if one caller is both."""
        return (self.endpoint_url, self.profile, self.role_arn, self.credentials_secret)

    @property
    def partition(self) -> str:
        """AWS partitions are separate worlds: no request can copy from one into another."""
        region = self.region or ""
        for prefix, name in (
            ("cn-", "aws-cn"),
            ("us-gov-", "aws-us-gov"),
            ("us-isob-", "aws-iso-b"),
            ("us-iso-", "aws-iso"),
        ):
            if region.startswith(prefix):
                return name
        return "aws"


@dataclass(frozen=True)
class SourceObject:
    """An object to copy; size, ETag and class come free from a listing and save a request later."""

    bucket: str
    key: str
    version_id: str | None = None
    size: int | None = None
    etag: str | None = None
    storage_class: str | None = None
    last_modified: dt.datetime | None = None


@dataclass(frozen=True)
class Target:
    bucket: str
    key: str


@dataclass(frozen=True)
class CopyPolicy:
    """What a caller asks of every copy. Defaults preserve everything and skip what is there."""

    mode: Mode = Mode.AUTO
    part_size: int | None = None
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD
    checksum_algorithm: str | None = None
    storage_class: str | None = None
    metadata: dict[str, str] | None = None
    tags: dict[str, str] | None = None
    preserve_tags: bool = True
    dest_kms_key_id: str | None = None
    skip_existing: bool = True
    compare: Compare = Compare.CHECKSUM
    restore: str | None = None
    restore_days: int = 7
    dry_run: bool = False
    # Where each destination bucket holds the marks of Ferry's open uploads (engine/records/upload_marks.py);
    # None: no marks, so a copy killed mid-way is neither resumed nor cleaned by Ferry.
    marks_prefix: str | None = DEFAULT_MARKS_PREFIX

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", Mode(self.mode))
        object.__setattr__(self, "compare", Compare(self.compare))
        if self.part_size is not None:
            check_part_size(self.part_size)
        if self.checksum_algorithm is not None:
            algorithm = self.checksum_algorithm.upper()
            if algorithm not in CHECKSUM_ALGORITHMS:
                raise ConfigError(
                    f"checksum algorithm {self.checksum_algorithm!r} is not one S3 knows: use one of {', '.join(CHECKSUM_ALGORITHMS)}"
                )
            object.__setattr__(self, "checksum_algorithm", algorithm)
        if self.restore is not None and self.restore not in RESTORE_TIERS:
            raise ConfigError(f"restore tier {self.restore!r} is unknown: use bulk, standard or expedited")
        if not 5 * 1024 * 1024 <= self.multipart_threshold <= MAX_SINGLE_COPY:
            raise ConfigError(
                f"multipart threshold {format_size(self.multipart_threshold)} is out of range: 5 MiB to 5 GiB"
            )
        if self.storage_class is not None:
            object.__setattr__(self, "storage_class", self.storage_class.upper())


@dataclass
class CopyResult:
    """What happened to one object. Every object listed ends as exactly one of these."""

    source_key: str
    dest_key: str
    status: Status
    reason: str | None = None
    strategy: str | None = None
    bytes: int = 0
    seconds: float = 0.0
    checksum: str | None = None
    verified_by: str | None = None
    version_id: str | None = None
    note: str | None = None
    parts_resumed: int = 0
    source_bucket: str | None = None
    dest_bucket: str | None = None
    handed_over: bool = False  # pending only because of the deadline: run it again to finish
    # The source version copied, where one was asked for by id (--all-versions); `version_id`
    # is the destination's version that holds it.
    source_version_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        # Every field is a scalar: read them directly. dataclasses.asdict deep-copies each one,
        # and in a batch of a thousand small objects that was a fifth of a CopyBatch pass's CPU
        # (py-spy, bench/results/worker_cost.md).
        data = {
            k: v
            for k in _RESULT_FIELDS
            if (v := getattr(self, k)) not in (None, {}, 0) or k in ("bytes", "status")
        }
        data["status"] = str(self.status)
        data["key"] = data.pop("source_key")
        return data


_RESULT_FIELDS = tuple(f.name for f in fields(CopyResult))
