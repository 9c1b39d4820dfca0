"""Counted resources that bound what is in flight: bytes of object data, and part slots.

Memory stays bounded because a part's buffer cannot exist before its bytes are granted here,
not because threads happen to be few.
"""

from __future__ import annotations

import threading


class ByteBudget:
    """At most `capacity` bytes granted at once; a single request larger than that waits for
    an empty budget and then runs alone, so a huge part is slow rather than impossible."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._used = 0
        self._peak = 0
        self._cond = threading.Condition()

    def acquire(self, n: int) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._used == 0 or self._used + n <= self.capacity)
            self._used += n
            self._peak = max(self._peak, self._used)

    def release(self, n: int) -> None:
        with self._cond:
            self._used -= n
            self._cond.notify_all()

    @property
    def peak(self) -> int:
        return self._peak


class SlotGate:
    """At most `slots` parts of one transfer submitted at once, whatever their size."""

    def __init__(self, slots: int) -> None:
        self._sem = threading.BoundedSemaphore(slots)

    def acquire(self, n: int) -> None:
        self._sem.acquire()

    def release(self, n: int) -> None:
        self._sem.release()
