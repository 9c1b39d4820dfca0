"""The Lambda functions of a synthesized stack, laid out as Lambda runs them (`make bench-startup`).

Lambda unpacks a function's code asset at /var/task and its layers at /opt, both read-only,
and runs the handler's module in the runtime's Python with the function's environment and the
variables Lambda defines itself. Here, from `cdk synth`'s output (cdk.out):

- each code asset and each set of layers is copied into a folder of its own, then made
  read-only (`chmod -R a-w`); root ignores those bits, so every run also has
  PYTHONDONTWRITEBYTECODE=1 (Lambda's Python could not write either), and the bench checks
  that no file appeared in the tree after the runs;
- compiled extensions built for another machine (the layer is arm64 by default; awscrt,
  wrapt and zlib-ng have them) are replaced by this machine's build of the same release, fetched once with
  pip into .cache/bench-native/, after checking that both builds ship the same Python files;
- each function's environment is its template's variables (intrinsics such as `Ref` given fake
  values of the right shape) and Lambda's own: LAMBDA_TASK_ROOT, AWS_EXECUTION_ENV, the X-Ray
  daemon's address when tracing is active, no trace header (Lambda sets one per invocation,
  after init); sys.path as the runtime orders it: the code, then the layers' two folders.

Nothing here imports the stack's code: it reads what the synth wrote.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CDK = REPO / "node_modules" / ".bin" / "cdk"
NATIVE_CACHE = REPO / ".cache" / "bench-native"
REGION, ACCOUNT = "us-east-1", "123456789012"
PSEUDO = {
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
}
ELF_MACHINES = {0x3E: "x86_64", 0xB7: "aarch64"}  # e_machine: EM_X86_64, EM_AARCH64
WHEEL_PLATFORMS = {"x86_64": "manylinux2014_x86_64", "aarch64": "manylinux2014_aarch64"}
# What Lambda sets when a function's tracing is active (the X-Ray daemon's link-local address).
XRAY = {
    "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
    "AWS_XRAY_DAEMON_ADDRESS": "169.254.79.129:2000",
    "_AWS_XRAY_DAEMON_ADDRESS": "169.254.79.129",
    "_AWS_XRAY_DAEMON_PORT": "2000",
}


@dataclass(frozen=True)
class LambdaFunction:
    """One Python function of the template: what Lambda needs to start it."""

    name: str  # the logical id
    handler: str  # handlers.copy_batch.handler
    runtime: str  # python3.13
    memory_mb: int
    tracing: bool
    variables: dict[str, str]
    code: Path  # its code asset in cdk.out
    layers: tuple[Path, ...]  # its layers' assets, in order

    @property
    def module(self) -> str:
        return self.handler.rsplit(".", 1)[0]


@dataclass
class Deployment:
    """The unpacked assets: a task root per code asset, an /opt per set of layers."""

    root: Path
    tasks: dict[Path, Path] = field(default_factory=dict)
    opts: dict[tuple[Path, ...], Path] = field(default_factory=dict)
    swapped: list[str] = field(default_factory=list)  # "awscrt 0.38.0 (aarch64 -> x86_64)"

    def site(self, function: LambdaFunction) -> Path:
        return self.opts[function.layers] / "python"


def synthesize(out: Path, config: Path | None = None) -> Path:
    """`cdk synth` as a user runs it, into `out` (offline: the layer comes from its cache)."""
    if not CDK.exists():
        raise RuntimeError(f"{CDK} is missing: run `npm ci` (or `make setup`)")
    argv = [str(CDK), "synth", "--quiet", "--output", str(out)]
    if config is not None:
        argv += ["--context", f"ferry:configFile={config}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env["PYTHONPATH"] = str(REPO / "functions")  # this checkout's code, whatever the venv points at
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"cdk synth failed:\n{done.stdout}\n{done.stderr}"[-4000:])
    return out


def read_functions(cdk_out: Path) -> list[LambdaFunction]:
    """Every Python function of the stack in `cdk_out`, by logical id."""
    manifest = json.loads((cdk_out / "manifest.json").read_text())
    stacks = [a for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"]
    if len(stacks) != 1:
        raise RuntimeError(f"{cdk_out}: expected one stack, found {len(stacks)}")
    template = json.loads((cdk_out / stacks[0]["properties"]["templateFile"]).read_text())
    resources = template["Resources"]
    found = []
    for lid, resource in sorted(resources.items()):
        props = resource.get("Properties", {})
        if resource["Type"] != "AWS::Lambda::Function" or not str(props.get("Runtime", "")).startswith(
            "python"
        ):
            continue
        layers = tuple(
            cdk_out / _asset_path(resources[layer["Ref"]], layer["Ref"]) for layer in props.get("Layers", [])
        )
        variables = props.get("Environment", {}).get("Variables", {})
        found.append(
            LambdaFunction(
                name=lid,
                handler=props["Handler"],
                runtime=props["Runtime"],
                memory_mb=int(props.get("MemorySize", 128)),
                tracing=props.get("TracingConfig", {}).get("Mode") == "Active",
                variables={name: plain(value, resources) for name, value in variables.items()},
                code=cdk_out / _asset_path(resource, lid),
                layers=layers,
            )
        )
    if not found:
        raise RuntimeError(f"{cdk_out}: no Python Lambda function in the template")
    return found


def _asset_path(resource: dict[str, Any], lid: str) -> str:
    path = resource.get("Metadata", {}).get("aws:asset:path")
    if not path:
        raise RuntimeError(f"{lid} names no asset path: synthesize with asset metadata (the CLI's default)")
    return str(path)


def plain(value: Any, resources: dict[str, Any]) -> str:
    """An environment variable's value with CloudFormation's intrinsics given fake values of
    the right shape (what init might parse); one it cannot resolve is an error, not a guess."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Ref" in value:
        name = value["Ref"]
        if name in PSEUDO:
            return PSEUDO[name]
        kind = resources.get(name, {}).get("Type", "")
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"
        if kind == "AWS::StepFunctions::StateMachine":
            return f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{name}"
        return name.lower()  # bucket, table and other names
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        lid, attribute = value["Fn::GetAtt"]
        service = resources.get(lid, {}).get("Type", "AWS::Unknown::x").split("::")[1].lower()
        return (
            f"arn:aws:{service}:{REGION}:{ACCOUNT}:{lid.lower()}"
            if attribute == "Arn"
            else f"{lid}.{attribute}"
        )
    if isinstance(value, dict) and "Fn::Join" in value:
        delimiter, items = value["Fn::Join"]
        return str(delimiter).join(plain(item, resources) for item in items)
    if isinstance(value, dict) and "Fn::Sub" in value and isinstance(value["Fn::Sub"], str):
        return re.sub(
            r"\$\{([^}]+)\}", lambda m: PSEUDO.get(m.group(1), m.group(1).lower()), value["Fn::Sub"]
        )
    raise RuntimeError(f"cannot give a plain value to {json.dumps(value)[:200]}")


def lay_out(functions: Iterable[LambdaFunction], root: Path, native_cache: Path = NATIVE_CACHE) -> Deployment:
    """The functions' assets unpacked under `root` (task-N/, opt-N/python/), this machine's
    compiled extensions in place, and everything made read-only."""
    deployment = Deployment(root)
    root.mkdir(parents=True, exist_ok=True)
    for function in functions:
        if function.code not in deployment.tasks:
            task = root / f"task-{len(deployment.tasks) + 1}"
            shutil.copytree(function.code, task, symlinks=True)
            deployment.tasks[function.code] = task
        if function.layers not in deployment.opts:
            opt = root / f"opt-{len(deployment.opts) + 1}"
            opt.mkdir()
            for layer in function.layers:  # later layers over earlier ones, as Lambda merges them
                shutil.copytree(layer, opt, symlinks=True, dirs_exist_ok=True)
            deployment.opts[function.layers] = opt
            version = function.runtime.removeprefix("python")
            deployment.swapped += swap_native(opt / "python", version, native_cache)
    _chmod(root, writable=False)
    return deployment


def release(deployment: Deployment) -> None:
    """Writable again, so the temporary folder can go."""
    _chmod(deployment.root, writable=True)


def _chmod(root: Path, writable: bool) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        path.chmod(mode | 0o200 if writable else mode & ~0o222)


def files_under(root: Path) -> set[str]:
    """Every file under `root`, to see that no run wrote one (a pyc, say)."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir()}


def host_machine() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def elf_machine(path: Path) -> str:
    header = path.read_bytes()[:20]
    if header[:4] != b"\x7fELF":
        raise RuntimeError(f"{path} is not an ELF file")
    code = int.from_bytes(header[18:20], "little")
    return ELF_MACHINES.get(code, f"machine {code:#x}")


def _record(dist_info: Path) -> dict[str, str]:
    """RECORD as {path: hash}."""
    rows = (line.rsplit(",", 2) for line in (dist_info / "RECORD").read_text().splitlines() if line)
    return {path: digest for path, digest, _ in rows}


def swap_native(site: Path, python_version: str, cache: Path = NATIVE_CACHE) -> list[str]:
    """Each package in `site` whose compiled extensions are for another machine gets this
    machine's build of the same release in their place."""
    host = host_machine()
    swapped = []
    for dist_info in sorted(site.glob("*.dist-info")):
        record = _record(dist_info)
        extensions = [p for p in record if p.endswith(".so")]
        foreign = {elf_machine(site / p) for p in extensions} - {host}
        if not foreign:
            continue
        name, version = dist_info.name.removesuffix(".dist-info").rsplit("-", 1)
        built = host_build(name, version, python_version, host, cache)
        theirs = _record(built / dist_info.name)
        python_files = {p: h for p, h in record.items() if p.endswith(".py")}
        if python_files != {p: h for p, h in theirs.items() if p.endswith(".py")}:
            raise RuntimeError(
                f"{name} {version}: this machine's build ships other Python files than the layer's"
            )
        for path in extensions:
            (site / path).unlink()
        for path in (p for p in theirs if p.endswith(".so")):
            (site / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(built / path, site / path)
        swapped.append(f"{name} {version} ({', '.join(sorted(foreign))} -> {host})")
    return swapped


def host_build(name: str, version: str, python_version: str, host: str, cache: Path) -> Path:
    """`name==version` for this machine and `python_version`, installed once into `cache`."""
    entry = cache / f"{name}-{version}-{WHEEL_PLATFORMS[host]}-cp{python_version.replace('.', '')}"
    if entry.is_dir():
        return entry
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="building-", dir=cache))
    try:
        argv = [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
            "--no-compile", "--only-binary=:all:", "--implementation", "cp", "--platform", WHEEL_PLATFORMS[host],
            "--python-version", python_version, "--target", str(work / "site"), f"{name}=={version}",
        ]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"pip could not fetch {name}=={version} for {host}:\n{done.stderr.strip()}")
        (work / "site").rename(entry)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return entry


def environment(function: LambdaFunction, deployment: Deployment) -> dict[str, str]:
    """What the handler's module sees at init: Lambda's variables and the function's own."""
    task, opt = deployment.tasks[function.code], deployment.opts[function.layers]
    version = function.runtime.removeprefix("python")
    env = {
        "PATH": "/var/lang/bin:/usr/local/bin:/usr/bin/:/bin:/opt/bin",
        "LANG": "en_US.UTF-8",
        "TZ": ":UTC",
        # The runtime's order: the code, then the layers' site-packages and python/.
        "PYTHONPATH": f"{task}:{opt}/python/lib/python{version}/site-packages:{opt}/python",
        "LAMBDA_TASK_ROOT": str(task),
        "LAMBDA_RUNTIME_DIR": "/var/runtime",
        "_HANDLER": function.handler,
        "AWS_EXECUTION_ENV": f"AWS_Lambda_{function.runtime}",
        "AWS_LAMBDA_FUNCTION_NAME": f"Ferry-{function.name}",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_mb),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/Ferry-{function.name}",
        "AWS_LAMBDA_LOG_STREAM_NAME": "2026/01/01/[$LATEST]00000000000000000000000000000000",
        "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "ASIAEXAMPLEEXAMPLE00",
        "AWS_SECRET_ACCESS_KEY": "example/secret/key/not/used/at/init/00000",
        "AWS_SESSION_TOKEN": "example-session-token",
        **(XRAY if function.tracing else {}),
        **function.variables,
        # Root ignores the read-only bits: this keeps the runs from writing what Lambda could not.
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return env
