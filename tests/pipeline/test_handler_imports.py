"""Each Lambda handler's import (its init phase, which Lambda bills) loads only what the handler
needs: not the X-Ray SDK while tracing is off (Powertools' Tracer imports it on construction,
about 0.1 s of CPU, even when disabled), not the copy engine where nothing is copied, and not
boto3: the handlers make botocore clients, as the CLI does, because boto3 brings s3transfer,
and s3transfer multiprocessing (together about a tenth of `import botocore.session`'s CPU);
nor the parsers of the stack's settings (schedules, replications, time zones).

What is imported, not how long it takes: timings are `make bench-startup`'s. Each handler is
imported in a fresh interpreter that looks like a Lambda (LAMBDA_TASK_ROOT set) at init, when
no trace header is set yet.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = sorted(
    p.stem
    for p in (ROOT / "functions" / "handlers").glob("*.py")
    if p.stem not in ("__init__", "runtime", "tracing")  # what the handlers share
)
# Handlers that never copy (one starts executions, one lists versions): they need none of the copy engine.
NOT_COPYING = ("start_scheduled", "list_versions")

PROBE = """
import importlib, json, sys
importlib.import_module("handlers." + sys.argv[1])
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules}
                        | {m for m in sys.modules if m.startswith(("ferry.", "aws_lambda_powertools."))})))
"""


def lambda_env(**extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "AWS_LAMBDA_FUNCTION_NAME": "ferry-test",
        "LAMBDA_TASK_ROOT": str(ROOT / "functions"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "PYTHONPATH": str(ROOT / "functions"),
        **extra,
    }
    for name in ("_X_AMZN_TRACE_ID", "POWERTOOLS_TRACE_DISABLED", "AWS_SAM_LOCAL", "AWS_CHALICE_CLI_MODE"):
        if name not in extra:
            env.pop(name, None)
    return env


def loaded_by(handler: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, handler],
        env=lambda_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_every_handler_is_checked() -> None:
    assert {"copy_batch", "prepare", "finalize", "record_failure", "start_replication"} <= set(HANDLERS)
    assert set(NOT_COPYING) <= set(HANDLERS)


@pytest.mark.parametrize("handler", HANDLERS)
def test_a_handler_imports_no_x_ray_sdk_before_a_traced_invocation(handler: str) -> None:
    assert "aws_xray_sdk" not in loaded_by(handler)


@pytest.mark.parametrize("handler", NOT_COPYING)
def test_a_handler_that_copies_nothing_imports_no_engine(handler: str) -> None:
    loaded = loaded_by(handler)
    assert not {"ferry.engine.strategies.copier", "ferry.pipeline.batches"} & loaded, sorted(loaded)


@pytest.mark.parametrize("handler", ["copy_batch", "copy_large", "record_failure"])
def test_a_copying_handler_imports_no_version_engine_until_an_all_versions_job_copies(handler: str) -> None:
    """Only all_versions jobs copy histories: the batch path loads the history machinery at
    their copy (batches.HistoryCopy), so an object job's cold start does not pay for it."""
    loaded = loaded_by(handler)
    assert "ferry.pipeline.batches" in loaded or handler == "record_failure"
    assert not {"ferry.pipeline.history_copy", "ferry.engine.versions.version_copy"} & loaded, sorted(loaded)


@pytest.mark.parametrize("handler", HANDLERS)
def test_a_handler_imports_neither_boto3_nor_s3transfer(handler: str) -> None:
    loaded = loaded_by(handler)
    assert not {"boto3", "s3transfer", "multiprocessing"} & loaded, sorted(loaded)


@pytest.mark.parametrize("handler", sorted(set(HANDLERS) - {"start_scheduled", "start_replication"}))
def test_a_handler_imports_no_parser_of_the_stacks_settings(handler: str) -> None:
    """The schedules' and replications' parsers (and zoneinfo) are the CDK app's and the
    starters'; the workers read their settings from their environment."""
    loaded = loaded_by(handler)
    assert not {"zoneinfo", "ferry.pipeline.replication.config"} & loaded, sorted(loaded)


def test_the_replication_starter_reads_its_batch_without_powertools_batch_utility() -> None:
    """Powertools' batch utility (with asyncio, for its async processor) and event data classes
    cost the starter's init more than all of Ferry's own modules; reading SQS records and
    reporting the failed ones is a loop (ferry.pipeline.replication.starter)."""
    loaded = loaded_by("start_replication")
    unwanted = {
        "asyncio",
        "aws_lambda_powertools.utilities.batch",
        "aws_lambda_powertools.utilities.data_classes",
    }
    assert not unwanted & loaded, sorted(m for m in loaded if "powertools" in m or m == "asyncio")
