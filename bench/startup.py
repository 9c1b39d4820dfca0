"""`make bench-startup`: the CPU a fresh process spends starting up, beside botocore's own import.

What is measured, each in a fresh interpreter, side by side in one run: `import botocore.session`
(the yardstick: every S3 client pays it), `ferry --help` and `ferry copy --help` (target: at
most 0.5x the yardstick), and the import of each Lambda handler as Lambda's init phase does it
(`import handlers.X`, PYTHONPATH=functions, in an environment that looks like a Lambda with no
trace header yet; target: at most 1.5x). Lambda bills the init phase, so a handler's import is
part of every cold start's cost.

CPU seconds (user + system) of each child come from `os.wait4`, its own rusage: on a shared
machine CPU time is steadier than wall time, but a loaded machine still inflates it (caches,
frequency), so the ratios to the yardstick measured in the same rounds are the figures to
read. Every round runs each command once, in an order rotated from round to round, so that a
burst of load falls on different commands; the median, min and max of the rounds are reported.
Writes bench/results/startup.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FUNCTIONS = REPO / "functions"
RESULTS = REPO / "bench" / "results"
YARDSTICK = "import botocore.session"
HELP_TARGET, HANDLER_TARGET = 0.5, 1.5


@dataclass
class Command:
    """One start-up to measure: its argv, extra environment, and the target as a ratio to the
    yardstick (None for the yardstick itself)."""

    name: str
    argv: list[str]
    target: float | None
    env: dict[str, str] = field(default_factory=dict)
    cpu: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.cpu)


def handler_names(functions: Path = FUNCTIONS) -> list[str]:
    """Every Lambda handler module (and the Fargate entry point): functions/handlers/*.py."""
    skip = {"__init__", "runtime", "tracing"}  # what the handlers share
    return sorted(p.stem for p in (functions / "handlers").glob("*.py") if p.stem not in skip)


def lambda_env() -> dict[str, str]:
    """What a Lambda's init phase sees: its task root and function name, a region, and no
    trace header (Lambda sets _X_AMZN_TRACE_ID per invocation, after init)."""
    return {
        "PYTHONPATH": str(FUNCTIONS),
        "LAMBDA_TASK_ROOT": str(FUNCTIONS),
        "AWS_LAMBDA_FUNCTION_NAME": "ferry-bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


def commands(python: str = sys.executable) -> list[Command]:
    """The yardstick first, then the two help texts, then every handler's import."""
    ferry = Path(python).with_name("ferry")
    ferry_argv = [str(ferry)] if ferry.exists() else [python, "-m", "ferry.cli"]
    found = [
        Command(YARDSTICK, [python, "-c", "import botocore.session"], None),
        Command("ferry --help", [*ferry_argv, "--help"], HELP_TARGET),
        Command("ferry copy --help", [*ferry_argv, "copy", "--help"], HELP_TARGET),
    ]
    for name in handler_names():
        argv = [python, "-c", f"import handlers.{name}"]
        found.append(Command(f"import handlers.{name}", argv, HANDLER_TARGET, lambda_env()))
    return found


def child_cpu(argv: Sequence[str], env: dict[str, str]) -> float:
    """User + system CPU seconds of one child process, from its own rusage (os.wait4)."""
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    error = process.stderr.read()  # small: a traceback at most; read before waiting
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {code}: {error.decode(errors='replace')[-600:]}")
    return usage.ru_utime + usage.ru_stime


def measure(found: list[Command], rounds: int, pycache: str, warm_up: bool = True) -> None:
    """`rounds` fresh processes of every command, in an order rotated each round.

    Every module's bytecode is cached in `pycache` (PYTHONPYCACHEPREFIX) by one unrecorded run
    of each command first, so that each run measures imports, not compiling: the yardstick's
    botocore comes with bytecode from pip, and Ferry's modules must too, whatever
    PYTHONDONTWRITEBYTECODE the caller has set."""
    drop = ("_X_AMZN_TRACE_ID", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
    base = {k: v for k, v in os.environ.items() if k not in drop}
    base["PYTHONPYCACHEPREFIX"] = pycache
    if warm_up:
        for command in found:
            child_cpu(command.argv, {**base, **command.env})
    for round_ in range(rounds):
        shift = round_ % len(found)
        for command in found[shift:] + found[:shift]:
            command.cpu.append(child_cpu(command.argv, {**base, **command.env}))


def verdict(ratio: float, target: float | None) -> str:
    if target is None:
        return "yardstick"
    return f"meets <= {target}x" if ratio <= target else f"over {target}x"


def table(found: list[Command]) -> list[str]:
    """The Markdown table: each command's CPU and its ratio to the yardstick's median."""
    yardstick = found[0].median
    lines = [
        "| command | CPU s, median | min | max | x botocore.session (median) | target |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for c in found:
        ratio = c.median / yardstick if yardstick else float("inf")
        lines.append(
            f"| `{c.name}` | {c.median:.3f} | {min(c.cpu):.3f} | {max(c.cpu):.3f} | {ratio:.2f} "
            f"| {verdict(ratio, c.target)} |"
        )
    return lines


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.1f}, {five:.1f}, {fifteen:.1f}"


def render(found: list[Command], rounds: int, argv: str, before: str, after: str) -> str:
    return "\n".join(
        [
            "# Start-up CPU beside botocore's own import (measured)",
            "",
            f"`{argv}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}; {before} before, {after} after.",
            "",
            f"Each command in a fresh process, {rounds} rounds in an order rotated from round to round; "
            "CPU seconds are user + system of the child (os.wait4). Ratios are to the median of "
            f"`{YARDSTICK}` in the same rounds. Targets: `--help` at most {HELP_TARGET}x, "
            f"each handler's import at most {HANDLER_TARGET}x (a Lambda's init phase, no trace "
            "header yet, PYTHONPATH=functions). Every module's bytecode is cached beforehand "
            "(PYTHONPYCACHEPREFIX, one unrecorded run of each command).",
            "",
            *table(found),
            "",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15, help="fresh processes of each command (default 15)")
    p.add_argument("--out", type=Path, default=RESULTS / "startup.md", help="the Markdown page to write")
    p.add_argument("--argv", default="make bench-startup", help="the command line named on the page")
    args = p.parse_args(argv)
    found = commands()
    before = load_average()
    with tempfile.TemporaryDirectory(prefix="bench-startup-pycache-") as pycache:
        measure(found, args.rounds, pycache)
    page = render(found, args.rounds, args.argv, before, load_average())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(page)
    print(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
