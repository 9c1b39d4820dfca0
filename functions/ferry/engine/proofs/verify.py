"""Proof that a copy is identical to its source, from the strongest evidence both sides share.

Order of evidence, strongest first:
1. the source's full-object checksum, equal to the CRC of the bytes Ferry wrote (combined
   from part CRCs) or to the destination's value after a server-side copy;
2. a COMPOSITE source checksum, when the destination reproduces the part layout;
3. the source ETag, when it is MD5-derived (no KMS, no customer key): the MD5 of the bytes,
   or the MD5 of part MD5s when the layout is reproduced;
4. size alone, said so in the result (`verified_by: size`), never passed off as more.
For bytes that pass through Ferry the proof is made before the object is completed, so a
mismatch leaves nothing behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ferry.engine.proofs import checksums
from ferry.engine.proofs.checksums import Checksum
from ferry.engine.proofs.source import SourceInfo
from ferry.errors import VerificationFailed


@dataclass
class PartProof:
    number: int
    size: int
    checksums: dict[str, str] = field(default_factory=dict)
    md5: bytes | None = None
    etag: str | None = None


@dataclass
class StreamProof:
    """What Ferry computed from the bytes it read and wrote."""

    parts: list[PartProof]
    multipart: bool
    layout_reproduced: bool
    whole_md5: str | None = None

    def full_object(self, algorithm: str) -> str | None:
        values = [(p.checksums.get(algorithm), p.size) for p in self.parts]
        if any(v is None for v, _ in values):
            return None
        if algorithm in checksums.CRC_ALGORITHMS:
            return checksums.combine(algorithm, values)  # type: ignore[arg-type]
        if not self.multipart:
            return values[0][0]
        return None

    def composite(self, algorithm: str) -> str | None:
        values = [p.checksums.get(algorithm) for p in self.parts]
        if not self.multipart or any(v is None for v in values):
            return None
        return checksums.composite(algorithm, values)  # type: ignore[arg-type]


def source_algorithms(info: SourceInfo, upload_algorithm: str) -> list[str]:
    """Algorithms to compute while streaming: the upload's, and the source's own.

    The source's full-object CRC combines from any parts; a COMPOSITE source checksum (any
    algorithm) can be matched when its part layout is reproduced.
    """
    algorithms = [upload_algorithm]
    src = info.checksum
    if src is None or src.algorithm == upload_algorithm:
        return algorithms
    if (src.is_full_object and src.algorithm in checksums.CRC_ALGORITHMS) or src.parts_count is not None:
        algorithms.append(src.algorithm)
    return algorithms


def needs_part_md5(info: SourceInfo, layout_reproduced: bool) -> bool:
    return _needs_etag_evidence(info) and info.is_multipart and layout_reproduced


def needs_whole_md5(info: SourceInfo) -> bool:
    return _needs_etag_evidence(info) and not info.is_multipart


def _needs_etag_evidence(info: SourceInfo) -> bool:
    """MD5 is costly (about 600 MB/s a core): compute it only when no CRC can prove the copy."""
    src = info.checksum
    if src is not None and src.is_full_object and src.algorithm in checksums.CRC_ALGORITHMS:
        return False
    return info.etag_is_md5


def _fail(info: SourceInfo, what: str, expected: str, got: str) -> VerificationFailed:
    return VerificationFailed(f"verification failed: {what} of the copy is {got}, the source's is {expected}")


def verify_stream(info: SourceInfo, proof: StreamProof) -> str:
    """Prove streamed bytes equal the source before the destination object is made."""
    total = sum(p.size for p in proof.parts)
    if total != info.size:
        raise _fail(info, "size", str(info.size), str(total))
    src = info.checksum
    if src is not None:
        if src.is_full_object:
            local = proof.full_object(src.algorithm)
            if local is not None:
                if local != src.value:
                    raise _fail(info, f"{src.algorithm} checksum", src.value, local)
                return f"{src.algorithm.lower()} (full object)"
        elif proof.layout_reproduced and src.parts_count == len(proof.parts):
            local = proof.composite(src.algorithm)
            if local is not None:
                if local != src.value:
                    raise _fail(info, f"{src.algorithm} composite checksum", src.value, local)
                return f"{src.algorithm.lower()} (composite)"
    if info.etag_is_md5:
        if not info.is_multipart and proof.whole_md5 is not None:
            if proof.whole_md5 != info.etag:
                raise _fail(info, "MD5", info.etag, proof.whole_md5)
            return "md5"
        if info.is_multipart and proof.layout_reproduced and all(p.md5 for p in proof.parts):
            local = checksums.multipart_etag(p.md5 for p in proof.parts)  # type: ignore[misc]
            if local != info.etag:
                raise _fail(info, "ETag", info.etag, local)
            return "etag"
    return "size"


def verify_written(proof: StreamProof, algorithm: str, dest: Checksum | None) -> None:
    """The destination must store the checksum of what Ferry sent (catches a faulty endpoint)."""
    if dest is None or dest.algorithm != algorithm:
        return
    expected = proof.full_object(algorithm) if dest.is_full_object else proof.composite(algorithm)
    if expected is not None and expected != dest.value:
        raise VerificationFailed(
            f"verification failed: the destination stored {algorithm} {dest.value}, Ferry sent {expected}"
        )


def etag_proves(info: SourceInfo, dest_etag: str | None, dest_encryption: str | None) -> bool:
    """The one ETag rule, for verifying a copy and for skipping an existing object alike.

    An ETag is content evidence only where both sides' are MD5-derived (no KMS, no customer
    key): then an equal ETag, `-N` suffix included, is the MD5 of the same bytes in the same
    parts. A copy whose parts differ from the source's gets another ETag and is proved by
    something else or by size alone; a later run finds the ETags unequal and does not skip it
    on evidence the copy itself was never verified by.
    """
    if not dest_etag or not info.etag_is_md5 or (dest_encryption or "").startswith("aws:kms"):
        return False
    return dest_etag.strip('"') == info.etag


def prove_by_etag(verified_by: str, info: SourceInfo, response: dict[str, Any]) -> str:
    """Upgrade a copy proved by size alone when the ETag the destination reported for it
    equals the source's (the source's layout reproduced, learned or not)."""
    if verified_by == "size" and etag_proves(
        info, response.get("ETag"), response.get("ServerSideEncryption")
    ):
        return "etag"
    return verified_by


def _false_stored_checksum(src: Checksum | None, dest: Checksum | None) -> bool:
    if src is None or dest is None or src.algorithm != dest.algorithm:
        return False
    return src.is_full_object and dest.is_full_object and src.value != dest.value


def verify_server_copy(
    info: SourceInfo,
    *,
    dest_etag: str | None,
    dest_checksum: Checksum | None,
    dest_encryption: str | None,
    same_layout: bool,
    dest_size: int | None,
) -> str:
    """Prove a copy S3 made itself. ETags first: they are per-part MD5s where layouts match."""
    if dest_size is not None and dest_size != info.size:
        raise _fail(info, "size", str(info.size), str(dest_size))
    dest_md5 = not (dest_encryption or "").startswith("aws:kms")
    src = info.checksum
    if info.etag_is_md5 and dest_md5 and same_layout and dest_etag:
        etag = dest_etag.strip('"')
        if etag != info.etag:
            raise _fail(info, "ETag", info.etag, etag)
        if _false_stored_checksum(src, dest_checksum):
            # The bytes match, but the object would carry a checksum that is false.
            raise VerificationFailed(
                f"verification failed: the ETags match but the destination stored {src.algorithm} "
                f"{dest_checksum.value}, the source's is {src.value}; this endpoint computes checksums of "
                "part copies wrongly: copy with --mode stream"
            )
        return "etag"
    if src is not None and dest_checksum is not None and src.algorithm == dest_checksum.algorithm:
        comparable = (src.is_full_object and dest_checksum.is_full_object) or (
            same_layout and src.parts_count is not None and src.parts_count == dest_checksum.parts_count
        )
        if comparable:
            if src.value != dest_checksum.value:
                raise _fail(info, f"{src.algorithm} checksum", src.value, dest_checksum.value)
            return f"{src.algorithm.lower()} ({'full object' if src.is_full_object else 'composite'})"
    if not same_layout and dest_md5 and etag_proves(info, dest_etag, dest_encryption):
        return "etag"  # another plan that happened to give the source's parts
    if dest_size is None:
        return "unverified"
    return "size"
