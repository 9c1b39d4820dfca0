"""One object's parts, run on the engine's part threads: the one loop every transfer in parts
uses (a multipart upload's parts, sent from a file, streamed or copied server-side, and a
download's ranged GETs).

A part's bytes are granted by a gate (the memory budget, or a slot of the transfer) before
the part is submitted and given back when it ends, so the parts queued for a thread are
bounded as well as those running. The first failure stops the rest: no part starts after it,
a part still running can look at `Failures` between its requests and end early, and that
failure is the one raised, once every part started has ended: nothing of an object runs on
after the object ends (its file closed, its upload aborted). A stop (a deadline, or the
process asked to stop) starts no further part either; the caller then keeps what finished.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")  # one unit of work: a part, or a download's run of parts
R = TypeVar("R")  # what a unit's work gives its hook: a part's proof


class Gate(Protocol):
    """What grants a part's bytes (run/budget.py): `acquire` waits until they fit."""

    def acquire(self, n: int) -> None: ...
    def release(self, n: int) -> None: ...


def root_cause(failures: Sequence[BaseException]) -> BaseException:
    """The failure that started it, not a part that merely stopped because of it."""
    for error in failures:
        if not getattr(error, "is_cancellation", False):
            return error
    return failures[0]


class Failures:
    """One object's part failures, in the order they came; true once any part failed."""

    def __init__(self) -> None:
        self._errors: list[BaseException] = []

    def add(self, error: BaseException) -> None:
        self._errors.append(error)

    def __bool__(self) -> bool:
        return bool(self._errors)

    def cause(self) -> BaseException:
        return root_cause(self._errors)


def part_size(part: Any) -> int:
    """A part's bytes (limits.Part.size): what a part holds of the gate unless told otherwise."""
    return int(part.size)


def run_parts(
    parts: Iterable[T],
    do_part: Callable[[T], R],
    *,
    pool: Executor,
    gate: Gate | None = None,
    grant: Callable[[T], int] = part_size,
    on_done: Callable[[T, R], None] | None = None,
    stop: Callable[[], bool] | None = None,
    failures: Failures | None = None,
) -> bool:
    """Run `do_part` for each of `parts`, submitted to `pool` in order, each holding
    `grant(part)` bytes of `gate` from before it is submitted until it ends.

    `on_done(part, result)` is the checkpoint hook: it runs on the part's thread once the part
    succeeded, before its bytes are given back, and a failure in it is the part's. `stop` is
    asked before each part and again after its wait for the gate. `failures`, when given, is
    the one the parts look at to end early.

    True when every part ran; False when `stop` came true first (the parts not started are
    the caller's to keep for later). Raises the first failure (`root_cause`), after every part
    started has ended; a wait for the gate that raises is raised after them as well.
    """
    run = _Run(do_part, pool, gate, grant, on_done, stop, Failures() if failures is None else failures)
    try:
        stopped = run.start_each(parts)
    finally:
        run.wait()
    if run.failures:
        raise run.failures.cause()
    return not stopped


class _Run(Generic[T, R]):
    """One call of run_parts: what its parts share, and the futures of those started."""

    def __init__(
        self,
        do_part: Callable[[T], R],
        pool: Executor,
        gate: Gate | None,
        grant: Callable[[T], int],
        on_done: Callable[[T, R], None] | None,
        stop: Callable[[], bool] | None,
        failures: Failures,
    ) -> None:
        self.do_part, self.pool, self.gate, self.grant = do_part, pool, gate, grant
        self.on_done, self.stop, self.failures = on_done, stop, failures
        self.started: list[Future[None]] = []

    def start_each(self, parts: Iterable[T]) -> bool:
        """Submit the parts in turn until one fails or the stop comes; True on a stop."""
        for part in parts:
            if self.failures:
                return False
            if self._stopping():
                return True
            granted = self._acquire(part)
            if self.failures:  # a part failed while this one waited for its bytes
                self._release(granted)
                return False
            if self._stopping():  # the wait used up the time (or the process is stopping)
                self._release(granted)
                return True
            try:
                self.started.append(self.pool.submit(self._one, part, granted))
            except BaseException as error:
                self._release(granted)
                self.failures.add(error)
                return False
        return False

    def wait(self) -> None:
        for future in self.started:
            future.exception()  # every part in flight ends, failed or not

    def _one(self, part: T, granted: int) -> None:
        try:
            result = self.do_part(part)
            if self.on_done is not None:
                self.on_done(part, result)
        except BaseException as error:
            self.failures.add(error)  # before its bytes go back: a part waiting for them sees it
            raise
        finally:
            self._release(granted)

    def _stopping(self) -> bool:
        return self.stop is not None and self.stop()

    def _acquire(self, part: T) -> int:
        if self.gate is None:
            return 0
        granted = self.grant(part)
        self.gate.acquire(granted)
        return granted

    def _release(self, granted: int) -> None:
        if self.gate is not None:
            self.gate.release(granted)
