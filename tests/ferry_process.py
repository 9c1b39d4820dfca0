"""Test support: the `ferry` command as a user runs it, in a process of its own, running this
checkout's code (`python -m ferry.cli`; tests/conftest.py puts this checkout's `functions`
first on every test process's PYTHONPATH), whichever installed copy the environment's `ferry`
executable would import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def ferry(
    *args: str, cwd: str | Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run `ferry ARGS...`; its exit code, stdout and stderr come back as text."""
    return subprocess.run(
        [sys.executable, "-m", "ferry.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
