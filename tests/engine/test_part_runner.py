"""The one loop that runs an object's parts (engine/parts/runner.py), as uploads, downloads,
streamed and server-side copies use it: a gate bounds what is in flight, the first failure
stops the rest and is the one raised once every part started has ended, the checkpoint hook
sees each finished part once, and a stop (a deadline, an interruption) starts no further part.

Order is made certain by the gate (one slot: one part at a time) or by events, never by time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from ferry.engine.parts.runner import Failures, root_cause, run_parts
from ferry.engine.proofs.in_order import Cancelled, InOrder
from ferry.engine.run.budget import ByteBudget, SlotGate, SlotsAndBytes
from ferry.engine.run.deadlines import due, stop_all, stop_cleared
from ferry.errors import CopyFailed
from ferry.limits import DEFAULT_MEMORY_LIMIT, DEFAULT_STREAM_PART_SIZE, MAX_PARTS, MiB, Part, uniform_parts

THREADS = 16
GUARD = 30.0  # seconds an event is waited for before a test gives up (only ever reached on a bug)


class CountingGate:
    """A gate around another that counts the bytes it holds, calls a hook on each grant, and
    tells whoever waits when a grant comes back."""

    def __init__(self, inner: Any, on_acquire: Callable[[int], None] | None = None) -> None:
        self.inner, self.on_acquire = inner, on_acquire
        self.held = self.peak = 0
        self.released: list[int] = []
        self.cond = threading.Condition()

    def acquire(self, n: int) -> None:
        self.inner.acquire(n)
        with self.cond:
            self.held += n
            self.peak = max(self.peak, self.held)
        if self.on_acquire is not None:
            self.on_acquire(n)

    def release(self, n: int) -> None:
        with self.cond:
            self.held -= n
            self.released.append(n)
            self.cond.notify_all()
        self.inner.release(n)

    def wait_released(self, n: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: n in self.released, GUARD)


@pytest.fixture
def pool() -> Any:
    with ThreadPoolExecutor(THREADS, thread_name_prefix="test-part") as executor:
        yield executor


def plan(count: int) -> list[Part]:
    """`count` parts of the streamed copy's 8 MiB, each of its own size (a part's grant then
    names it): part n is n bytes short of 8 MiB."""
    parts, offset = [], 0
    for number in range(1, count + 1):
        parts.append(Part(number, offset, offset + DEFAULT_STREAM_PART_SIZE - number))
        offset = parts[-1].end
    return parts


def test_the_first_failure_stops_the_rest_and_is_the_one_raised(pool: Any) -> None:
    started: list[int] = []
    done: list[int] = []
    failure = CopyFailed("AccessDenied on s3:PutObject (UploadPart)")

    def do_part(part: Part) -> int:
        started.append(part.number)
        if part.number == 3:
            raise failure
        return part.number

    gate = CountingGate(SlotGate(1))  # one part at a time: part 4 waits for part 3's slot
    with pytest.raises(CopyFailed) as raised:
        run_parts(plan(10), do_part, pool=pool, gate=gate, on_done=lambda part, _: done.append(part.number))
    assert raised.value is failure
    assert started == [1, 2, 3]  # part 4 was granted its slot after part 3 failed: not started
    assert done == [1, 2] and gate.held == 0


def test_a_part_cancelled_by_the_failure_is_not_the_one_raised(pool: Any) -> None:
    """Part 2 waits for part 1's bytes (an ordered digest, in_order.py); part 1 cancels the
    digest, waits until part 2's cancellation is recorded (its grant given back), then fails:
    the cancellation came first, the failure that caused it is raised."""
    ordered = InOrder()
    ordered._consume = lambda data: None  # type: ignore[method-assign]
    gate = CountingGate(SlotGate(2))
    real = CopyFailed("AccessDenied on s3:GetObject")
    failures = Failures()

    def do_part(part: Part) -> None:
        if part.number == 1:
            ordered.cancel()
            gate.wait_released(part_two.size)
            raise real
        ordered.feed(part.number, b"")

    part_one, part_two = plan(2)
    with pytest.raises(CopyFailed) as raised:
        run_parts([part_one, part_two], do_part, pool=pool, gate=gate, failures=failures)
    assert raised.value is real
    assert [type(error) for error in failures._errors] == [Cancelled, CopyFailed]
    assert root_cause([Cancelled("copy cancelled: another part failed"), real]) is real
    assert root_cause([real, Cancelled("x")]) is real


class _Watched:
    """A future that says when it is waited for (Future.exception or result)."""

    def __init__(self, future: Future[Any], waited: threading.Event) -> None:
        self._future, self._waited = future, waited

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._waited.set()
        return self._future.exception(timeout)

    def result(self, timeout: float | None = None) -> Any:
        self._waited.set()
        return self._future.result(timeout)


class WatchedPool(ThreadPoolExecutor):
    """A part held until the runner waits for the parts lets a runner that returned without
    waiting be seen: that part would still be running when the failure is raised."""

    def __init__(self) -> None:
        super().__init__(THREADS, thread_name_prefix="test-watched")
        self.waited = threading.Event()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        return _Watched(super().submit(fn, *args, **kwargs), self.waited)


def part_one_fails_while_two_runs(error: BaseException, two: Callable[[], None]) -> Callable[[Part], None]:
    """A part's work: part 1 fails once part 2 is running; part 2 (and any later part) runs `two`."""
    two_started = threading.Event()

    def do_part(part: Part) -> None:
        if part.number == 1:
            assert two_started.wait(GUARD)
            raise error
        two_started.set()
        two()

    return do_part


def test_every_part_started_ends_before_the_failure_is_raised() -> None:
    ended: list[int] = []

    def two() -> None:
        assert watched.waited.wait(GUARD)  # still running until the runner waits for it
        ended.append(2)

    with WatchedPool() as watched:
        gate = CountingGate(SlotGate(2))
        with pytest.raises(CopyFailed, match="part 1 failed"):
            try:
                run_parts(
                    plan(3),
                    part_one_fails_while_two_runs(CopyFailed("part 1 failed"), two),
                    pool=watched,
                    gate=gate,
                )
            finally:
                at_the_end = list(ended)
    assert at_the_end == [2]  # part 2, running when part 1 failed, had ended; part 3 never started
    assert gate.held == 0


def test_the_gate_bounds_the_bytes_in_flight_and_every_grant_comes_back(pool: Any) -> None:
    """The streamed copy's gate (a part slot, then its bytes of the 160 MiB budget) over 200
    parts of 8 MiB: each part runs holding its bytes, never more than the budget at once."""
    budget = ByteBudget(DEFAULT_MEMORY_LIMIT)
    gate = CountingGate(SlotsAndBytes(THREADS, budget))
    lock = threading.Lock()
    running = peak = 0
    ungranted: list[int] = []

    def do_part(part: Part) -> None:
        nonlocal running, peak
        with lock:
            running += part.size
            peak = max(peak, running)
            if gate.held < running:  # a part runs without its bytes granted
                ungranted.append(part.number)
        with lock:
            running -= part.size

    parts = plan(200)
    assert run_parts(parts, do_part, pool=pool, gate=gate) is True
    assert ungranted == [] and peak <= DEFAULT_MEMORY_LIMIT
    assert budget.peak <= DEFAULT_MEMORY_LIMIT and gate.held == 0
    assert sorted(gate.released) == sorted(p.size for p in parts)


def test_a_download_grants_one_chunk_for_a_run_of_parts(pool: Any) -> None:
    """What a unit holds is the caller's: a download's run of parts holds one chunk."""
    chunk = 1 * MiB
    runs = [uniform_parts(64 * MiB, 8 * MiB), [Part(9, 64 * MiB, 64 * MiB + 512)]]
    gate = CountingGate(ByteBudget(DEFAULT_MEMORY_LIMIT))
    assert run_parts(
        runs,
        lambda run: None,
        pool=pool,
        gate=gate,
        grant=lambda run: min(run[-1].end - run[0].start, chunk),
    )
    assert sorted(gate.released) == [512, chunk] and gate.held == 0


def test_the_hook_sees_each_finished_part_once_at_s3s_10000_parts(pool: Any) -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def landed(part: Part, number: int) -> None:
        assert number == part.number  # the part's own result
        with lock:
            seen.append(part.number)

    parts = uniform_parts(MAX_PARTS * 5 * MiB, 5 * MiB)
    assert len(parts) == MAX_PARTS
    gate = CountingGate(SlotGate(THREADS))
    assert run_parts(parts, lambda part: part.number, pool=pool, gate=gate, on_done=landed) is True
    assert sorted(seen) == list(range(1, MAX_PARTS + 1))
    assert gate.held == 0


def test_a_failing_hook_fails_its_part_and_a_failed_part_never_reaches_it(pool: Any) -> None:
    seen: list[int] = []
    refused = CopyFailed("the checkpoint could not be saved")

    def landed(part: Part, _: None) -> None:
        seen.append(part.number)
        if part.number == 2:
            raise refused

    with pytest.raises(CopyFailed) as raised:
        run_parts(plan(5), lambda part: None, pool=pool, gate=SlotGate(1), on_done=landed)
    assert raised.value is refused and seen == [1, 2]


def test_a_stop_starts_no_further_part_and_says_so(pool: Any) -> None:
    started: list[int] = []
    stop = threading.Event()

    def landed(part: Part, _: None) -> None:
        if part.number == 3:
            stop.set()

    gate = CountingGate(SlotGate(1))
    finished = run_parts(
        plan(8),
        lambda part: started.append(part.number),
        pool=pool,
        gate=gate,
        on_done=landed,
        stop=stop.is_set,
    )
    assert finished is False
    assert started == [1, 2, 3] and gate.held == 0  # part 4's slot, granted after the stop, came back


def test_a_stop_that_comes_during_the_wait_for_the_gate_gives_the_grant_back(pool: Any) -> None:
    """The wait for the gate used up the time: the part granted is not started."""
    started: list[int] = []
    stop = threading.Event()
    grants = 0

    def on_acquire(n: int) -> None:
        nonlocal grants
        grants += 1
        if grants == 3:
            stop.set()

    gate = CountingGate(SlotGate(1), on_acquire)
    finished = run_parts(
        plan(5), lambda part: started.append(part.number), pool=pool, gate=gate, stop=stop.is_set
    )
    assert finished is False and started == [1, 2] and gate.held == 0


def test_an_interrupted_process_starts_no_further_part(pool: Any) -> None:
    """stop_all() (Ctrl-C, SIGTERM) makes every deadline due, none given included."""
    started: list[int] = []

    def landed(part: Part, _: None) -> None:
        if part.number == 2:
            stop_all()

    try:
        finished = run_parts(
            plan(5),
            lambda part: started.append(part.number),
            pool=pool,
            gate=SlotGate(1),
            on_done=landed,
            stop=lambda: due(None),
        )
    finally:
        stop_cleared()
    assert finished is False and started == [1, 2]


def test_a_running_part_sees_the_failure_and_ends_early(pool: Any) -> None:
    """A download's retried range looks at the failures between its GETs."""
    gate = CountingGate(SlotGate(2))
    failures = Failures()
    part_one, part_two = plan(2)
    saw: list[bool] = []

    def two() -> None:
        gate.wait_released(part_one.size)  # part 1's failure is recorded before its bytes go back
        saw.append(bool(failures))
        if failures:
            raise CopyFailed("stopped: another part failed")

    refused = CopyFailed("the source refused part 1")
    with pytest.raises(CopyFailed) as raised:
        run_parts(
            [part_one, part_two],
            part_one_fails_while_two_runs(refused, two),
            pool=pool,
            gate=gate,
            failures=failures,
        )
    assert raised.value is refused and saw == [True]


def test_a_part_that_cannot_be_submitted_fails_the_object_and_its_grant_comes_back() -> None:
    executor = ThreadPoolExecutor(1)
    executor.shutdown()
    gate = CountingGate(SlotGate(1))
    with pytest.raises(RuntimeError, match="shutdown"):
        run_parts(plan(3), lambda part: None, pool=executor, gate=gate)
    assert gate.held == 0 and len(gate.released) == 1
