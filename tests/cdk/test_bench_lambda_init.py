"""`make bench-startup`'s Lambda table measures what Lambda would run (bench/lambda_init.py):
the synthesized assets, read-only, this machine's build of their compiled extensions, each
function's environment; and a handler's import there compiles nothing from source and writes
nothing. The synth is the session's (`conftest.py`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from cdk_support import REPO, resources

sys.path.insert(0, str(REPO))  # the repository root, for `bench`

from bench import lambda_init, startup  # noqa: E402


@pytest.fixture(scope="module")
def laid_out(synth: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    functions = lambda_init.read_functions(synth.out)
    deployment = lambda_init.lay_out(functions, tmp_path_factory.mktemp("lambda") / "root")
    try:
        yield SimpleNamespace(functions=functions, deployment=deployment)
    finally:
        lambda_init.release(deployment)


def test_every_python_function_of_the_template_is_read_with_its_assets(
    synth: SimpleNamespace, laid_out: SimpleNamespace
) -> None:
    python = {
        lid: r for lid, r in resources(synth.template, "AWS::Lambda::Function").items()
        if r["Properties"]["Runtime"].startswith("python")
    }  # fmt: skip
    found = {f.name: f for f in laid_out.functions}
    assert set(found) == set(python) and len(found) == 5
    copy_batch = next(f for f in laid_out.functions if f.module == "handlers.copy_batch")
    assert copy_batch.runtime == "python3.13" and copy_batch.tracing and copy_batch.memory_mb == 1769
    assert copy_batch.code.name.startswith("asset.") and len(copy_batch.layers) == 1
    # Refs get names of their shape; plain values pass as they are.
    assert copy_batch.variables["FERRY_TABLE"].startswith("ledger")
    assert copy_batch.variables["POWERTOOLS_SERVICE_NAME"] == "ferry"


def test_the_environment_is_the_functions_and_lambdas_with_tracing_as_deployed(
    laid_out: SimpleNamespace,
) -> None:
    function = laid_out.functions[0]
    env = lambda_init.environment(function, laid_out.deployment)
    task = laid_out.deployment.tasks[function.code]
    assert env["LAMBDA_TASK_ROOT"] == str(task) and env["PYTHONPATH"].split(":")[0] == str(task)
    assert env["AWS_EXECUTION_ENV"] == "AWS_Lambda_python3.13" and env["AWS_XRAY_DAEMON_ADDRESS"]
    assert "_X_AMZN_TRACE_ID" not in env and "PYTHONPYCACHEPREFIX" not in env
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert {k: env[k] for k in function.variables} == function.variables


def test_the_layer_holds_this_machines_extensions_and_the_tree_is_read_only(
    laid_out: SimpleNamespace,
) -> None:
    site = laid_out.deployment.site(laid_out.functions[0])
    host = lambda_init.host_machine()
    extensions = sorted(site.rglob("*.so"))
    assert {p.name.split(".")[0] for p in extensions} >= {"_awscrt", "_wrappers", "zlib_ng"}
    assert {lambda_init.elf_machine(p) for p in extensions} == {host}
    if host != "aarch64":  # the layer is built for arm64 by default
        assert {s.split()[0] for s in laid_out.deployment.swapped} == {"awscrt", "wrapt", "zlib_ng"}
    assert not os.stat(site / "botocore" / "session.py").st_mode & 0o222
    assert not os.stat(site).st_mode & 0o222


def test_a_handlers_import_compiles_nothing_and_writes_nothing(laid_out: SimpleNamespace) -> None:
    """The deployed bytecode is all the import needs: the count of modules compiled from source
    is what `make bench-startup` reports beside each handler's CPU."""
    python = startup.runtime_python("python3.13", None)[0]
    (function,) = [f for f in laid_out.functions if f.module == "handlers.copy_batch"]
    before = lambda_init.files_under(laid_out.deployment.root)
    done = subprocess.run(
        [python, "-c", startup.COMPILED_PROBE, function.module],
        env=lambda_init.environment(function, laid_out.deployment),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []
    assert lambda_init.files_under(laid_out.deployment.root) == before


def test_an_intrinsic_without_a_plain_value_is_an_error_not_a_guess() -> None:
    resources_ = {"Queue": {"Type": "AWS::SQS::Queue"}, "Bucket": {"Type": "AWS::S3::Bucket"}}
    assert (
        lambda_init.plain({"Ref": "Queue"}, resources_)
        == "https://sqs.us-east-1.amazonaws.com/123456789012/Queue"
    )
    assert lambda_init.plain({"Fn::Join": ["/", [{"Ref": "Bucket"}, "jobs"]]}, resources_) == "bucket/jobs"
    assert lambda_init.plain({"Fn::Sub": "arn:${AWS::Partition}:s3:::x"}, resources_) == "arn:aws:s3:::x"
    with pytest.raises(RuntimeError, match="cannot give a plain value"):
        lambda_init.plain({"Fn::ImportValue": "Elsewhere"}, resources_)
