"""Test support: the `ferry` command as a user runs it, in a process of its own, running this
checkout's code (`python -m ferry.cli` with this checkout's `functions` first on the path),
whichever installed copy the environment's `ferry` executable would import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FUNCTIONS = Path(__file__).resolve().parents[1] / "functions"


def ferry(
    *args: str, cwd: str | Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run `ferry ARGS...`; its exit code, stdout and stderr come back as text."""
    paths = [str(FUNCTIONS), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    return subprocess.run(
        [sys.executable, "-m", "ferry.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
    )
