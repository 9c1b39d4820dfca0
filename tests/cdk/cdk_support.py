"""Helpers for the CDK tests: read a synthesized template as plain values.

CloudFormation intrinsics (Ref, Fn::GetAtt, Fn::Join, Fn::Sub) are replaced by fake but
well-formed values (ARNs in account 123456789012, us-east-1), so that the state machine
definition and the IAM policies can be inspected, and validated, as ordinary JSON.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO / "functions", REPO / "cdk"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

NODE_BIN = REPO / "node_modules" / ".bin"
ELF_MACHINE = {"arm64": 0xB7, "x86_64": 0x3E}  # e_machine: EM_AARCH64, EM_X86_64


def npx(tool: str) -> str:
    path = NODE_BIN / tool
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make test` (it runs `npm ci`), or `npm ci` once")
    return str(path)


def run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """A command in the repository, without the caller's AWS and CDK settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(kwargs.pop("env", {}))  # type: ignore[arg-type]
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, env=env, timeout=600, **kwargs)


ACCOUNT, REGION, PARTITION = "123456789012", "us-east-1", "aws"
PSEUDO = {
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::Partition": PARTITION,
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "Ferry",
}

# The contexts the tests build the stack with: every kind of location (a prefix, a whole
# bucket, a prefix with characters IAM would read as wildcards), KMS keys on both sides, and
# limits no default has, so that a number found in the template can only come from here.
TEST_CONTEXT: dict[str, Any] = {
    "sources": [
        {"bucket": "src-bucket", "prefix": "data/"},
        {"bucket": "src-bucket", "prefix": "odd*?$/"},
        {"bucket": "src-whole"},
    ],
    "destinations": [{"bucket": "dst-bucket", "prefix": "backup/", "owner": "222233334444"}],
    "manifests": [{"bucket": "inventory-bucket", "prefix": "inventory/", "owner": "555566667777"}],
    "source_kms_key_arns": ["arn:aws:kms:us-east-1:111111111111:key/source-key"],
    "manifest_kms_key_arns": ["arn:aws:kms:us-east-1:555566667777:key/inventory-key"],
    "destination_kms_key_arns": ["arn:aws:kms:eu-west-1:222222222222:key/destination-key"],
    "lambda_memory_mb": 3008,
    "max_items_per_batch": 200,  # the config file below overrides it
    "max_input_bytes_per_batch": "54KiB",
    "max_concurrency": 13,
    "tolerated_failure_percentage": 17,
    "fargate_max_concurrency": 11,
    "large_object_threshold": "3GiB",
    "deadline_margin_seconds": 77,
    "max_passes": 19,
    "checkpoint_ttl_days": 4,
    "fargate_cpu": 1024,
    "fargate_memory_mb": 3072,
    "fargate_spot": True,
    "log_retention_days": 14,
    "report_retention_days": 45,
}
TEST_CONFIG_FILE: dict[str, Any] = {"max_items_per_batch": 37, "fargate_spot": False}


def load_app_module() -> Any:
    """cdk/app.py as a module (its name, `app`, is too generic to import by)."""
    spec = importlib.util.spec_from_file_location("ferry_cdk_app", REPO / "cdk" / "app.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def resource_type(template: dict[str, Any], logical_id: str) -> str:
    return template["Resources"].get(logical_id, {}).get("Type", "")


def plain(node: Any, template: dict[str, Any]) -> Any:
    """`node` with every intrinsic replaced by a fake value of the right shape."""
    if isinstance(node, list):
        return [plain(n, template) for n in node]
    if not isinstance(node, dict):
        return node
    if "Ref" in node:
        return _ref(node["Ref"], template)
    if "Fn::GetAtt" in node:
        logical_id, attribute = node["Fn::GetAtt"]
        return _get_att(logical_id, attribute, template)
    if "Fn::Join" in node:
        delimiter, items = node["Fn::Join"]
        return delimiter.join(str(plain(i, template)) for i in items)
    if "Fn::Sub" in node:
        return re.sub(r"\$\{([^}]+)\}", lambda m: PSEUDO.get(m.group(1), m.group(1)), node["Fn::Sub"])
    return {k: plain(v, template) for k, v in node.items()}


def _ref(name: str, template: dict[str, Any]) -> str:
    if name in PSEUDO:
        return PSEUDO[name]
    kind = resource_type(template, name)
    if kind == "AWS::ECS::TaskDefinition":
        return f"arn:aws:ecs:{REGION}:{ACCOUNT}:task-definition/{name}:1"
    if kind == "AWS::EC2::Subnet":
        return f"subnet-{name.lower()[-8:]}"
    return name.lower()  # bucket, table, cluster, log group names


def _get_att(logical_id: str, attribute: str, template: dict[str, Any]) -> str:
    kind = resource_type(template, logical_id)
    name = logical_id.lower()
    if attribute == "Arn":
        return {
            "AWS::Lambda::Function": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}",
            "AWS::ECS::Cluster": f"arn:aws:ecs:{REGION}:{ACCOUNT}:cluster/{name}",
            "AWS::S3::Bucket": f"arn:aws:s3:::{name}",
            "AWS::DynamoDB::Table": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}",
            "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{name}",
            "AWS::Logs::LogGroup": f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}:*",
            "AWS::Lambda::LayerVersion": f"arn:aws:lambda:{REGION}:{ACCOUNT}:layer:{name}:1",
        }.get(kind, f"arn:aws:unknown:{REGION}:{ACCOUNT}:{name}")
    if attribute == "GroupId":
        return f"sg-{name[-8:]}"
    return f"{name}.{attribute.lower()}"


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {lid: r for lid, r in template["Resources"].items() if r["Type"] == kind}


def only(template: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    found = resources(template, kind)
    assert len(found) == 1, f"expected one {kind}, found {sorted(found)}"
    return next(iter(found.items()))


def definition(template: dict[str, Any]) -> dict[str, Any]:
    """The state machine's definition as plain JSON (tokens replaced by fake ARNs)."""
    _, machine = only(template, "AWS::StepFunctions::StateMachine")
    return json.loads(plain(machine["Properties"]["DefinitionString"], template))


def states(machine: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every state at every depth (Map item processors included)."""
    for name, state in machine.get("States", {}).items():
        yield name, state
        for key in ("ItemProcessor", "Iterator"):
            if isinstance(state.get(key), dict):
                yield from states(state[key])
        for branch in state.get("Branches", []):
            yield from states(branch)


def statements(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(policy logical id, statement with plain values) for every IAM policy statement."""
    for lid, policy in resources(template, "AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            yield lid, plain(statement, template)
    for lid, role in resources(template, "AWS::IAM::Role").items():
        for inline in role["Properties"].get("Policies", []):
            for statement in inline["PolicyDocument"]["Statement"]:
                yield lid, plain(statement, template)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def synthesized(out: Path) -> SimpleNamespace:
    """`npx cdk synth` into `out`, as a user runs it, and what it wrote: the session's one synth
    (tests/conftest.py's `synth`), which every CDK test that reads the CLI's output shares.
    Slow: the app, cdk-nag, the layer copied from its cache, the code compiled."""
    # The app imports this checkout's functions/, whatever package the venv was installed from.
    done = run(
        [npx("cdk"), "synth", "--quiet", "--output", str(out)], env={"PYTHONPATH": str(REPO / "functions")}
    )
    assert done.returncode == 0, f"cdk synth failed:\n{done.stdout}\n{done.stderr}"
    manifest = json.loads((out / "manifest.json").read_text())
    (stack,) = [a for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"]
    template_file = out / stack["properties"]["templateFile"]
    assets = json.loads(
        (out / stack["properties"]["templateFile"].replace(".template.json", ".assets.json")).read_text()
    )
    return SimpleNamespace(
        out=out,
        stderr=done.stderr,
        template_file=template_file,
        template=json.loads(template_file.read_text()),
        assets=assets,
    )
