"""Whole-object digests over parts that finish out of order: each part waits for its turn.

A waiting part keeps its buffer (and its share of the byte budget), so memory stays bounded;
parts are submitted in order, so the part being waited for is always running. One base for
the streamed copy's MD5 (streaming.OrderedMd5) and the source-layout ETag (layout_etag).
"""

from __future__ import annotations

import threading

from ferry.errors import CopyFailed


class Cancelled(CopyFailed):
    """A part gave up because another part failed; never the reason reported for the object."""

    is_cancellation = True


class InOrder:
    """Feeds parts' bytes to `_consume` in part order, from whichever threads copy them."""

    def __init__(self, first: int = 1) -> None:
        self._next = first
        self._cancelled = False
        self._cond = threading.Condition()

    def feed(self, number: int, data: bytes | memoryview) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._next == number or self._cancelled)
            if self._cancelled:
                raise Cancelled("copy cancelled: another part failed")
            self._consume(data)
            self._next += 1
            self._cond.notify_all()

    def cancel(self) -> None:
        with self._cond:
            self._cancelled = True
            self._cond.notify_all()

    def _consume(self, data: bytes | memoryview) -> None:
        raise NotImplementedError
