"""Incremental copies: is the destination already identical to the source?

Identical means the same size and the same content evidence (checksum of one algorithm, or
ETag). Weaker tests a caller can choose: size plus modification time; size alone (rclone's
--size-only); or the key being there at all, whatever it holds (rclone's --ignore-existing).
Their reasons say that the contents were not compared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from ferry.engine.compare.dest_listing import ABSENT, Listed
from ferry.engine.proofs.checksums import from_response
from ferry.engine.proofs.source import SourceInfo, read_tags
from ferry.engine.proofs.verify import etag_proves
from ferry.errors import CopyFailed, describe_destination, error_code, is_access_denied
from ferry.models import Compare, CopyPolicy, Target
from ferry.s3.listing import listed_entry


def identical_reason(
    client: Any, info: SourceInfo, target: Target, compare: Compare, listed: Listed | str | None = None
) -> str | None:
    """Why the destination can be skipped, or None when it must be (re)written.

    `listed` is what a listing of the destination showed (see dest_listing): it settles an
    absent key, another size or the same ETag without a request; otherwise the HEAD decides.
    """
    decided, reason = _listing_verdict(listed, info, compare)
    if decided:
        return reason
    head = head_destination(client, target)
    there = None if head is None else int(head["ContentLength"])
    decided, reason = weak_verdict(
        compare, there, info.size, lambda: _not_older(info, head.get("LastModified") if head else None)
    )
    if decided or head is None:
        return reason
    src, dst = info.checksum, from_response(head)
    if src is not None and dst is not None and src.algorithm == dst.algorithm:
        comparable = (src.is_full_object and dst.is_full_object) or (
            src.parts_count == dst.parts_count is not None
        )
        if comparable and src.value == dst.value:
            return f"identical ({src.algorithm.lower()} {src.value})"
    if etag_proves(info, head.get("ETag"), head.get("ServerSideEncryption")):
        return f"identical (ETag {info.etag})"
    return None


# Why an object is skipped under the weaker tests: true to what was compared, and no more.
SAME_SIZE = "same size at the destination (contents not compared)"
EXISTS = "already exists at the destination (not compared)"


def weak_verdict(
    compare: Compare, there: int | None, size: int, not_older: Callable[[], str | None]
) -> tuple[bool, str | None]:
    """(decided, reason to skip) from what the destination holds (`there`: its size, None when
    nothing is there) against the source's `size`. Every door (between buckets, uploads,
    downloads; from a listing or a HEAD) asks this one ladder, so the tests mean the same
    everywhere; only the checksum test with equal sizes is left undecided, for the contents.
    `not_older` is the door's own time rule (and wording), asked under size-mtime only."""
    if there is None:
        return True, None
    if compare == Compare.EXISTENCE:
        return True, EXISTS
    if there != size:
        return True, None
    if compare == Compare.SIZE:
        return True, SAME_SIZE
    if compare == Compare.SIZE_MTIME:
        return True, not_older()
    return False, None


def settled_by_listing(listed: Listed | str | None, info: SourceInfo, compare: Compare) -> bool:
    """True when the listings alone decide skip-existing, or no source evidence beyond the
    listed size is needed for it: no source HEAD is needed then."""
    return sized_only(compare) or _listing_verdict(listed, info, compare)[0]


def sized_only(compare: Compare) -> bool:
    """The tests that need no more of the source than its listed size (--size-only,
    --ignore-existing)."""
    return compare in (Compare.SIZE, Compare.EXISTENCE)


def _listing_verdict(
    listed: Listed | str | None, info: SourceInfo, compare: Compare
) -> tuple[bool, str | None]:
    """(decided, reason to skip): what the destination listing settles without a HEAD."""
    if listed == ABSENT:
        return True, None
    if not isinstance(listed, Listed):
        return False, None
    if compare == Compare.SIZE_MTIME and listed.size == info.size and info.head.get("LastModified") is None:
        return False, None  # a manifest row may not carry the source's time: the HEAD decides
    decided, reason = weak_verdict(
        compare, listed.size, info.size, lambda: _not_older(info, listed.last_modified)
    )
    if decided:
        return True, reason
    if etag_proves(info, listed.etag, None):  # the rule a copy is verified by (verify.py)
        return True, f"identical (ETag {info.etag})"
    return False, None


def _not_older(info: SourceInfo, dest_time: Any) -> str | None:
    source_time = info.head.get("LastModified")
    if source_time is not None and dest_time is not None and dest_time >= source_time:
        return "destination has the same size and is not older"
    return None


def head_destination(client: Any, target: Target) -> dict[str, Any] | None:
    """The destination object's HEAD (with its stored checksum), None when it is not there."""
    try:
        return client.head_object(Bucket=target.bucket, Key=target.key, ChecksumMode="ENABLED")
    except ClientError as error:
        if error_code(error) in ("404", "NoSuchKey", "NotFound"):
            return None
        if is_access_denied(error) and _listed_absent(client, target):
            return None
        raise CopyFailed(
            describe_destination(error, "s3:GetObject (to compare)", target.bucket, target.key)
            + "; or copy with --no-skip-existing"
        ) from error


def _listed_absent(client: Any, target: Target) -> bool:
    """Whether a listing proves the key absent, after its HEAD was refused (listing.listed_entry
    says why a listing can when a HEAD cannot). Only a listing that succeeds and does not show
    the key makes "absent"; any other answer leaves the 403 an access problem."""
    try:
        return listed_entry(client, target.bucket, target.key) is None
    except Exception:
        return False


def already_as_asked(client: Any, info: SourceInfo, policy: CopyPolicy) -> str | None:
    """Why an object copied onto itself can be skipped, or None when it must be rewritten.

    The object is always 'identical' to itself, so content cannot decide: only the attributes
    asked for can. `info` is the object's HEAD; tags cost one GetObjectTagging, asked only when
    tags are part of the request. A KMS key given as an alias never matches the key ARN S3
    reports, so such objects are rewritten (once more, harmlessly).
    """
    head = info.head
    if policy.storage_class and policy.storage_class != info.storage_class:
        return None
    if policy.metadata is not None and _lower_keys(policy.metadata) != _lower_keys(
        head.get("Metadata") or {}
    ):
        return None
    if policy.dest_kms_key_id and not _is_key(policy.dest_kms_key_id, head):
        return None
    wanted_tags = policy.tags if policy.tags is not None else (None if policy.preserve_tags else {})
    if wanted_tags is not None and read_tags(client, info) != wanted_tags:
        return None
    return "the object already has what was asked: nothing would change"


def _lower_keys(metadata: dict[str, str]) -> dict[str, str]:
    """S3 stores user metadata names in lower case."""
    return {k.lower(): v for k, v in metadata.items()}


def _is_key(wanted: str, head: dict[str, Any]) -> bool:
    actual = head.get("SSEKMSKeyId") or ""
    return head.get("ServerSideEncryption", "").startswith("aws:kms") and (
        actual == wanted or actual.endswith(f":key/{wanted}")
    )
