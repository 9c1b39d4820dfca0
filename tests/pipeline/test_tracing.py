"""The workers' X-Ray tracing: the handlers are traced, the S3 and DynamoDB calls are not.

Powertools' Tracer patches every library the X-Ray SDK supports (botocore included) unless told
otherwise ("By default, it patches all available libraries supported by X-Ray SDK", Tracer API
reference, docs.aws.amazon.com/powertools/python/latest/api/tracing/). A patched botocore
wraps every API call in a subsegment: per-request CPU on the copy workers' hottest path, where
one batch makes thousands of S3 requests. The check runs in a fresh interpreter that looks like
a Lambda (LAMBDA_TASK_ROOT set, so Powertools does not disable tracing), because
patching is process-wide and would leak into other tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json
import botocore.client
from aws_xray_sdk.core import patcher
import handlers.copy_batch, handlers.record_failure, handlers.prepare, handlers.finalize
from handlers import runtime
print(json.dumps({
    "patched": sorted(patcher._PATCHED_MODULES),
    "make_api_call": type(botocore.client.BaseClient._make_api_call).__name__,
    "tracer_disabled": runtime.tracer.disabled,
}))
"""


def test_the_workers_tracer_traces_handlers_without_patching_botocore() -> None:
    env = {
        **os.environ,
        "AWS_LAMBDA_FUNCTION_NAME": "ferry-copy-batch",
        "LAMBDA_TASK_ROOT": str(ROOT / "functions"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("functions",)),
    }
    for name in ("POWERTOOLS_TRACE_DISABLED", "AWS_SAM_LOCAL", "AWS_CHALICE_CLI_MODE"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout.strip().splitlines()[-1])

    assert probe["tracer_disabled"] is False, "the probe must look like a Lambda, or it proves nothing"
    assert probe["patched"] == [], f"X-Ray patched {probe['patched']}: every S3 request would be traced"
    assert probe["make_api_call"] == "function", "botocore's BaseClient._make_api_call is wrapped"
