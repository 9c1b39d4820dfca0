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

# A handler is invoked three times in a process that looks like a Lambda: with no trace header,
# with an unsampled one, then with a sampled one. A UDP socket stands in for the X-Ray daemon
# (AWS_XRAY_DAEMON_ADDRESS, as Lambda sets it), so what X-Ray would record is read back.
PROBE = """
import json, os, socket, sys
from types import SimpleNamespace

daemon = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
daemon.bind(("127.0.0.1", 0))
daemon.settimeout(10)
os.environ["AWS_XRAY_DAEMON_ADDRESS"] = "127.0.0.1:%d" % daemon.getsockname()[1]

import botocore.client
import handlers.copy_batch, handlers.record_failure, handlers.prepare, handlers.finalize
from handlers import prepare, runtime

prepare.services = lambda: None  # an empty event is refused before any service is used
context = SimpleNamespace(
    function_name="ferry-prepare",
    memory_limit_in_mb=256,
    invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:ferry-prepare",
    aws_request_id="1",
    get_remaining_time_in_millis=lambda: 300_000,
)
loaded = {}
for step, header in (
    ("no header", None),
    ("unsampled", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0"),
    ("sampled", "Root=1-5759e988-bd862e3fe1be46a994272794;Parent=53995c3f42cd8ad9;Sampled=1"),
):
    if header:
        os.environ["_X_AMZN_TRACE_ID"] = header
    answer = prepare.handler({}, context)
    assert "rejected" in answer, answer
    loaded[step] = "aws_xray_sdk" in sys.modules

sent = []
while loaded["sampled"] and not any(s.get("name") == "## handler" for s in sent):
    sent.append(json.loads(daemon.recv(65536).decode().split("\\n", 1)[1]))
handler = next((s for s in sent if s.get("name") == "## handler"), {})

from aws_xray_sdk.core import patcher
print(json.dumps({
    "loaded": loaded,
    "annotations": handler.get("annotations"),
    "trace_id": handler.get("trace_id"),
    "patched": sorted(patcher._PATCHED_MODULES),
    "make_api_call": type(botocore.client.BaseClient._make_api_call).__name__,
    "tracer_disabled": runtime.tracer.tracer.disabled if runtime.tracer.tracer else None,
}))
"""


def probe(**env_extra: str) -> dict:
    env = {
        **os.environ,
        "AWS_LAMBDA_FUNCTION_NAME": "ferry-prepare",
        "LAMBDA_TASK_ROOT": str(ROOT / "functions"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("functions",)),
    }
    for name in ("POWERTOOLS_TRACE_DISABLED", "AWS_SAM_LOCAL", "AWS_CHALICE_CLI_MODE", "_X_AMZN_TRACE_ID"):
        env.pop(name, None)
    env.update(env_extra)
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_workers_tracer_traces_handlers_without_patching_botocore() -> None:
    probe_ = probe()

    assert probe_["tracer_disabled"] is False, "the probe must look like a Lambda, or it proves nothing"
    assert probe_["trace_id"] == "1-5759e988-bd862e3fe1be46a994272794", "the sampled invocation is traced"
    assert probe_["patched"] == [], f"X-Ray patched {probe_['patched']}: every S3 request would be traced"
    assert probe_["make_api_call"] == "function", "botocore's BaseClient._make_api_call is wrapped"


def test_the_x_ray_sdk_is_imported_by_the_first_sampled_invocation_only() -> None:
    probe_ = probe()

    assert probe_["loaded"] == {"no header": False, "unsampled": False, "sampled": True}
    # The third invocation of the process is not its cold start, though the Tracer's first.
    assert probe_["annotations"] == {"ColdStart": False, "Service": "ferry"}


def test_tracing_turned_off_imports_no_x_ray_sdk_even_for_a_sampled_request() -> None:
    probe_ = probe(POWERTOOLS_TRACE_DISABLED="true")

    assert probe_["loaded"] == {"no header": False, "unsampled": False, "sampled": False}
    assert probe_["tracer_disabled"] is None


def test_only_a_sampled_header_with_a_root_and_a_parent_is_traced() -> None:
    from handlers.tracing import sampled, tracing_on

    header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a:0"
    assert sampled(header)
    assert not sampled(header.replace("Sampled=1", "Sampled=0"))
    assert not sampled("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1")  # the SDK sends no dummy
    assert not sampled(None) and not sampled("")
    lambda_ = {"LAMBDA_TASK_ROOT": "/var/task", "_X_AMZN_TRACE_ID": header}
    assert tracing_on(lambda_)
    assert not tracing_on({**lambda_, "POWERTOOLS_TRACE_DISABLED": "1"})
    assert not tracing_on({**lambda_, "AWS_SAM_LOCAL": "true"})
    assert not tracing_on({"_X_AMZN_TRACE_ID": header})  # not in a Lambda: Powertools' rule too
