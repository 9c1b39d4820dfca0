"""Do two objects hold the same bytes? Decided from the strongest evidence both sides share,
and said which: what `ferry check` reports for each key, and how `--all-versions` matches a
destination's versions to the source's.

Evidence, strongest first (the order verify.py proves copies in):
1. a checksum both sides carry in one algorithm and a comparable form (both full-object, or
   both composite over the same number of parts): equal or not, it decides;
2. the ETag, where both are MD5 digests (no SSE-KMS, no customer key) of single-part
   objects: equal or not, it decides. Equal multipart ETags (the MD5 of the same part MD5s)
   prove the same bytes too; unequal ones prove nothing (another part size gives another
   ETag), so they fall through;
3. the size: different sizes differ; equal sizes are "the same by size only", which the
   result says, never passed off as more.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferry.engine.proofs.checksums import Checksum, from_response
from ferry.engine.proofs.source import etag_is_md5

_MD5 = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class Sameness:
    """The verdict on two objects and what decided it."""

    same: bool
    evidence: str  # "checksum", "etag" or "size"
    detail: str  # e.g. "crc64nvme 9P3s... on both", "sizes 10 and 12"


def by_size(source_size: int | None, dest_size: int | None) -> Sameness | None:
    """Sizes that differ decide, from a listing alone; equal ones leave it to the heads."""
    if source_size is not None and dest_size is not None and source_size != dest_size:
        return Sameness(False, "size", f"sizes {source_size} and {dest_size}")
    return None


def compare_heads(source: Mapping[str, Any], dest: Mapping[str, Any]) -> Sameness:
    """Two HEADs (or listing entries with `ContentLength`/`Size`, `ETag`) compared."""
    sizes = by_size(_size(source), _size(dest))
    if sizes is not None:
        return sizes
    checksums = _by_checksum(from_response(dict(source)), from_response(dict(dest)))
    if checksums is not None:
        return checksums
    etags = _by_etag(source, dest)
    if etags is not None:
        return etags
    return Sameness(True, "size", f"same size ({_size(source)} bytes); no comparable checksum or ETag")


def _by_checksum(src: Checksum | None, dst: Checksum | None) -> Sameness | None:
    if src is None or dst is None or src.algorithm != dst.algorithm:
        return None
    comparable = (src.is_full_object and dst.is_full_object) or (
        src.parts_count is not None and src.parts_count == dst.parts_count
    )
    if not comparable:
        return None
    name = src.algorithm.lower()
    if src.value == dst.value:
        return Sameness(True, "checksum", f"{name} {src.value} on both")
    return Sameness(False, "checksum", f"{name} {src.value} and {dst.value}")


def _by_etag(source: Mapping[str, Any], dest: Mapping[str, Any]) -> Sameness | None:
    if not (_md5_etag(source) and _md5_etag(dest)):
        return None
    a, b = _etag(source), _etag(dest)
    if a == b:
        return Sameness(True, "etag", f"ETag {a} on both")
    if _MD5.match(a) and _MD5.match(b):
        return Sameness(False, "etag", f"ETags {a} and {b} (single-part MD5s)")
    return None  # multipart ETags of other part sizes say nothing about the bytes


def _md5_etag(head: Mapping[str, Any]) -> bool:
    """A listing entry does not say how it is encrypted: its ETag is taken as S3 gives it."""
    return etag_is_md5(_etag(head), head)


def _etag(head: Mapping[str, Any]) -> str:
    return str(head.get("ETag") or "").strip('"')


def _size(head: Mapping[str, Any]) -> int | None:
    value = head.get("ContentLength", head.get("Size"))
    return int(value) if value is not None else None
