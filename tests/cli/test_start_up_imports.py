"""`ferry --help`, every command's `--help` and every usage error answer without loading
botocore, boto3, rich, the engine or the pipeline: a start-up that only prints text should not
pay for the S3 stack (about 0.2 s of CPU for botocore alone). `import ferry` is as light.

These check what is imported, not how long it takes (timings belong in `make bench-startup`).
Each case runs in a fresh interpreter, since a module imported once stays in `sys.modules`.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_usage_errors import ALL

# Top-level packages, and packages of Ferry's own, that a help text or a usage error never needs.
HEAVY = ("botocore", "boto3", "s3transfer", "awscrt", "urllib3", "rich", "ferry.engine", "ferry.pipeline")

PROBE = """
import json, sys
from ferry.cli.main import main
try:
    code = main(json.loads(sys.argv[1]))
except SystemExit as stop:
    code = stop.code
heavy = json.loads(sys.argv[2])
loaded = sorted({h for h in heavy for m in list(sys.modules) if m == h or m.startswith(h + ".")})
print(json.dumps({"code": code, "loaded": loaded}))
"""


def probe(argv: list[str]) -> dict[str, object]:
    """Run `ferry ARGV` in a fresh interpreter: its exit code and which heavy packages it loaded."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


HELPS = [[*path, "--help"] for path, _ in ALL]
USAGE_ERRORS = [[], *([*path, "--no-such-option"] for path, _ in ALL if path)]


@pytest.mark.parametrize("argv", HELPS, ids=[" ".join(a) for a in HELPS])
def test_help_loads_nothing_heavy(argv: list[str]) -> None:
    result = probe(argv)
    assert result == {"code": 0, "loaded": []}, f"ferry {' '.join(argv)}"


@pytest.mark.parametrize("argv", USAGE_ERRORS, ids=[" ".join(a) or "ferry" for a in USAGE_ERRORS])
def test_a_usage_error_loads_nothing_heavy(argv: list[str]) -> None:
    result = probe(argv)
    assert result == {"code": 1, "loaded": []}, f"ferry {' '.join(argv)}"


def test_import_ferry_is_light_and_its_public_names_still_import() -> None:
    code = (
        "import json, sys, ferry\n"
        "light = 'botocore' not in sys.modules\n"
        "from ferry import Copier, CopyPolicy, FileCheckpointStore, deadline_in\n"
        "print(json.dumps([light, Copier.__module__, sorted(set(ferry.__all__) - set(dir(ferry)))]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    light, module, missing = json.loads(done.stdout.strip().splitlines()[-1])
    assert light, "import ferry loaded botocore"
    assert module == "ferry.engine.strategies.copier"
    assert missing == []
