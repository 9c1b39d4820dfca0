"""Ctrl-C and SIGTERM as a stop, not a crash: what is in flight finishes and is accounted for,
then the command says what finished and how to go on (ferry run, ferry copy, ferry sync)."""

from __future__ import annotations

import signal
import threading
from typing import IO, Any

from ferry.engine.run.deadlines import stop_all, stop_cleared


class StopOnSignals:
    """Ctrl-C (SIGINT) and SIGTERM during `ferry run`, `ferry copy` and `ferry sync`: the first
    stops the run as at a deadline (engine.run.deadlines.stop_all: requests and parts in flight
    finish, everything is recorded or summarised; `ferry run` marks its job INTERRUPTED); a
    second Ctrl-C quits at once, as Ctrl-C otherwise does (a `ferry run` job then stays
    RUNNING, and --resume still finishes it). Signals reach the main thread only: elsewhere
    (a caller's own thread) nothing is installed and Ctrl-C keeps its usual meaning."""

    def __init__(self, stderr: IO[str]) -> None:
        self.stderr = stderr
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopOnSignals:
        stop_cleared()
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._stop)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _stop(self, signum: int, frame: Any) -> None:
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = signum
        stop_all()
        self.stderr.write(
            "\nferry: stopping: finishing what is in flight and recording it (Ctrl-C again to quit at once)\n"
        )
        self.stderr.flush()
