"""The source's own multipart ETag, recomputed from bytes streamed in other parts.

A multipart source whose only evidence is its `-N` ETag (no CRC, not KMS) is proved by the MD5
of its part MD5s. When Ferry streams it in parts of another size (`--part-size`), the copy's
ETag differs and, before this, the copy was proved by size alone: a byte damaged on the way
(tests/faults/test_layout_etag.py flips one in a ranged GET) reached the destination as a
`copied` object. Fed the streamed bytes in order, this recomputes the source's ETag over the
source's own part boundaries (learned with HeadObject PartNumber), so the copy is proved, or
fails and is aborted, before it is completed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ferry.engine.proofs.checksums import multipart_etag
from ferry.engine.proofs.in_order import InOrder
from ferry.limits import Part


class LayoutEtag(InOrder):
    """MD5 per source part over bytes that arrive in Ferry's parts, fed in part order."""

    def __init__(self, source_layout: Sequence[Part]) -> None:
        super().__init__()
        self._ends = [p.end for p in source_layout]
        self._digests: list[bytes] = []
        self._md5 = hashlib.md5()
        self._offset = 0

    def _consume(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while len(view):
            index = len(self._digests)
            room = self._ends[index] - self._offset if index < len(self._ends) else len(view)
            take = min(room, len(view))
            self._md5.update(view[:take])
            self._offset += take
            view = view[take:]
            if index < len(self._ends) and self._offset == self._ends[index]:
                self._digests.append(self._md5.digest())
                self._md5 = hashlib.md5()

    def etag(self) -> str | None:
        """The ETag those bytes make in the source's layout; None if they did not fill it."""
        if len(self._digests) != len(self._ends) or self._offset != self._ends[-1]:
            return None
        return multipart_etag(self._digests)
