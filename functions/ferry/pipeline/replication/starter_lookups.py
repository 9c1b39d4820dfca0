"""The starter's look-ups of event keys with two spellings, held within its invocation's time.

An event key with a '+' or a '%' may stand for two source keys (event_keys), and the starter
lists the source once per form to learn which (resolve_created). One key after another, a
batch of a thousand such keys is two thousand listings in a row: at a tenth of a second each,
200 s, past the starter's 120 s timeout. A Lambda that times out returns its WHOLE batch to
the queue, the keys that needed no look-up too, and the same batch times out again on every
delivery until all of it lands in the dead-letter queue. So `run_lookups`:

- looks keys up on a bounded thread pool (LOOKUP_WORKERS at once);
- takes at most `lookup_bound(seconds)` keys an invocation: as many as the pool could look up
  in the seconds it has for look-ups if every key took KEY_LOOKUP_SECONDS (its two listings
  at a slow second each: S3 answers small requests in tens of milliseconds, and its
  performance guide retries one that has taken 2 s). At the stack's 120 s timeout, less the
  starter's reserve, that is 3,200 keys, so even a batch of 10,000 (the largest) needs four
  deliveries, fewer than the queue's maxReceiveCount. The others are deferred at once, without
  a request;
- starts a key only while a look-up can still end in time, and stops waiting when the time is
  up: keys still being looked up then are deferred too, their threads' answers not waited for.

The seconds it has are the caller's (the starter's: the Lambda context's remaining time, less
what the batch needs after its look-ups). Deferred keys' messages go back to the queue as batch
item failures (ReportBatchItemFailures on the event source mapping), to be delivered again
after the visibility timeout; the rest of the batch is done. The caller orders the keys, so
that a key delivered more often is looked up first.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Generic, TypeVar

LOOKUP_WORKERS = 64  # look-ups at once: a listing in flight on each of the client's 64 connections
KEY_LOOKUP_SECONDS = 2.0  # one key's look-up when the batch is sized: two listings, a slow second each
TICK_SECONDS = 1.0  # how long a wait for look-ups goes before the time left is read again

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _NotStarted(Exception):  # noqa: N818 - a signal between a task and run_lookups, never raised out
    """A key whose turn came too late for its look-up to end in time."""


@dataclass
class LookupRun(Generic[K, V]):
    """Each key of one invocation in exactly one place: looked up (`done`), failed with the
    look-up's error (`failed`), or not looked up in time (`deferred`, in the keys' order)."""

    done: dict[K, V] = field(default_factory=dict)
    failed: dict[K, BaseException] = field(default_factory=dict)
    deferred: list[K] = field(default_factory=list)


def lookup_bound(seconds: float, workers: int = LOOKUP_WORKERS) -> int:
    """The keys one invocation looks up: as many as `workers` at once could in `seconds` if
    each took KEY_LOOKUP_SECONDS."""
    return max(0, int(workers * seconds // KEY_LOOKUP_SECONDS))


def run_lookups(
    keys: Sequence[K],
    look: Callable[[K], V],
    *,
    seconds_left: Callable[[], float] | None,
    workers: int = LOOKUP_WORKERS,
) -> LookupRun[K, V]:
    """Look `keys` up (in their order of priority) with `look`, within `seconds_left()`, the
    seconds left for look-ups (None: no limit, every key is looked up)."""
    run: LookupRun[K, V] = LookupRun()
    chosen = list(keys)
    if seconds_left is not None:
        bound = lookup_bound(seconds_left(), workers)
        chosen, beyond = chosen[:bound], chosen[bound:]
    else:
        beyond = []
    if chosen:
        _look_up(chosen, look, seconds_left, min(workers, len(chosen)), run)
    run.deferred += beyond
    return run


def _look_up(
    chosen: list[K],
    look: Callable[[K], V],
    seconds_left: Callable[[], float] | None,
    workers: int,
    run: LookupRun[K, V],
) -> None:
    def task(key: K) -> V:
        if seconds_left is not None and seconds_left() < KEY_LOOKUP_SECONDS:
            raise _NotStarted
        return look(key)

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ferry-lookup")
    futures = [(pool.submit(task, key), key) for key in chosen]
    try:
        _wait_for(futures, seconds_left)
    finally:
        # Keys not started are cancelled; those in flight finish on their own, unwaited for.
        pool.shutdown(wait=False, cancel_futures=True)
    for future, key in futures:
        if not future.done() or future.cancelled():
            run.deferred.append(key)
            continue
        error = future.exception()
        if isinstance(error, _NotStarted):
            run.deferred.append(key)
        elif error is not None:
            run.failed[key] = error
        else:
            run.done[key] = future.result()


def _wait_for(futures: list[tuple[Future[V], K]], seconds_left: Callable[[], float] | None) -> None:
    """Until every look-up has ended or the time for them is up."""
    pending = {future for future, _ in futures}
    while pending:
        left = None if seconds_left is None else seconds_left()
        if left is not None and left <= 0:
            return
        timeout = None if left is None else min(left, TICK_SECONDS)
        _, pending = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
