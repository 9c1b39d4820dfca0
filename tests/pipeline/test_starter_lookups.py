"""starter_lookups.run_lookups on its own: every key ends looked up, failed with its error, or
deferred; a look-up still running when the time is up is deferred, not waited for."""

from __future__ import annotations

import threading

from ferry.pipeline.replication.starter_lookups import (
    KEY_LOOKUP_SECONDS,
    LOOKUP_WORKERS,
    lookup_bound,
    run_lookups,
)


def test_the_bound_is_what_the_workers_could_do_in_the_time_at_the_slow_rate() -> None:
    assert lookup_bound(100) == LOOKUP_WORKERS * 100 / KEY_LOOKUP_SECONDS == 3200
    assert lookup_bound(1) == LOOKUP_WORKERS // 2
    assert lookup_bound(0) == lookup_bound(-5) == 0


def test_each_key_is_looked_up_failed_or_deferred_in_its_order() -> None:
    def look(key: str) -> str:
        if key == "bad":
            raise ValueError("no such form")
        return key.upper()

    run = run_lookups(["a", "bad", "b"], look, seconds_left=None)
    assert run.done == {"a": "A", "b": "B"} and run.deferred == []
    assert [(k, str(e)) for k, e in run.failed.items()] == [("bad", "no such form")]

    keys = [f"k{n}" for n in range(100)]
    run = run_lookups(keys, str.upper, seconds_left=lambda: KEY_LOOKUP_SECONDS)  # room for one round
    assert sorted(run.done) == sorted(keys[:LOOKUP_WORKERS])
    assert run.deferred == keys[LOOKUP_WORKERS:]
    # With less than one key's time left none is started: all deferred, none sent.
    run = run_lookups(keys, str.upper, seconds_left=lambda: KEY_LOOKUP_SECONDS / 2)
    assert run.done == {} and run.deferred == keys


def test_a_look_up_still_running_when_the_time_is_up_is_deferred_not_waited_for() -> None:
    left = [100.0]
    release = threading.Event()

    def look(key: str) -> str:
        if key == "slow":
            left[0] = 0.0  # the time runs out while this look-up is in flight
            release.wait(60)
        return key.upper()

    try:
        run = run_lookups(["fast", "slow", "later"], look, seconds_left=lambda: left[0], workers=1)
    finally:
        release.set()
    assert run.done == {"fast": "FAST"} and run.failed == {}
    assert run.deferred == ["slow", "later"]  # in flight: not waited for; never started: cancelled
