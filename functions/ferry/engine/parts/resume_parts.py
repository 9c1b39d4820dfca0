"""Check the parts a crashed run left in an upload before a resumed copy keeps them.

A part listed by ListParts proves only that some bytes were sent. It is kept when its
checksum equals the same checksum of the source's range: the part's CRC/SHA (ListParts
returns it when the upload was created with that algorithm, see the S3 API's `Part` type),
else its ETag, which is the MD5 of the part for an upload without SSE-KMS or SSE-C. The
source range is read and hashed here: reading is cheap next to sending the part again, and
only a part that does not check out is sent again.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from ferry.engine.parts.multipart import PartCheck
from ferry.engine.proofs import checksums
from ferry.engine.proofs.source import SourceInfo
from ferry.engine.proofs.verify import PartProof
from ferry.engine.run.context import TransferContext
from ferry.limits import Part


def listed_matches(listed: dict[str, Any], algorithm: str | None, sums: dict[str, str], md5: bytes) -> bool:
    """The listed part holds the bytes whose checksums are `sums` (and MD5 `md5`)."""
    value = listed.get(f"Checksum{algorithm}") if algorithm else None
    if value:
        return bool(value == sums.get(algorithm or ""))
    return str(listed.get("ETag", "")).strip('"') == md5.hex()


log = logging.getLogger(__name__)


def source_part_checksums(
    client: Any, info: SourceInfo, algorithm: str | None, plan: Sequence[Part], numbers: Sequence[int]
) -> dict[int, str]:
    """The source's own checksum of parts `numbers`, in `algorithm`, when its parts are the
    plan's: GetObjectAttributes ObjectParts (paginated), else HeadObject with PartNumber and
    ChecksumMode per part. {} when unknown (versitygw answers neither): the parts are read."""
    src = info.checksum
    layout = info.layout
    if not algorithm or src is None or src.algorithm != algorithm or not layout:
        return {}
    if [(p.start, p.end) for p in layout] != [(p.start, p.end) for p in plan]:
        return {}
    args: dict[str, Any] = {
        "Bucket": info.obj.bucket,
        "Key": info.obj.key,
        "ObjectAttributes": ["ObjectParts"],
    }
    args.update(info.version_args())
    found: dict[int, str] = {}
    marker = 0
    try:
        while True:
            response = client.get_object_attributes(**args, MaxParts=1000, PartNumberMarker=marker)
            parts = response.get("ObjectParts") or {}
            if response.get("ETag", info.etag).strip('"') != info.etag:
                return {}  # another object than the one planned: read instead
            for part in parts.get("Parts", []) or []:
                value = part.get(f"Checksum{algorithm}")
                if value:
                    found[int(part["PartNumber"])] = value
            if not parts.get("IsTruncated"):
                return found
            marker = int(parts["NextPartNumberMarker"])
    except Exception as error:  # not implemented, or not allowed: the ranges are read instead
        log.info(
            "no part checksums for s3://%s/%s (%s): reading the parts", info.obj.bucket, info.obj.key, error
        )
        return {}


# Reads one range of the source into a buffer (streaming.read_into, bound to one source).
ReadRange = Callable[[Part, memoryview], Any]


def part_check(
    ctx: TransferContext,
    read: ReadRange,
    *,
    algorithm: str | None,
    algorithms: Sequence[str],
    keep_md5: bool,
    keep_listed_checksum: bool = False,
    source_sums: Callable[[Sequence[int]], dict[int, str]] | None = None,
) -> PartCheck:
    """A PartCheck for one copy. `algorithms` are the checksums its proof needs (the
    upload's and the source's own, for a stream); `keep_md5` keeps each part's MD5 in the
    proof (for a `-N` ETag); `keep_listed_checksum` proves a part by the value S3 listed (a
    server-side copy's proof is what S3 reported). `source_sums` gives the source's own part
    checksums in `algorithm` (source_part_checksums): a part they settle is not read, when the
    proof needs no other checksum or MD5."""
    wanted = list(dict.fromkeys([*algorithms, *([algorithm] if algorithm else [])]))

    def settled(part: Part, listed: dict[str, Any], known: dict[int, str]) -> PartProof | None | bool:
        """Checked by the source's part checksum: the proof, None (mismatch), or False (unknown)."""
        value = known.get(part.number)
        dest = listed.get(f"Checksum{algorithm}") if algorithm else None
        if not value or not dest or keep_md5 or wanted != [algorithm]:
            return False
        if value != dest:
            return None
        return PartProof(part.number, part.size, {algorithm: dest}, None, listed["ETag"])  # type: ignore[dict-item]

    def check_one(part: Part, listed: dict[str, Any]) -> PartProof | None:
        buffer = ctx.buffers.take(part.size)
        try:
            with memoryview(buffer)[: part.size] as data:
                read(part, data)
                sums = {a: checksums.b64(checksums.digest(a, data)) for a in wanted}
                md5 = hashlib.md5(data).digest()
        finally:
            ctx.buffers.give(buffer)
            ctx.memory.release(part.size)
        if not listed_matches(listed, algorithm, sums, md5):
            return None
        if keep_listed_checksum:
            value = listed.get(f"Checksum{algorithm}") if algorithm else None
            sums = {algorithm: value} if algorithm and value else {}
        return PartProof(part.number, part.size, sums, md5 if keep_md5 else None, listed["ETag"])

    def check(candidates: Sequence[tuple[Part, dict[str, Any]]]) -> list[PartProof]:
        eligible = source_sums is not None and algorithm and wanted == [algorithm] and not keep_md5
        numbers = [part.number for part, listed in candidates if listed.get(f"Checksum{algorithm}")]
        known = source_sums(numbers) if eligible and numbers else {}  # type: ignore[misc]
        proofs: list[PartProof] = []
        to_read = []
        for part, listed in candidates:
            outcome = settled(part, listed, known)
            if outcome is False:
                to_read.append((part, listed))
            elif outcome is not None:
                proofs.append(outcome)  # type: ignore[arg-type]
        futures: list[Future[PartProof | None]] = []
        try:
            for part, listed in to_read:
                ctx.memory.acquire(part.size)  # granted before the read, as for a part copy
                try:
                    futures.append(ctx.part_executor.submit(check_one, part, listed))
                except BaseException:
                    ctx.memory.release(part.size)
                    raise
        finally:
            for future in futures:
                future.exception()  # wait for every read, failed or not
        proofs += [proof for future in futures if (proof := future.result()) is not None]
        return sorted(proofs, key=lambda p: p.number)

    return check
