"""The Lambda assets, built without Docker: the workers' dependencies as a layer, and the
functions' code, each with the bytecode of the runtime's Python (bytecode.py).

`pip install --platform manylinux2014_<arch> --only-binary=:all: --python-version X.Y` fetches
the wheels built for the Lambda runtime (awscrt's and wrapt's compiled extensions included) on
any machine, so `cdk synth` needs neither Docker nor an ARM host. The result is cached in
`.cache/layers/` under a key made of the requirements file's content, the platform and the
Python version: a later synth copies the cached tree instead of calling pip (and needs no
network). The same tree compiled by the runtime's Python is cached beside it, under that key
and the interpreter's tag, so the layer is compiled once.

The functions' code (`functions/` without its build files) is copied and compiled at every
synth (a second or so); its asset hash is the hash of that output, pycs included.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import aws_cdk as cdk
import jsii

from .bytecode import RuntimePython, compile_tree, runtime_version

REPO = Path(__file__).resolve().parents[2]
FUNCTIONS_DIR = REPO / "functions"
REQUIREMENTS = FUNCTIONS_DIR / "requirements.txt"
CACHE_DIR = REPO / ".cache" / "layers"
CACHE_FORMAT = "1"  # bump when the layout of a cached layer changes
PLATFORMS = {"arm64": "manylinux2014_aarch64", "x86_64": "manylinux2014_x86_64"}
# Where Lambda puts each asset: the path recorded in the bytecode, as tracebacks show it.
TASK_ROOT, LAYER_ROOT = "/var/task", "/opt/python"
# What is not code in functions/: kept out of the Lambda asset. (Its own pycs, made by whatever
# Python ran the tests, would be stale or of the wrong version; the build compiles afresh.)
BUILD_FILES = ("__pycache__", "*.pyc", "*.egg-info", "Dockerfile", ".dockerignore", "requirements*.txt")
ignore_build_files = shutil.ignore_patterns(*BUILD_FILES)


def layer_key(requirements: Path, architecture: str, runtime: str) -> str:
    """What the layer's content depends on, and so its cache key and asset hash."""
    digest = hashlib.sha256()
    for part in (CACHE_FORMAT, PLATFORMS[architecture], runtime_version(runtime)):
        digest.update(part.encode() + b"\0")
    digest.update(requirements.read_bytes())
    return digest.hexdigest()


def pip_command(requirements: Path, architecture: str, runtime: str, target: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",  # .pyc files of this Python would be useless to the runtime's
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--platform",
        PLATFORMS[architecture],
        "--python-version",
        runtime_version(runtime),
        "--requirement",
        str(requirements),
        "--target",
        str(target),
    ]


def layer_hash(
    architecture: str, runtime: str, python: RuntimePython | None, requirements: Path = REQUIREMENTS
) -> str:
    """The layer asset's hash: its wheels, and the bytecode it holds (none, or which Python's),
    so that a synth that adds the bytecode updates the layer."""
    digest = hashlib.sha256(layer_key(requirements, architecture, runtime).encode())
    digest.update(b"\0" + (python.tag if python else "no-bytecode").encode())
    return digest.hexdigest()


@jsii.implements(cdk.ILocalBundling)
class PipLayerBundling:
    """`ILocalBundling`: fill the layer's `python/` folder with the pinned wheels, compiled by
    the runtime's Python when there is one."""

    def __init__(
        self,
        requirements: Path,
        architecture: str,
        runtime: str,
        python: RuntimePython | None = None,
        cache_dir: Path = CACHE_DIR,
    ):
        self.requirements, self.architecture, self.runtime = requirements, architecture, runtime
        self.python = python
        self.cache = cache_dir / layer_key(requirements, architecture, runtime)
        self.compiled = self.cache.with_name(f"{self.cache.name}-{python.tag}") if python else None

    def try_bundle(self, output_dir: str, _options: cdk.BundlingOptions) -> bool:
        if not (self.cache / "python").is_dir():
            self._install()
        tree = self.cache
        if self.python is not None and self.compiled is not None:
            if not (self.compiled / "python").is_dir():
                self._compile(self.python, self.compiled)
            tree = self.compiled
        shutil.copytree(tree / "python", Path(output_dir) / "python", dirs_exist_ok=True)
        return True

    def _compile(self, python: RuntimePython, entry: Path) -> None:
        """The wheels' tree compiled, as a cache entry of its own (renamed into place whole,
        like the wheels' entry)."""
        work = Path(tempfile.mkdtemp(prefix="compiling-", dir=entry.parent))
        try:
            shutil.copytree(self.cache / "python", work / "python")
            compile_tree(python, work / "python", LAYER_ROOT)
            try:
                work.rename(entry)
            except OSError:
                if not (entry / "python").is_dir():  # not another synth that won the race
                    raise
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _install(self) -> None:
        self.cache.parent.mkdir(parents=True, exist_ok=True)
        # Install beside the cache entry, then rename: a synth killed half-way leaves no
        # half-filled entry that a later synth would trust.
        work = Path(tempfile.mkdtemp(prefix="building-", dir=self.cache.parent))
        try:
            command = pip_command(self.requirements, self.architecture, self.runtime, work / "python")
            print(
                f"ferry: installing {self.requirements.name} for {self.runtime} on "
                f"{self.architecture} into the Lambda layer (cached in {self.cache.parent})",
                file=sys.stderr,
            )
            done = subprocess.run(command, capture_output=True, text=True, env=_pip_env())
            if done.returncode != 0:
                raise RuntimeError(
                    f"pip could not fetch the layer's wheels ({' '.join(command)}):\n{done.stderr.strip()}"
                )
            shutil.rmtree(work / "python" / "bin", ignore_errors=True)  # console scripts: not importable
            try:
                work.rename(self.cache)
            except OSError:
                if not (self.cache / "python").is_dir():  # not another synth that won the race
                    raise
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _pip_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    return env


def layer_code(
    architecture: str, runtime: str, python: RuntimePython | None, requirements: Path = REQUIREMENTS
):
    """The layer's code asset. Its hash is the cache key and the bytecode's tag, so an unchanged
    requirements file gives an unchanged asset (and CloudFormation leaves the layer alone)."""
    from aws_cdk import aws_lambda

    return aws_lambda.Code.from_asset(
        str(requirements.parent),
        asset_hash_type=cdk.AssetHashType.CUSTOM,
        asset_hash=layer_hash(architecture, runtime, python, requirements),
        bundling=cdk.BundlingOptions(
            # Used only if local bundling declined, which it never does: it fails loudly.
            image=cdk.DockerImage.from_registry(f"public.ecr.aws/sam/build-{runtime}"),
            local=PipLayerBundling(requirements, architecture, runtime, python),
        ),
    )


@jsii.implements(cdk.ILocalBundling)
class FunctionCodeBundling:
    """`ILocalBundling`: `functions/` without its build files, compiled by the runtime's
    Python when there is one."""

    def __init__(self, source: Path, python: RuntimePython | None):
        self.source, self.python = source, python

    def try_bundle(self, output_dir: str, _options: cdk.BundlingOptions) -> bool:
        out = Path(output_dir)
        shutil.copytree(self.source, out, ignore=ignore_build_files, dirs_exist_ok=True)
        if self.python is not None:
            compile_tree(self.python, out, TASK_ROOT)
        return True


def function_code(runtime: str, python: RuntimePython | None, source: Path = FUNCTIONS_DIR):
    """The functions' code asset, hashed by what it holds (OUTPUT): the same sources compiled by
    the same Python give the same bytes, so the same hash. (No `exclude`: for an OUTPUT hash it
    would leave the pycs out of the hash; the bundling leaves the build files out.)"""
    from aws_cdk import aws_lambda

    return aws_lambda.Code.from_asset(
        str(source),
        asset_hash_type=cdk.AssetHashType.OUTPUT,
        bundling=cdk.BundlingOptions(
            # Used only if local bundling declined, which it never does: it fails loudly.
            image=cdk.DockerImage.from_registry(f"public.ecr.aws/sam/build-{runtime}"),
            local=FunctionCodeBundling(source, python),
        ),
    )
