"""Reusable part buffers, and a file-like view of one, so streamed bytes live in few allocations.

A fresh `bytes` per part (8 MiB, read whole) left the process about 100 MiB above the bytes
actually in flight: glibc raises its mmap threshold after the first large frees, and from
then on each part thread's heap arena keeps the freed chunks. Parts now read into buffers
taken from a pool and given back after the upload. The byte budget still decides how many
bytes are in use at once; the pool only keeps what it hands out from being reallocated, and
never keeps more than the memory limit.
"""

from __future__ import annotations

import io
import threading


class BufferPool:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._free: list[bytearray] = []
        self._allocated = 0  # bytes of every buffer made and not dropped, in use or free
        self._lock = threading.Lock()

    def take(self, size: int) -> bytearray:
        """A buffer of at least `size` bytes (at most twice that, so little is wasted)."""
        with self._lock:
            best = None
            for index, buffer in enumerate(self._free):
                if size <= len(buffer) <= 2 * size and (best is None or len(buffer) < len(self._free[best])):
                    best = index
            if best is not None:
                return self._free.pop(best)
            while self._free and self._allocated + size > self.capacity:
                self._allocated -= len(self._free.pop())  # make room: drop what does not fit
            self._allocated += size
        return bytearray(size)

    def give(self, buffer: bytearray) -> None:
        with self._lock:
            if self._allocated <= self.capacity:
                self._free.append(buffer)
            else:
                self._allocated -= len(buffer)

    @property
    def allocated(self) -> int:
        return self._allocated


BODY_BLOCK = 256 * 1024


def request_body(view: memoryview) -> io.BufferedReader:
    """An upload body over `view`, read without copying the whole part first.

    Buffered, because the SigV4 signer reads a plain-http body 4 KiB at a time through Python
    calls (to hash it): served from a C buffer they cost what reading io.BytesIO costs; served
    by BufferReader alone they cost twice that. Seekable: botocore rewinds it to retry.
    """
    return io.BufferedReader(BufferReader(view), BODY_BLOCK)


class BufferReader(io.RawIOBase):
    """A raw, seekable stream over a memoryview."""

    def __init__(self, view: memoryview) -> None:
        super().__init__()
        self._view = view
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, target: bytearray | memoryview) -> int:  # type: ignore[override]
        n = max(0, min(len(target), len(self._view) - self._pos))
        target[:n] = self._view[self._pos : self._pos + n]
        self._pos += n
        return n

    def read(self, size: int | None = -1) -> bytes:
        end = len(self._view) if size is None or size < 0 else min(len(self._view), self._pos + size)
        data = bytes(self._view[self._pos : end])
        self._pos = max(self._pos, end)
        return data

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._view)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos
