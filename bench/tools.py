"""Each tool's command line for each case, and how to ask it its version.

Every tool gets the same environment (credentials, region, no AWS_CA_BUNDLE, which breaks
rclone and means nothing over plain http) and copies into a fresh destination prefix, so
every run really copies and no tool can skip work another did.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .data import DST_BUCKET, SRC_BUCKET
from .servers import ACCESS_KEY, REGION, SECRET_KEY

Command = list[str]


@dataclass
class Binaries:
    """Paths of the tools; None when a tool could not be installed (its rows say so)."""

    ferry: str
    s5cmd: str | None
    rclone: str | None
    aws: str | None


@dataclass
class Invocation:
    """What one run executes: one pipeline, or many small ones `concurrency` at a time."""

    pipelines: list[list[Command]]
    concurrency: int = 1

    @property
    def shown(self) -> str:
        first = " | ".join(" ".join(c) for c in self.pipelines[0])
        if len(self.pipelines) == 1:
            return first
        return f"{first}  (one per object, {self.concurrency} at a time)"


@dataclass
class Variant:
    """One tool at one setting within a case; `build(run_prefix)` gives that run's commands."""

    tool: str
    setting: str
    build: Callable[[str], Invocation]
    env: dict[str, str] = field(default_factory=dict)
    note: str | None = None


def base_env(work: Path, aws: str | None = None) -> dict[str, str]:
    """Credentials, region and empty configs for every tool; Python's bytecode cached under
    `work` (PYTHONDONTWRITEBYTECODE dropped), as a pip install leaves it: otherwise the Python
    tools (Ferry, the AWS CLI) would compile their own modules again in every measured run.
    PYTHONPYCACHEPREFIX hides the bytecode pip wrote beside the sources, so the modules each
    tool loads are compiled into it here, before any run: else the first measured run of each
    (Ferry's: 2-4 s more than the next) pays for compiling botocore."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "RCLONE_")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    compile_bytecode(env, aws)
    env.update(
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
        AWS_REGION=REGION,
        AWS_DEFAULT_REGION=REGION,
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(work / "aws-config-default"),
        AWS_SHARED_CREDENTIALS_FILE=str(work / "aws-credentials-none"),
        RCLONE_CONFIG=str(work / "rclone.conf"),
        NO_PROXY="127.0.0.1,localhost",
    )
    (work / "aws-config-default").write_text("[default]\n")
    (work / "rclone.conf").write_text("")
    return env


# What Ferry's commands load, so that their modules (and botocore's, rich's) are compiled.
FERRY_COMMAND_MODULES = (
    "ferry.cli.commands.copy_command",
    "ferry.cli.commands.local_copy",
    "ferry.cli.commands.local_sync",
    "ferry.cli.commands.sync_command",
    "ferry.cli.commands.check_command",
    "ferry.cli.commands.run_command",
)


def compile_bytecode(env: dict[str, str], aws: str | None) -> None:
    """Ferry's own package, the modules its commands import, and the AWS CLI's whole install
    (its commands load by name), compiled into env's PYTHONPYCACHEPREFIX."""
    functions = Path(__file__).resolve().parents[1] / "functions"
    compileall = [sys.executable, "-m", "compileall", "-q", str(functions)]
    subprocess.run(compileall, env=env, check=True, stdout=subprocess.DEVNULL)
    imports = "; ".join(f"import {module}" for module in FERRY_COMMAND_MODULES)
    subprocess.run([sys.executable, "-c", imports], env=dict(env, PYTHONPATH=str(functions)), check=True)
    if aws:
        venv = Path(aws).resolve().parent.parent
        for site in venv.glob("lib/python3*/site-packages"):
            compileall = [str(venv / "bin" / "python"), "-m", "compileall", "-q", "-j", "0", str(site)]
            subprocess.run(compileall, env=env, check=True, stdout=subprocess.DEVNULL)


def rclone_env(url: str, server: str) -> dict[str, str]:
    """Two remotes on the same server: `src:` to `src:` copies server-side, `src:` to `dst:`
    streams through rclone (it copies server-side only within one remote's configuration)."""
    env: dict[str, str] = {}
    for remote in ("SRC", "DST"):
        prefix = f"RCLONE_CONFIG_{remote}_"
        env.update(
            {
                prefix + "TYPE": "s3",
                prefix + "PROVIDER": "Minio" if server == "minio" else "Other",
                prefix + "ENV_AUTH": "false",
                prefix + "ACCESS_KEY_ID": ACCESS_KEY,
                prefix + "SECRET_ACCESS_KEY": SECRET_KEY,
                prefix + "ENDPOINT": url,
                prefix + "REGION": REGION,
                prefix + "NO_CHECK_BUCKET": "true",
            }
        )
    return env


def aws_env(work: Path, concurrency: int) -> dict[str, str]:
    """The AWS CLI takes its concurrency from a config file only."""
    path = work / f"aws-config-{concurrency}"
    path.write_text(f"[default]\ns3 =\n    max_concurrent_requests = {concurrency}\n")
    return {"AWS_CONFIG_FILE": str(path)}


def version(command: Command) -> str:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unknown ({error})"
    text = (result.stdout or result.stderr).strip().splitlines()
    return text[0].strip() if text else "unknown"


def versions(bins: Binaries, ferry_commit: str) -> dict[str, str]:
    try:
        ferry_version = importlib.metadata.version("ferry")
    except importlib.metadata.PackageNotFoundError:
        ferry_version = "unknown"
    found = {"ferry": f"ferry {ferry_version} (git {ferry_commit})"}
    if bins.s5cmd:
        found["s5cmd"] = version([bins.s5cmd, "version"])
    if bins.rclone:
        found["rclone"] = version([bins.rclone, "version"])
    if bins.aws:
        found["aws"] = version([bins.aws, "--version"])
    return found


class Commands:
    """Command lines for one server; the cases in `cases.py` choose which to run."""

    def __init__(self, bins: Binaries, url: str) -> None:
        self.bins, self.url = bins, url

    # -- Ferry ---------------------------------------------------------------------------------

    def ferry(self, src: str, dst: str, *flags: str) -> Command:
        return [self.bins.ferry, "copy", src, dst, "--endpoint-url", self.url, "--quiet", *flags]

    # -- s5cmd ---------------------------------------------------------------------------------

    def s5cmd(self, *args: str) -> Command:
        assert self.bins.s5cmd
        return [self.bins.s5cmd, "--endpoint-url", self.url, *args]

    def s5cmd_stream(self, src_key: str, dst_key: str, *flags: str) -> list[Command]:
        return [
            self.s5cmd("cat", *flags, f"s3://{SRC_BUCKET}/{src_key}"),
            self.s5cmd("pipe", *flags, f"s3://{DST_BUCKET}/{dst_key}"),
        ]

    # -- rclone --------------------------------------------------------------------------------

    def rclone(self, *args: str) -> Command:
        assert self.bins.rclone
        return [self.bins.rclone, *args]

    # -- AWS CLI -------------------------------------------------------------------------------

    def aws(self, *args: str) -> Command:
        assert self.bins.aws
        return [self.bins.aws, "s3", *args, "--endpoint-url", self.url, "--only-show-errors"]
