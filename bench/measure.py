"""Run a tool as a child process and measure it: wall time, CPU seconds and peak RSS.

CPU comes from `os.wait4` on the child (its own rusage, including what it waited for). Peak
RSS does not: a child forked from this Python process starts with the harness's memory, and
Linux keeps that high-water mark across exec, so every tool would show at least the
harness's ~70 MiB. GNU time (`/usr/bin/time`, a small process) forks the tool itself and
reports the tool's own ru_maxrss; that is the number used. A pipeline (`s5cmd cat | s5cmd
pipe`) is measured as the sum of its processes: their CPU adds up, and since they run at the
same time, so does their memory.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from .stats import Sample

TAIL = 600  # characters of a failed run's stderr kept for the report
GNU_TIME = "/usr/bin/time"


def time_available() -> bool:
    return os.access(GNU_TIME, os.X_OK)


def _reap(process: subprocess.Popen[bytes], timeout: float) -> tuple[int, resource.struct_rusage]:
    """Block until one child ends and take its own rusage; kill it if it outlives `timeout`.

    A blocking wait (not polling) so the harness takes no CPU from the tools it measures.
    """
    timer = threading.Timer(max(0.0, timeout), _kill_group, (process.pid,))
    timer.start()
    try:
        _, status, usage = os.wait4(process.pid, 0)
    finally:
        timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage


def _kill_group(pid: int) -> None:
    """Kill the wrapper and the tool it started (each child runs in its own process group)."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def run_pipeline(commands: Sequence[Sequence[str]], env: dict[str, str], timeout: float = 3600.0) -> Sample:
    """Run `a | b | ...` (or one command) and measure all of it as one run."""
    started = time.monotonic()
    deadline = started + timeout
    processes: list[subprocess.Popen[bytes]] = []
    stderr_files = []
    previous = None
    rss_files: list[str] = []
    timed = time_available()
    for index, command in enumerate(commands):
        last = index == len(commands) - 1
        err = _TempErr()
        stderr_files.append(err)
        if last:  # a tool may say why it failed on stdout (Ferry's summary does)
            out = _TempErr()
            stderr_files.append(out)
        argv = list(command)
        if timed:
            fd, rss_file = tempfile.mkstemp(prefix="bench-rss-")
            os.close(fd)
            rss_files.append(rss_file)
            argv = [GNU_TIME, "-f", "%M", "-o", rss_file, "--", *argv]
        process = subprocess.Popen(
            argv,
            stdin=previous.stdout if previous else subprocess.DEVNULL,
            stdout=out.fileno() if last else subprocess.PIPE,
            stderr=err.fileno(),
            env=env,
            start_new_session=True,
        )
        if previous is not None and previous.stdout is not None:
            previous.stdout.close()  # only the reader holds the pipe, so a dead reader stops the writer
        processes.append(process)
        previous = process
    codes, cpu, rss = [], 0.0, 0
    for process in processes:
        code, usage = _reap(process, deadline - time.monotonic())
        codes.append(code)
        cpu += usage.ru_utime + usage.ru_stime
        if not timed:
            rss += usage.ru_maxrss * 1024  # kilobytes on Linux; includes the harness (see above)
    wall = time.monotonic() - started
    for rss_file in rss_files:
        rss += _reported_rss(rss_file)
    errors = [f.read_tail() for f in stderr_files]
    for f in stderr_files:
        f.close()
    if any(codes):
        detail = "; ".join(e for e in errors if e) or "no message"
        reason = "timed out" if -9 in codes else f"exit codes {codes}"
        return Sample(wall, cpu, rss, ok=False, error=f"{reason}: {detail[-TAIL:]}")
    return Sample(wall, cpu, rss)


def run(command: Sequence[str], env: dict[str, str], timeout: float = 3600.0) -> Sample:
    return run_pipeline([command], env, timeout)


def run_many(
    pipelines: Sequence[Sequence[Sequence[str]]],
    env: dict[str, str],
    concurrency: int,
    timeout: float = 3600.0,
) -> Sample:
    """Run many small pipelines, `concurrency` at a time, as one measured run.

    For tools that can only stream an object between buckets through a shell pipe, one pipe
    per object. CPU is the sum over every process. Peak RSS is the largest single pipeline
    times the number run at once: an upper bound of what they held together.
    """
    started = time.monotonic()
    lock = threading.Lock()
    totals = {"cpu": 0.0, "rss": 0}
    errors: list[str] = []

    def one(pipeline: Sequence[Sequence[str]]) -> None:
        sample = run_pipeline(pipeline, env, timeout)
        with lock:
            totals["cpu"] += sample.cpu
            totals["rss"] = max(totals["rss"], sample.peak_rss)
            if not sample.ok and len(errors) < 3:
                errors.append(sample.error or "failed")

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, pipelines))
    wall = time.monotonic() - started
    peak = int(totals["rss"]) * min(concurrency, len(pipelines))
    if errors:
        return Sample(wall, float(totals["cpu"]), peak, ok=False, error="; ".join(errors)[-TAIL:])
    return Sample(wall, float(totals["cpu"]), peak)


def _reported_rss(path: str) -> int:
    """GNU time's %M (kilobytes), the last line of its output file (it may note a signal first)."""
    try:
        with open(path) as f:
            lines = [line.strip() for line in f if line.strip()]
        return int(lines[-1]) * 1024 if lines and lines[-1].isdigit() else 0
    except OSError:
        return 0
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


class _TempErr:
    """A child's stderr in an unnamed temporary file, so a chatty tool cannot block on a pipe."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()

    def fileno(self) -> int:
        return self._file.fileno()

    def read_tail(self) -> str:
        self._file.seek(0, os.SEEK_END)
        size = self._file.tell()
        self._file.seek(max(0, size - TAIL))
        return self._file.read().decode("utf-8", "replace").strip()

    def close(self) -> None:
        self._file.close()
