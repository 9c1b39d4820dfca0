"""The workers' Python dependencies as a Lambda layer, built without Docker.

`pip install --platform manylinux2014_<arch> --only-binary=:all: --python-version X.Y` fetches
the wheels built for the Lambda runtime (awscrt's compiled extension included) on any machine,
so `cdk synth` needs neither Docker nor an ARM host. The result is cached in `.cache/layers/`
under a key made of the requirements file's content, the platform and the Python version: a
later synth copies the cached tree instead of calling pip (and needs no network).
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

REPO = Path(__file__).resolve().parents[2]
FUNCTIONS_DIR = REPO / "functions"
REQUIREMENTS = FUNCTIONS_DIR / "requirements.txt"
CACHE_DIR = REPO / ".cache" / "layers"
CACHE_FORMAT = "1"  # bump when the layout of a cached layer changes
PLATFORMS = {"arm64": "manylinux2014_aarch64", "x86_64": "manylinux2014_x86_64"}


def python_version(runtime: str) -> str:
    """`python3.13` -> `3.13`."""
    return runtime.removeprefix("python")


def layer_key(requirements: Path, architecture: str, runtime: str) -> str:
    """What the layer's content depends on, and so its cache key and asset hash."""
    digest = hashlib.sha256()
    for part in (CACHE_FORMAT, PLATFORMS[architecture], python_version(runtime)):
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
        python_version(runtime),
        "--requirement",
        str(requirements),
        "--target",
        str(target),
    ]


@jsii.implements(cdk.ILocalBundling)
class PipLayerBundling:
    """`ILocalBundling`: fill the layer's `python/` folder with the pinned wheels."""

    def __init__(self, requirements: Path, architecture: str, runtime: str, cache_dir: Path = CACHE_DIR):
        self.requirements, self.architecture, self.runtime = requirements, architecture, runtime
        self.cache = cache_dir / layer_key(requirements, architecture, runtime)

    def try_bundle(self, output_dir: str, _options: cdk.BundlingOptions) -> bool:
        if not (self.cache / "python").is_dir():
            self._install()
        shutil.copytree(self.cache / "python", Path(output_dir) / "python", dirs_exist_ok=True)
        return True

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


def layer_code(architecture: str, runtime: str, requirements: Path = REQUIREMENTS):
    """The layer's code asset. Its hash is the cache key, so an unchanged requirements file
    gives an unchanged asset (and CloudFormation leaves the layer alone)."""
    from aws_cdk import aws_lambda

    return aws_lambda.Code.from_asset(
        str(requirements.parent),
        asset_hash_type=cdk.AssetHashType.CUSTOM,
        asset_hash=layer_key(requirements, architecture, runtime),
        bundling=cdk.BundlingOptions(
            # Used only if local bundling declined, which it never does: it fails loudly.
            image=cdk.DockerImage.from_registry(f"public.ecr.aws/sam/build-{runtime}"),
            local=PipLayerBundling(requirements, architecture, runtime),
        ),
    )
