"""The S3 requests the engine sends to copy one object, by operation name, as it copies it from a
listing (engine/strategies/copier.py, server_side.py, streaming.py), and what a multipart copy
adds to be resumed: the engine's own share of a job's cost; and what those requests, and the
restores of archived objects, cost at list prices."""

from __future__ import annotations

import math
from collections import Counter

from ferry.costs import prices
from ferry.costs.inputs import Assumptions
from ferry.costs.prices import GB, Line
from ferry.costs.workload import Workload
from ferry.limits import (
    DEFAULT_STREAM_PART_SIZE,
    MAX_SINGLE_COPY,
    choose_part_size,
)
from ferry.models import ARCHIVE_CLASSES

# Storage classes whose objects the engine copies from the listing's evidence (engine/proofs/source.py
# NEVER_ARCHIVED; a test keeps the two equal). Others get a HEAD first.
LISTING_CLASSES = frozenset(
    {"STANDARD", "STANDARD_IA", "ONEZONE_IA", "REDUCED_REDUNDANCY", "GLACIER_IR", "EXPRESS_ONEZONE"}
)

# Requests that write the destination: billed at the rate of the class they write.
DESTINATION_WRITES = frozenset(
    {
        "CopyObject",
        "PutObject",
        "CreateMultipartUpload",
        "UploadPartCopy",
        "UploadPart",
        "CompleteMultipartUpload",
    }
)
# S3 bills PUT, COPY, POST and LIST requests at one rate, GET and HEAD at another.
PUT_CLASS = DESTINATION_WRITES | {"ListObjectsV2", "ListParts", "ListMultipartUploads"}
GET_CLASS = frozenset({"GetObject", "HeadObject", "GetObjectTagging"})


def _parts(size: int, part_size: int) -> int:
    return max(1, math.ceil(size / part_size))


def object_requests(
    size: int,
    storage_class: str,
    a: Assumptions,
    source_parts: int | None = None,
    full_checksum: bool | None = None,
) -> Counter[str]:
    """The S3 requests the engine sends to copy one object, by operation name.

    `source_parts`: the source's part count where the listing's ETag tells it (1 for a plain
    ETag); None to assume it from `a` (source_multipart_threshold, source_part_size). Follows
    engine/strategies/copier.py (_evidence, _decide), server_side.py and streaming.py for a source from a
    listing, a destination without the object, and no deadline hand-over. `full_checksum`:
    whether the source stores a full-object CRC (the listing's ChecksumType), None to assume.
    """
    crc = a.source_full_checksum if full_checksum is None else full_checksum
    if source_parts is None:
        multipart = size > a.source_multipart_threshold
        source_parts = _parts(size, choose_part_size(size, a.source_part_size)) if multipart else 1
    c: Counter[str] = Counter()
    if storage_class in ARCHIVE_CLASSES:
        c["HeadObject"] += 1  # never copied from the listing: the HEAD says whether it is restored
        if a.restore is None:
            return c  # skipped: needs restore
        c["RestoreObject"] += 1  # this run requests the restore; a later run copies it
        c["HeadObject"] += 1
        c.update(_copy_requests(size, a, source_parts, crc, listed=False))
        return c
    listed = storage_class in LISTING_CLASSES
    c.update(_copy_requests(size, a, source_parts, crc, listed=listed))
    if c["CreateMultipartUpload"]:
        c.update(mark_requests(a))
    return c


def mark_requests(a: Assumptions) -> Counter[str]:
    """What a multipart copy adds to resume after a crash (engine/records/upload_marks.py): one
    ListMultipartUploads of its key (two server-side: one asks whether a crashed run's upload
    was made without part checksums), its mark written (PutObject) and deleted at the end (by
    its version id: the same one DeleteObject). Reading a destination bucket's Object Lock
    configuration, once per bucket and run, is not a per-object cost."""
    return Counter({"ListMultipartUploads": 2 if a.server_side else 1, "PutObject": 1, "DeleteObject": 1})


def _copy_requests(size: int, a: Assumptions, parts: int, crc: bool, *, listed: bool) -> Counter[str]:
    c: Counter[str] = Counter()
    tags = 1 if a.preserve_tags else 0
    if parts > 1 and crc:
        # A full-object CRC proves a copy made in any parts: one request where one can do it
        # (server_side._single_request_is_verifiable, streaming._layout_proves).
        if a.server_side and size <= MAX_SINGLE_COPY:
            c.update({"HeadObject": 1, "CopyObject": 1})
            return c
        if not a.server_side and size <= a.multipart_threshold:
            c.update({"HeadObject": 1, "GetObject": 1, "PutObject": 1, "GetObjectTagging": tags})
            return c
    if parts <= 1:
        if a.server_side:
            if not listed:
                c["HeadObject"] += 1
            c["CopyObject"] += 1
            if listed and a.head_after_listed_copy:
                c["HeadObject"] += 1
            return c
        if not listed or size > a.multipart_threshold:
            c["HeadObject"] += 1
        # streaming.single_put_limit: a source proved only by its MD5 ETag goes in one PutObject
        # up to the memory limit, so that its copy keeps that ETag.
        single_put = max(a.multipart_threshold, min(a.memory_limit, MAX_SINGLE_COPY)) if not crc else 0
        if size <= max(a.multipart_threshold, single_put):
            c.update({"GetObject": 1, "PutObject": 1, "GetObjectTagging": tags})
            return c
        uniform = _parts(size, choose_part_size(size, DEFAULT_STREAM_PART_SIZE))  # uniform parts
        c.update({"CreateMultipartUpload": 1, "GetObject": uniform, "UploadPart": uniform})
        c.update({"CompleteMultipartUpload": 1, "GetObjectTagging": tags})
        return c
    # A multipart source: HEAD, then its layout (HEAD of part 1 and of the last part), then one
    # request per part in that layout, so the copy's ETag proves it.
    c.update(
        {"HeadObject": 3, "CreateMultipartUpload": 1, "CompleteMultipartUpload": 1, "GetObjectTagging": tags}
    )
    if a.server_side:
        c["UploadPartCopy"] += parts
    else:
        c.update({"GetObject": parts, "UploadPart": parts})
    return c


def resume_requests(per_object: Counter[str], a: Assumptions) -> Counter[str]:
    """What each later pass of a handed-over multipart copy sends again before its next part:
    the source's HEAD and layout, its tags, a HEAD of the destination (skip-existing, a single
    object) and ListParts of the checkpointed upload (multipart.Upload._adopt)."""
    parts = per_object["UploadPartCopy"] + per_object["UploadPart"]
    c: Counter[str] = Counter({"HeadObject": 3, "ListParts": math.ceil(parts / 1000)})
    if a.preserve_tags:
        c["GetObjectTagging"] += 1
    if a.skip_existing:
        c["HeadObject"] += 1
    return c


def request_price(op: str, storage_class: str | None) -> float:
    """What one request of `op` costs: a write at the rate of the class it writes
    (`storage_class`, the destination's), any other request at S3 Standard's rate for its class."""
    if op in DESTINATION_WRITES:
        return prices.put_price(storage_class)
    return prices.price("s3_put_copy_post_list") if op in PUT_CLASS else prices.price("s3_get_head")


def request_lines(requests: Counter[str], storage_class: str | None) -> list[Line]:
    """The engine's requests, one line per operation by name; RestoreObject is left to
    `restore_lines`, which prices it with the retrieval."""
    return [
        Line("S3 requests", op, n, "requests", n * request_price(op, storage_class))
        for op, n in sorted(requests.items())
        if op != "RestoreObject"
    ]


def restore_lines(work: Workload, restore: str | None) -> list[Line]:
    """The restore of each archived class in `work` at the `restore` tier (standard where none
    is named): its retrieval requests and the GB it retrieves. Deep Archive has no expedited
    tier: its standard one is priced instead."""
    tier = restore or "standard"
    lines: list[Line] = []
    for cls, (n, size_bytes) in work.by_class().items():
        if cls not in ARCHIVE_CLASSES:
            continue
        family = "glacier" if cls == "GLACIER" else "deep_archive"
        tier_name = "standard" if (family == "deep_archive" and tier == "expedited") else tier
        req = prices.PRICES.get(f"restore_{family}_{tier_name}_request")
        per_gb = prices.PRICES.get(f"restore_{family}_{tier_name}_gb")
        if req and per_gb:
            gb = size_bytes / GB
            lines.append(
                Line("S3 restore", f"{cls} {tier_name} retrieval requests", n, "requests", n * req.usd)
            )
            lines.append(Line("S3 restore", f"{cls} {tier_name} retrieval", gb, "GB", gb * per_gb.usd))
    return lines
