"""What the source object is: one HEAD, plus the facts later steps need (tags, part layout).

The HEAD is the object's evidence: size, ETag, stored checksum, encryption and class. Every
later decision (skip, strategy, part plan, verification) is made from it, so a source that
changes during the copy is caught by `If-Match` on the same ETag.

A listing already gives size, ETag and class. For a plain object (one part, a class that is
never archived) that is enough to start: the evidence is `provisional` and the copy's own
request completes it (a GET returns every header a HEAD does; CopyObject's result ETag is
compared with the listed one), so a small object costs one request fewer. Whatever the
listing cannot settle still gets its HEAD first (`confirm`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ferry.engine.proofs.checksums import Checksum, from_response
from ferry.errors import CopyFailed, describe, explain_bare
from ferry.limits import Part, parts_from_sizes, uniform_parts
from ferry.models import ARCHIVE_CLASSES, CopyPolicy, SourceObject

_MD5_ETAG = re.compile(r"^[0-9a-f]{32}(-\d+)?$")


def etag_is_md5(etag: str, head: Mapping[str, Any]) -> bool:
    """The one ETag rule: an ETag (unquoted) is MD5-derived, of the bytes or of the part MD5s,
    unless KMS or a customer key encrypts the object (as its HEAD says)."""
    encrypted_by_key = str(head.get("ServerSideEncryption") or "").startswith("aws:kms") or head.get(
        "SSECustomerAlgorithm"
    )
    return not encrypted_by_key and bool(_MD5_ETAG.match(etag))


# Classes whose objects are always readable at once: no archive tier, no restore.
NEVER_ARCHIVED = frozenset(
    {"STANDARD", "STANDARD_IA", "ONEZONE_IA", "REDUCED_REDUNDANCY", "GLACIER_IR", "EXPRESS_ONEZONE"}
)


@dataclass
class SourceInfo:
    obj: SourceObject
    head: dict[str, Any]
    size: int
    etag: str  # without quotes
    checksum: Checksum | None
    storage_class: str
    version_id: str | None
    tags: dict[str, str] | None = None
    layout: list[Part] | None = field(default=None)
    layout_probed: bool = False
    provisional: bool = False  # size, ETag and class from a listing; no HEAD yet
    listed_for_skip: bool = False  # provisional for a size or existence skip only: a copy confirms it

    def confirm(self, response: dict[str, Any]) -> None:
        """Take a whole-object HEAD's or GET's headers as the evidence, size and ETag included
        (a GET pinned by If-Match to the listed ETag has the listed size)."""
        self.size = int(response["ContentLength"])
        self.head = {k: v for k, v in response.items() if k != "Body"}
        self.etag = response.get("ETag", self.etag).strip('"')
        self.checksum = from_response(response)
        self.storage_class = response.get("StorageClass") or "STANDARD"
        self.version_id = response.get("VersionId") or self.obj.version_id
        self.provisional = False

    @property
    def parts_count(self) -> int | None:
        match = re.search(r"-(\d+)$", self.etag)
        return int(match.group(1)) if match else None

    @property
    def is_multipart(self) -> bool:
        return self.parts_count is not None

    @property
    def encryption(self) -> str | None:
        return self.head.get("ServerSideEncryption")

    @property
    def etag_is_md5(self) -> bool:
        return etag_is_md5(self.etag, self.head)

    @property
    def archive_state(self) -> str | None:
        """None when readable now; `archived` or `restoring` otherwise."""
        archived = self.storage_class in ARCHIVE_CLASSES or self.head.get("ArchiveStatus") in (
            "ARCHIVE_ACCESS",
            "DEEP_ARCHIVE_ACCESS",
        )
        if not archived:
            return None
        restore = self.head.get("Restore") or ""
        if 'ongoing-request="false"' in restore:
            return None
        if 'ongoing-request="true"' in restore:
            return "restoring"
        return "archived"

    def copy_source(self) -> dict[str, str]:
        return {"Bucket": self.obj.bucket, "Key": self.obj.key, **self.version_args()}

    def version_args(self) -> dict[str, str]:
        """`VersionId` for a read of this object: its version, except the version id `null`
        a HEAD reports for the current object of a bucket without versions (or written before
        versioning), which is left out, unless the caller asked for `null` by name: a
        version written before versioning was enabled, no longer the latest
        (`ferry copy --all-versions`)."""
        version = self.version_id
        if version and (version != "null" or self.obj.version_id == "null"):
            return {"VersionId": version}
        return {}


def _version_args(obj: SourceObject) -> dict[str, str]:
    return {"VersionId": obj.version_id} if obj.version_id else {}


def from_listing(obj: SourceObject, policy: CopyPolicy) -> SourceInfo | None:
    """Provisional evidence from what the listing said, when that is enough to start a copy."""
    plain = obj.size is not None and obj.etag and "-" not in obj.etag
    if not plain or obj.storage_class not in NEVER_ARCHIVED or policy.metadata is not None:
        return None  # a multipart layout, an archive tier or replaced headers need the HEAD
    return from_listed_size(obj)


def from_listed_size(obj: SourceObject) -> SourceInfo | None:
    """Provisional evidence of any listed object whose size the listing gave: enough for a skip
    decided by size or existence alone, for an object (in parts, archived, ...) that
    from_listing would not start a copy from. A copy confirms it first (confirm)."""
    if obj.size is None:
        return None
    head = {"LastModified": obj.last_modified} if obj.last_modified is not None else {}
    return SourceInfo(
        obj=obj,
        head=head,
        size=int(obj.size),
        etag=str(obj.etag or ""),
        checksum=None,
        storage_class=str(obj.storage_class or "STANDARD"),
        version_id=obj.version_id,
        provisional=True,
    )


def confirm(client: Any, info: SourceInfo) -> SourceInfo:
    """Complete provisional evidence with a HEAD (in place: every holder sees it)."""
    if info.provisional:
        info.confirm(inspect(client, info.obj).head)
    return info


def inspect(client: Any, obj: SourceObject) -> SourceInfo:
    try:
        head = client.head_object(
            Bucket=obj.bucket, Key=obj.key, ChecksumMode="ENABLED", **_version_args(obj)
        )
    except Exception as bare:
        error = explain_bare(bare, lambda: _read_one_byte(client, obj)) or bare
        raise CopyFailed(
            describe(error, side="source", action="s3:GetObject", bucket=obj.bucket, key=obj.key)
        ) from error
    return from_head(obj, head)


def from_head(obj: SourceObject, head: dict[str, Any]) -> SourceInfo:
    """An object's evidence as its HEAD (ChecksumMode=ENABLED) gave it."""
    return SourceInfo(
        obj=obj,
        head=head,
        size=int(head["ContentLength"]),
        etag=str(head.get("ETag") or "").strip('"'),
        checksum=from_response(head),
        storage_class=head.get("StorageClass") or "STANDARD",
        version_id=head.get("VersionId") or obj.version_id,
    )


def _read_one_byte(client: Any, obj: SourceObject) -> None:
    """A GET needs what the HEAD needed (s3:GetObject) and its error has a body that names it."""
    client.get_object(Bucket=obj.bucket, Key=obj.key, Range="bytes=0-0", **_version_args(obj))["Body"].close()


def read_tags(client: Any, info: SourceInfo) -> dict[str, str]:
    """Tags are a separate request; skipped when HEAD already said there are none.

    A missing tag count does not mean none: S3 sends it only to a caller allowed to read that
    object's tags (which may differ by prefix or tag), and older servers never send it.
    """
    if info.tags is not None:
        return info.tags
    if info.head.get("TagCount", None) == 0:
        info.tags = {}
        return info.tags
    obj = info.obj
    try:
        response = client.get_object_tagging(Bucket=obj.bucket, Key=obj.key, **_version_args(obj))
    except Exception as error:
        reason = describe(error, side="source", action="s3:GetObjectTagging", bucket=obj.bucket, key=obj.key)
        raise CopyFailed(
            f"cannot read the source tags to preserve them ({reason}); or copy without tags (--no-tags)"
        ) from error
    info.tags = {t["Key"]: t["Value"] for t in response.get("TagSet", [])}
    return info.tags


def tags_to_write(client: Any, info: SourceInfo, policy: CopyPolicy) -> dict[str, str]:
    """The tag set a new destination object gets: the override, none, or the source's."""
    if policy.tags is not None:
        return dict(policy.tags)
    if not policy.preserve_tags:
        return {}
    return read_tags(client, info)


def learn_layout(client: Any, info: SourceInfo) -> list[Part] | None:
    """The source's part boundaries, so a copy can reproduce its ETag; None if unknowable.

    HEAD with PartNumber gives a part's length. Parts are almost always equal but the last,
    which two HEADs confirm; anything else costs one HEAD per part (still far cheaper than a
    copy that cannot be verified).
    """
    if info.layout_probed or not info.is_multipart:
        return info.layout
    info.layout_probed = True  # an unknowable layout is not asked for twice
    info.layout = _probe_layout(client, info)
    return info.layout


# Part sizes common clients upload in (AWS CLI and boto3 8 MiB, rclone 5 MiB, mc 16 MiB, ...).
COMMON_PART_SIZES = tuple(n * 1024 * 1024 for n in (8, 5, 16, 15, 10, 64, 100, 128))


def guess_layout(info: SourceInfo) -> list[Part] | None:
    """A likely layout when the endpoint cannot say (HeadObject with partNumber answers 501):
    uniform parts of the first common size that gives the source's part count. A guess is
    never trusted: a copy in it is proved only if its ETag comes out equal (verify.etag_proves)."""
    count = info.parts_count
    if not count or not info.etag_is_md5:
        return None
    for size in COMMON_PART_SIZES:
        if -(-info.size // size) == count:
            return uniform_parts(info.size, size)
    return None


def _probe_layout(client: Any, info: SourceInfo) -> list[Part] | None:
    count = info.parts_count or 0
    first = _part_length(client, info, 1)
    if first is None or (count > 1 and first >= info.size):
        return None  # the endpoint ignores PartNumber
    if count == 1:
        return [Part(1, 0, info.size)] if first == info.size else None
    last = info.size - (count - 1) * first
    if 0 < last <= first and _part_length(client, info, count) == last:
        return uniform_parts(info.size, first)
    sizes = [_part_length(client, info, n) for n in range(1, count + 1)]
    if None in sizes or sum(sizes) != info.size:  # type: ignore[arg-type]
        return None
    return parts_from_sizes(sizes)  # type: ignore[arg-type]


def _part_length(client: Any, info: SourceInfo, number: int) -> int | None:
    try:
        head = client.head_object(
            Bucket=info.obj.bucket, Key=info.obj.key, PartNumber=number, **_version_args(info.obj)
        )
    except Exception:
        return None
    return int(head["ContentLength"])
