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
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from ferry.engine import checksums
from ferry.engine.context import TransferContext
from ferry.engine.multipart import PartCheck
from ferry.engine.verify import PartProof
from ferry.limits import Part


def listed_matches(listed: dict[str, Any], algorithm: str | None, sums: dict[str, str], md5: bytes) -> bool:
    """The listed part holds the bytes whose checksums are `sums` (and MD5 `md5`)."""
    value = listed.get(f"Checksum{algorithm}") if algorithm else None
    if value:
        return bool(value == sums.get(algorithm or ""))
    return str(listed.get("ETag", "")).strip('"') == md5.hex()


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
) -> PartCheck:
    """A PartCheck for one copy. `algorithms` are the checksums its proof needs (the
    upload's and the source's own, for a stream); `keep_md5` keeps each part's MD5 in the
    proof (for a `-N` ETag); `keep_listed_checksum` proves a part by the value S3 listed (a
    server-side copy's proof is what S3 reported)."""
    wanted = list(dict.fromkeys([*algorithms, *([algorithm] if algorithm else [])]))

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
        futures: list[Future[PartProof | None]] = []
        try:
            for part, listed in candidates:
                ctx.memory.acquire(part.size)  # granted before the read, as for a part copy
                try:
                    futures.append(ctx.part_executor.submit(check_one, part, listed))
                except BaseException:
                    ctx.memory.release(part.size)
                    raise
        finally:
            for future in futures:
                future.exception()  # wait for every read, failed or not
        return [proof for future in futures if (proof := future.result()) is not None]

    return check
