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


class SlotsAndBytes:
    """A part slot of this transfer, then its bytes from the shared budget: a streamed copy's
    gate. Bytes alone would let small parts queue far beyond the workers (a budget of 160 MiB
    holds 40,000 parts of 4 KiB), and a queued part is not checked against the deadline again:
    a pass would run on past its deadline until the whole queue drained."""

    def __init__(self, slots: int, budget: ByteBudget) -> None:
        self._slots = SlotGate(slots)
        self._budget = budget

    def acquire(self, n: int) -> None:
        self._slots.acquire(n)  # first, so no bytes are held while waiting for a slot
        try:
            self._budget.acquire(n)
        except BaseException:
            self._slots.release(n)
            raise

    def release(self, n: int) -> None:
        self._budget.release(n)
        self._slots.release(n)
