"""When a copy must stop: at its deadline, or at once when the process is asked to stop.

A pass stops at its deadline and hands back what is left: objects not started come back
pending, a multipart copy checkpoints its finished parts. That is what a Lambda's timeout
needs, and it is also the right answer to an interruption (Ctrl-C or SIGTERM during `ferry
run`, ECS stopping a Fargate task): `stop_all()` makes every deadline of the process due now,
so what is in flight finishes its current request or part, is recorded, and a later run
resumes from the records. Process-wide, as signals are. A copy without a deadline (`ferry
copy`, `ferry sync`) has no time limit, but stops the same way when the process is asked to.
"""

from __future__ import annotations

import threading
import time

_STOPPING = threading.Event()


def deadline_in(seconds: float) -> float:
    """A deadline as the engine takes it (a time.monotonic() value)."""
    return time.monotonic() + seconds


def due(deadline: float | None, needed: float = 0.0) -> bool:
    """Whether work that takes `needed` seconds can no longer start before `deadline` (None:
    no deadline), or the process is stopping."""
    if _STOPPING.is_set():
        return True
    return deadline is not None and time.monotonic() + needed >= deadline


def stop_all() -> None:
    """Make every deadline due now (an interruption): in-flight copies stop as at a deadline."""
    _STOPPING.set()


def stopping() -> bool:
    return _STOPPING.is_set()


def stop_cleared() -> None:
    """Deadlines mean their time again (a new run in the same process, such as a test's)."""
    _STOPPING.clear()
