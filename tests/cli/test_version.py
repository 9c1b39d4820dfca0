"""`ferry --version`: the installed package's version, cheaply (no botocore, boto3 or rich)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from test_start_up_imports import probe

FERRY = str(Path(sys.executable).with_name("ferry"))


def test_version_prints_the_installed_package_version_and_exits_0() -> None:
    run = subprocess.run([FERRY, "--version"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"ferry {version('ferry')}\n"
    assert run.stderr == ""


def test_version_loads_nothing_heavy() -> None:
    assert probe(["--version"]) == {"code": 0, "loaded": []}
