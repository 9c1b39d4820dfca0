"""The Lambda assets ship bytecode compiled by the runtime's own Python.

Lambda's code folders are read-only: a module without a pyc the runtime accepts is compiled
from source at every cold start, and Lambda bills the init phase. So the synth compiles every
module of both assets (the function code under /var/task, the layer under /opt/python) with
the interpreter of `lambda_runtime`, as unchecked-hash pycs: deterministic (the asset hashes do
not move between synths) and read without opening the source (the code cannot change under
them). `docs/aws/deploy.md` says how the synth finds that interpreter.

The CLI synth is the session's (`conftest.py`); the runtime's magic number comes from running
its Python, found as the synth finds it (ferry_cdk.bytecode), which says its version.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from cdk_support import REPO, only, resources

RUNTIME = "python3.13"  # cdk.json's lambda_runtime, the default
UNCHECKED_HASH = 0b01  # PEP 552: bit 0 hash-based, bit 1 check_source off

# Run by the runtime's Python over one asset: every .py has its pyc for this interpreter, with
# this interpreter's magic number, unchecked-hash flags, the hash of the source beside it, and
# the path the module has in Lambda; no pyc without its source.
CHECK_TREE = r"""
import importlib.util, json, marshal, sys
from pathlib import Path

root, recorded = Path(sys.argv[1]), sys.argv[2]
tag = sys.implementation.cache_tag
problems, sources = [], 0
for source in sorted(root.rglob("*.py")):
    sources += 1
    name = source.relative_to(root).as_posix()
    pyc = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
    if not pyc.is_file():
        problems.append(f"{name}: no {pyc.name}")
        continue
    data = pyc.read_bytes()
    flags = int.from_bytes(data[4:8], "little")
    if data[:4] != importlib.util.MAGIC_NUMBER:
        problems.append(f"{name}: magic {data[:4].hex()}")
    elif flags != int(sys.argv[3]):
        problems.append(f"{name}: flags {flags}")
    elif data[8:16] != importlib.util.source_hash(source.read_bytes()):
        problems.append(f"{name}: the hash of another source")
    elif marshal.loads(data[16:]).co_filename != f"{recorded}/{name}":
        problems.append(f"{name}: compiled as {marshal.loads(data[16:]).co_filename}")
orphans = [
    p.relative_to(root).as_posix()
    for p in root.rglob("*.pyc")
    if p.parent.name != "__pycache__"
    or not p.name.endswith(f".{tag}.pyc")
    or not (p.parent.parent / (p.name.split(".")[0] + ".py")).is_file()
]
print(json.dumps({"version": "%d.%d" % sys.version_info[:2],
                  "magic": importlib.util.MAGIC_NUMBER.hex(), "sources": sources,
                  "problems": problems, "orphans": orphans}))
"""


def runtime_python() -> str:
    from ferry_cdk import bytecode

    found = bytecode.find_runtime_python(RUNTIME)
    if found is None:
        pytest.fail(f"no {RUNTIME} here: the synth compiles the Lambda assets' bytecode with it")
    return found.executable


def check_tree(root: Path, recorded: str) -> dict[str, object]:
    done = subprocess.run(
        [runtime_python(), "-c", CHECK_TREE, str(root), recorded, str(UNCHECKED_HASH)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def runtime_magic() -> str:
    """importlib.util.MAGIC_NUMBER of the runtime's Python, from running it."""
    done = subprocess.run(
        [runtime_python(), "-c", "import importlib.util; print(importlib.util.MAGIC_NUMBER.hex())"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def asset_dirs(out: Path, template: dict[str, object]) -> tuple[Path, Path]:
    """(the functions' code asset, the layer's asset) of a synthesized template."""
    (code,) = {
        f["Metadata"]["aws:asset:path"]
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"].get("Runtime", "").startswith("python")
    }
    _, layer = only(template, "AWS::Lambda::LayerVersion")
    return out / code, out / layer["Metadata"]["aws:asset:path"]


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_code_and_the_layer_hold_the_runtimes_bytecode_for_every_module(synth: SimpleNamespace) -> None:
    code, layer = asset_dirs(synth.out, synth.template)
    magic = runtime_magic()
    for root, recorded, at_least in ((code, "/var/task", 100), (layer / "python", "/opt/python", 600)):
        found = check_tree(root, recorded)
        assert (found["version"], found["magic"]) == (RUNTIME.removeprefix("python"), magic)
        assert found["sources"] >= at_least, (root.name, found["sources"])  # the whole tree, not a part
        assert found["problems"] == [], (root.name, found["problems"][:10])  # type: ignore[index]
        assert found["orphans"] == [], (root.name, found["orphans"][:10])  # type: ignore[index]


def s3_key(template: dict[str, object], kind: str) -> str:
    """The one S3 key (`<asset hash>.zip`) the resources of `kind` deploy from."""
    key = "Code" if kind == "AWS::Lambda::Function" else "Content"
    (found,) = {
        r["Properties"][key]["S3Key"] for r in resources(template, kind).values() if key in r["Properties"]
    }
    return found  # type: ignore[no-any-return]


def test_a_second_synth_builds_the_same_assets_byte_for_byte(synth: SimpleNamespace, tmp_path: Path) -> None:
    """Another process, another temporary folder, another hash seed: the same pycs, so the same
    asset hashes, and CloudFormation leaves the functions and the layer alone. (The layer's hash
    is its cache key and the bytecode's tag: computed, not bundled, in the stack left out of
    bundling; the bytes of its pycs are the next test's.)"""
    import aws_cdk as cdk
    from aws_cdk import aws_lambda as lambda_

    from ferry_cdk import bundling, bytecode

    context = {"aws:cdk:enable-asset-metadata": True, "aws:cdk:bundling-stacks": ["Code"]}
    app = cdk.App(outdir=str(tmp_path / "cdk.out"), context=context)
    python = bytecode.find_runtime_python(RUNTIME)
    assert python is not None
    lambda_.LayerVersion(cdk.Stack(app, "Layer"), "Layer", code=bundling.layer_code("arm64", RUNTIME, python))
    lambda_.Function(
        cdk.Stack(app, "Code"),
        "Function",
        code=bundling.function_code(RUNTIME, python),
        handler="handlers.prepare.handler",
        runtime=lambda_.Runtime.PYTHON_3_13,
    )
    assembly = app.synth()
    code_template = assembly.get_stack_by_name("Code").template
    layer_template = assembly.get_stack_by_name("Layer").template
    assert s3_key(code_template, "AWS::Lambda::Function") == s3_key(synth.template, "AWS::Lambda::Function")
    assert s3_key(layer_template, "AWS::Lambda::LayerVersion") == s3_key(
        synth.template, "AWS::Lambda::LayerVersion"
    )
    (code,) = {
        f["Metadata"]["aws:asset:path"] for f in resources(code_template, "AWS::Lambda::Function").values()
    }
    first_code, _ = asset_dirs(synth.out, synth.template)
    assert files(tmp_path / "cdk.out" / code) == files(first_code)


def test_compiling_twice_in_two_folders_gives_the_same_bytes(synth: SimpleNamespace, tmp_path: Path) -> None:
    """The layer is compiled once into its cache: its determinism is shown here, on a copy of
    some of its packages (and of Ferry's own) compiled in two differently named folders."""
    from ferry_cdk import bundling, bytecode

    python = bytecode.find_runtime_python(RUNTIME)
    assert python is not None
    _, layer = asset_dirs(synth.out, synth.template)
    packages = [layer / "python" / name for name in ("jmespath", "dateutil", "s3transfer")]
    packages.append(REPO / "functions" / "ferry")
    trees = []
    for name in ("one", "two-with-a-longer-name"):
        for package in packages:
            shutil.copytree(package, tmp_path / name / package.name, ignore=bundling.ignore_build_files)
        bytecode.compile_tree(python, tmp_path / name, "/opt/python")
        trees.append(files(tmp_path / name))
    assert trees[0] == trees[1]
    assert sum(name.endswith(f".{python.cache_tag}.pyc") for name in trees[0]) > 150


def test_the_code_asset_leaves_out_build_files_and_bytecode_it_did_not_make(tmp_path: Path) -> None:
    """Pycs that tests or tools left in functions/ (another Python's, or stale) stay out: the
    asset holds only what the runtime's Python compiled from the sources shipped."""
    from ferry_cdk import bundling, bytecode

    python = bytecode.find_runtime_python(RUNTIME)
    assert python is not None
    source = tmp_path / "functions"
    (source / "handlers" / "__pycache__").mkdir(parents=True)
    (source / "handlers" / "x.py").write_text("VALUE = 1\n")
    (source / "handlers" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"stale")
    (source / "handlers" / "__pycache__" / "gone.cpython-313.pyc").write_bytes(b"orphan")
    (source / "ferry.egg-info").mkdir()
    for name in ("Dockerfile", "requirements.txt", "requirements-dev.txt", ".dockerignore"):
        (source / name).write_text("")
    out = tmp_path / "out"
    assert bundling.FunctionCodeBundling(source, python).try_bundle(str(out), None) is True  # type: ignore[arg-type]
    assert sorted(files(out)) == ["handlers/__pycache__/x.cpython-313.pyc", "handlers/x.py"]

    bundling.FunctionCodeBundling(source, None).try_bundle(str(tmp_path / "bare"), None)  # type: ignore[arg-type]
    assert sorted(files(tmp_path / "bare")) == ["handlers/x.py"]


def _not_this_python() -> str:
    """A Lambda runtime this test's own interpreter is not (sys.executable is a candidate)."""
    return "python3.12" if sys.version_info[:2] != (3, 12) else "python3.13"


def test_without_the_runtimes_python_the_synth_warns_and_ships_source_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import aws_cdk as cdk
    from aws_cdk.assertions import Annotations, Match

    from ferry_cdk import bundling, bytecode

    runtime = _not_this_python()
    monkeypatch.delenv(bytecode.RUNTIME_PYTHON_VARIABLE, raising=False)
    for variable in ("PATH", "PYENV_ROOT", "UV_PYTHON_INSTALL_DIR"):  # no python3.x there
        monkeypatch.setenv(variable, str(tmp_path))
    assert bytecode.find_runtime_python(runtime) is None

    stack = cdk.Stack(cdk.App(), "NoBytecode")
    bytecode.say_what_is_missing(stack, runtime, None)
    Annotations.from_stack(stack).has_warning(
        "*", Match.string_like_regexp(f"no {runtime} .*found.*{bytecode.RUNTIME_PYTHON_VARIABLE}")
    )
    # The assets say whether they hold bytecode: adding it later changes their hashes.
    python = bytecode.RuntimePython("python3.13", "3.13.0", "f30d0d0a", "cpython-313")
    requirements = REPO / "functions" / "requirements.txt"
    assert bundling.layer_hash("arm64", RUNTIME, None, requirements) != bundling.layer_hash(
        "arm64", RUNTIME, python, requirements
    )


def test_a_runtime_python_named_but_not_usable_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ferry.errors import ConfigError
    from ferry_cdk import bytecode

    runtime = _not_this_python()
    monkeypatch.setenv(bytecode.RUNTIME_PYTHON_VARIABLE, sys.executable)
    with pytest.raises(
        ConfigError, match=rf"{bytecode.RUNTIME_PYTHON_VARIABLE}=.* is Python 3\.\d+, not {runtime}"
    ):
        bytecode.find_runtime_python(runtime)
    monkeypatch.setenv(bytecode.RUNTIME_PYTHON_VARIABLE, str(tmp_path / "python-nowhere"))
    with pytest.raises(ConfigError, match="cannot run"):
        bytecode.find_runtime_python(runtime)


def test_the_fargate_image_compiles_its_code_and_dependencies_at_build() -> None:
    """The task's root filesystem is read-only too (stack.py): without pycs in the image, each
    task would compile every module it imports when it starts."""
    dockerfile = (REPO / "functions" / "Dockerfile").read_text().replace("\\\n", " ")
    steps = [line.strip() for line in dockerfile.splitlines() if line.strip().startswith("RUN ")]
    compiling = [s for s in steps if "compileall" in s]
    assert compiling, steps
    assert "--invalidation-mode unchecked-hash" in compiling[0]
    # the code, and the dependencies where pip put them
    assert "/app/ferry" in compiling[0] and "/app/handlers" in compiling[0]
    assert 'sysconfig.get_path("purelib")' in compiling[0]
    assert dockerfile.index("COPY handlers/") < dockerfile.index(compiling[0])
    assert dockerfile.index("pip install") < dockerfile.index(compiling[0])
