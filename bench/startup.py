"""`make bench-startup`: the CPU a fresh process spends starting up, beside botocore's own import.

What is measured, each in a fresh interpreter, side by side in one run, in two tables:

- here, in the venv's Python: `import botocore.session` (the yardstick: every S3 client pays
  it), `ferry --help` and `ferry copy --help` (target: at most 0.5x the yardstick);
- as Lambda runs them: the stack as `cdk synth` ships it (its code and layer assets, read-only,
  only the bytecode they hold; lambda_init.py), each Python function's handler module imported
  by the runtime's Python with the function's environment and Lambda's, tracing as deployed,
  no trace header yet (target: at most 1.5x `import botocore.session` with its bytecode, in the
  same Python, from the same layer). Lambda bills the init phase, so a handler's import is part
  of every cold start's cost; a module the assets hold no usable bytecode for is compiled at
  every one, and the table counts those.

CPU seconds (user + system) of each child come from `os.wait4`, its own rusage: on a shared
machine CPU time is steadier than wall time, but a loaded machine still inflates it (caches,
frequency), so the ratios to the yardstick measured in the same rounds are the figures to
read. Every round runs each command once, in an order rotated from round to round, so that a
burst of load falls on different commands; the median, min and max of the rounds are reported.
Writes bench/results/startup.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench import lambda_init

REPO = Path(__file__).resolve().parents[1]
FUNCTIONS = REPO / "functions"
RESULTS = REPO / "bench" / "results"
# Added to cdk.json's settings for the bench's synth: a schedule and a replication, so that
# their starter functions are measured beside the pipeline's five.
STACK_CONFIG = REPO / "bench" / "startup_stack.json"
YARDSTICK = "import botocore.session"
HELP_TARGET, HANDLER_TARGET = 0.5, 1.5
HERE, LAMBDA = "here", "lambda"  # the two tables, each with its own yardstick
# Counts the modules an import compiles from source (what has no bytecode it can use).
COMPILED_PROBE = r"""
import importlib._bootstrap_external as external, json, sys
compiled = []
original = external.SourceLoader.source_to_code
def counted(self, data, path, *args, **kwargs):
    compiled.append(path)
    return original(self, data, path, *args, **kwargs)
external.SourceLoader.source_to_code = counted
__import__(sys.argv[1])
print(json.dumps(compiled))
"""


@dataclass
class Command:
    """One start-up to measure: its argv, extra environment, and the target as a ratio to the
    yardstick of its table (None for the yardstick itself). A command that does not `inherit`
    runs with its `env` alone (a Lambda's, not this machine's)."""

    name: str
    argv: list[str]
    target: float | None
    env: dict[str, str] = field(default_factory=dict)
    cpu: list[float] = field(default_factory=list)
    table: str = HERE
    inherit: bool = True
    module: str | None = None  # what it imports, for the count of modules compiled at init
    compiled: int | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.cpu)


def commands(python: str = sys.executable) -> list[Command]:
    """This machine's rows: the yardstick first, then the two help texts."""
    ferry = Path(python).with_name("ferry")
    ferry_argv = [str(ferry)] if ferry.exists() else [python, "-m", "ferry.cli"]
    return [
        Command(YARDSTICK, [python, "-c", "import botocore.session"], None),
        Command("ferry --help", [*ferry_argv, "--help"], HELP_TARGET),
        Command("ferry copy --help", [*ferry_argv, "copy", "--help"], HELP_TARGET),
    ]


def lambda_commands(
    functions: list[lambda_init.LambdaFunction],
    deployment: lambda_init.Deployment,
    python: str,
    pycache: str,
) -> list[Command]:
    """The Lambda rows: the yardstick in the runtime's Python, from the first function's layer,
    with its bytecode (cached in `pycache` by the unrecorded first run, as a pip install would
    have it), then each function's handler module as its init imports it."""
    site = deployment.site(functions[0])
    yardstick_env = {"PATH": os.environ.get("PATH", ""), "LANG": "en_US.UTF-8", "PYTHONPATH": str(site)}
    yardstick_env["PYTHONPYCACHEPREFIX"] = pycache
    found = [
        Command(
            YARDSTICK,
            [python, "-c", "import botocore.session"],
            None,
            yardstick_env,
            table=LAMBDA,
            inherit=False,
        )
    ]
    for function in functions:
        found.append(
            Command(
                f"{re.sub(r'[0-9A-F]{8}$', '', function.name)}: import {function.module}",
                [python, "-c", f"import {function.module}"],
                HANDLER_TARGET,
                lambda_init.environment(function, deployment),
                table=LAMBDA,
                inherit=False,
                module=function.module,
            )
        )
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

    def env(command: Command) -> dict[str, str]:
        return {**base, **command.env} if command.inherit else command.env

    if warm_up:
        for command in found:
            child_cpu(command.argv, env(command))
    for round_ in range(rounds):
        shift = round_ % len(found)
        for command in found[shift:] + found[:shift]:
            command.cpu.append(child_cpu(command.argv, env(command)))


def count_compiled(found: list[Command]) -> None:
    """How many modules each Lambda row's import compiles from source (one unrecorded run each,
    with the row's own environment): 0 when the assets hold bytecode for everything it loads."""
    for command in found:
        if command.module is None:
            continue
        argv = [command.argv[0], "-c", COMPILED_PROBE, command.module]
        done = subprocess.run(argv, env=command.env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"{command.name}: {done.stderr[-600:]}")
        command.compiled = len(json.loads(done.stdout.splitlines()[-1]))


def verdict(ratio: float, target: float | None) -> str:
    if target is None:
        return "yardstick"
    return f"meets <= {target}x" if ratio <= target else f"over {target}x"


def table(found: list[Command]) -> list[str]:
    """The Markdown table: each command's CPU and its ratio to the yardstick's median (the
    first command); with a column of modules compiled at init where it was counted."""
    yardstick = found[0].median
    counted = any(c.compiled is not None for c in found)
    head = "| command | CPU s, median | min | max | x botocore.session (median) | target |"
    lines = [
        head + (" modules compiled at init |" if counted else ""),
        "| --- " * (7 if counted else 6) + "|",
    ]
    for c in found:
        ratio = c.median / yardstick if yardstick else float("inf")
        line = (
            f"| `{c.name}` | {c.median:.3f} | {min(c.cpu):.3f} | {max(c.cpu):.3f} | {ratio:.2f} "
            f"| {verdict(ratio, c.target)} |"
        )
        if counted:
            line += f" {'' if c.compiled is None else c.compiled} |"
        lines.append(line)
    return lines


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.1f}, {five:.1f}, {fifteen:.1f}"


@dataclass
class LambdaSetup:
    """What the Lambda table measured: the runtime's Python and the assets."""

    python: str
    release: str
    assets: list[str]  # asset folder names (asset.<hash>)
    swapped: list[str]


def render(
    found: list[Command], rounds: int, argv: str, before: str, after: str, setup: LambdaSetup | None = None
) -> str:
    here = [c for c in found if c.table == HERE]
    lines = [
        "# Start-up CPU beside botocore's own import (measured)",
        "",
        f"`{argv}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{os.cpu_count()} CPUs; {before} before, {after} after.",
        "",
        f"Each command in a fresh process, {rounds} rounds in an order rotated from round to round "
        "(both tables' commands together); CPU seconds are user + system of the child (os.wait4). "
        f"Ratios are to the median of `{YARDSTICK}` in the same rounds and the same Python.",
        "",
        f"## Here: the venv's Python {platform.python_version()}",
        "",
        f"Target: `--help` at most {HELP_TARGET}x. Every module's bytecode is cached beforehand "
        "(PYTHONPYCACHEPREFIX, one unrecorded run of each command).",
        "",
        *table(here),
        "",
    ]
    lambdas = [c for c in found if c.table == LAMBDA]
    if lambdas and setup is not None:
        lines += [
            f"## As Lambda runs them: Python {setup.release}",
            "",
            f"The synthesized assets ({', '.join(setup.assets)}), read-only, with only the bytecode "
            "they ship; each function's environment from the template and Lambda's own (tracing as "
            "deployed, no trace header yet); "
            f"{'; '.join(setup.swapped) if setup.swapped else 'no compiled extension replaced'}. "
            f"Target: each handler's import at most {HANDLER_TARGET}x `{YARDSTICK}` with its "
            f"bytecode, from the same layer. Runtime Python: `{setup.python}`.",
            "",
            *table(lambdas),
            "",
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15, help="fresh processes of each command (default 15)")
    p.add_argument("--out", type=Path, default=RESULTS / "startup.md", help="the Markdown page to write")
    p.add_argument("--argv", default="make bench-startup", help="the command line named on the page")
    p.add_argument("--cdk-out", type=Path, help="an existing `cdk synth` output (default: synthesize one)")
    p.add_argument(
        "--runtime-python", help="the runtime's interpreter (default: found as the synth finds it)"
    )
    args = p.parse_args(argv)
    found = commands()
    before = load_average()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as work_dir:
        work = Path(work_dir)
        cdk_out = args.cdk_out or lambda_init.synthesize(work / "cdk.out", STACK_CONFIG)
        functions = lambda_init.read_functions(cdk_out)
        python, release = runtime_python(functions[0].runtime, args.runtime_python)
        deployment = lambda_init.lay_out(functions, work / "lambda")
        try:
            (work / "pycache").mkdir()
            found += lambda_commands(functions, deployment, python, str(work / "pycache"))
            shipped = lambda_init.files_under(deployment.root)
            measure(found, args.rounds, str(work / "pycache"))
            count_compiled(found)
            written = lambda_init.files_under(deployment.root) - shipped
            if written:
                raise RuntimeError(f"the runs wrote {sorted(written)[:5]} into the read-only assets: void")
        finally:
            lambda_init.release(deployment)
        assets = sorted(
            {f.code.name for f in functions} | {layer.name for f in functions for layer in f.layers}
        )
        setup = LambdaSetup(python, release, assets, deployment.swapped)
    page = render(found, args.rounds, args.argv, before, load_average(), setup)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(page)
    print(page)
    return 0


def runtime_python(runtime: str, named: str | None) -> tuple[str, str]:
    """(the interpreter, its release): the one named, else the one the synth would use."""
    for path in (REPO / "cdk", REPO / "functions"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    from ferry_cdk import bytecode

    environ = {**os.environ, bytecode.RUNTIME_PYTHON_VARIABLE: named} if named else os.environ
    found = bytecode.find_runtime_python(runtime, environ)
    if found is None:
        raise SystemExit(f"no {runtime} interpreter here: install it, or name it with --runtime-python")
    return found.executable, found.release


if __name__ == "__main__":
    sys.exit(main())
