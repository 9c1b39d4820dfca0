"""Bytecode for the Lambda assets, compiled by the runtime's own Python at synth.

Lambda's code folders (/var/task, /opt) are read-only, so a module without a pyc the runtime
accepts is compiled from source at every cold start, and Lambda bills the init phase: without
bytecode, importing a handler costs several times what it costs with it. A pyc is only
accepted by the Python that made it (its magic number), and the machine running `cdk synth`
need not run the runtime's Python, so the synth looks for that interpreter:

1. `FERRY_RUNTIME_PYTHON`, the path of an interpreter (an error if it is not the runtime's
   version: someone chose it);
2. `python3.X` on PATH (a pyenv shim that has no such version fails to run and is passed over);
3. pyenv's and uv's installs of 3.X (`$PYENV_ROOT/versions/3.X.*`, uv's `cpython-3.X.*`);
4. the Python running the synth, if it is 3.X.

Found, it compiles each asset once per build, as unchecked-hash pycs: their header holds a
hash of the source, not a timestamp, so the same source gives the same bytes and the asset
hashes stay put from synth to synth; and Python trusts them without reading and hashing the
source on every import (checked-hash would), which is safe where the code cannot change under
its bytecode. Not found, the synth warns (`ferry:no-bytecode`) and ships sources only: the
stack still works, its cold starts cost more.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ferry.errors import ConfigError

if TYPE_CHECKING:
    from constructs import Construct

RUNTIME_PYTHON_VARIABLE = "FERRY_RUNTIME_PYTHON"
INVALIDATION_MODE = "unchecked-hash"
_PROBE = (
    "import importlib.util, json, sys; print(json.dumps({'executable': sys.executable, "
    "'implementation': sys.implementation.name, 'version': '%d.%d' % sys.version_info[:2], "
    "'release': sys.version.split()[0], 'magic': importlib.util.MAGIC_NUMBER.hex(), "
    "'cache_tag': sys.implementation.cache_tag}))"
)
# Compiles argv[1] as if it lay at argv[2] (the path recorded in each code object, as tracebacks
# show it: /var/task or /opt/python). Every file in this one process, in sorted order, with a
# fixed hash seed (set by the caller): nothing about the build leaks into the bytes.
_COMPILE = r"""
import compileall, py_compile, sys
ok = compileall.compile_dir(
    sys.argv[1], ddir=sys.argv[2], quiet=1, workers=1,
    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
)
sys.exit(0 if ok else 1)
"""


@dataclass(frozen=True)
class RuntimePython:
    """An interpreter of the runtime's version, and what its pycs are named and stamped with."""

    executable: str
    release: str  # 3.13.0
    magic: str  # importlib.util.MAGIC_NUMBER, hex
    cache_tag: str  # cpython-313: __pycache__/<module>.cpython-313.pyc

    @property
    def tag(self) -> str:
        """What the compiled assets depend on, for their cache keys and hashes."""
        return f"{self.cache_tag}-{self.magic}-{INVALIDATION_MODE}"


def runtime_version(runtime: str) -> str:
    """`python3.13` -> `3.13`."""
    return runtime.removeprefix("python")


def find_runtime_python(runtime: str, environ: Mapping[str, str] = os.environ) -> RuntimePython | None:
    """The interpreter that compiles the assets for `runtime`, or None if there is none here."""
    home = Path.home()
    pyenv = environ.get("PYENV_ROOT") or str(home / ".pyenv")
    uv = environ.get("UV_PYTHON_INSTALL_DIR") or str(home / ".local" / "share" / "uv" / "python")
    return _find(runtime, environ.get(RUNTIME_PYTHON_VARIABLE, ""), environ.get("PATH", ""), pyenv, uv)


@functools.cache  # one probe per synth, though both assets ask
def _find(runtime: str, named: str, path: str, pyenv: str, uv: str) -> RuntimePython | None:
    version = runtime_version(runtime)
    if named:
        probed = _probe(named)
        if probed is None:
            raise ConfigError(f"{RUNTIME_PYTHON_VARIABLE}={named}: cannot run it as a Python interpreter")
        if probed[0] != version:
            raise ConfigError(
                f"{RUNTIME_PYTHON_VARIABLE}={named} is Python {probed[0]}, not {runtime}, the lambda_runtime "
                f"setting: its bytecode would be of no use to the runtime; name a Python {version}"
            )
        return probed[1]
    for candidate in _candidates(runtime, path, pyenv, uv):
        probed = _probe(candidate)
        if probed is not None and probed[0] == version:
            return probed[1]
    return None


def _candidates(runtime: str, path: str, pyenv: str, uv: str) -> list[str]:
    """Where to look, in order; each is run before it is trusted."""
    version = runtime_version(runtime)
    found = []
    on_path = shutil.which(runtime, path=path)
    if on_path:
        found.append(on_path)
    for installs in (
        Path(pyenv, "versions").glob(f"{version}.*/bin/{runtime}"),
        Path(uv).glob(f"cpython-{version}.*/bin/{runtime}"),
    ):
        found += [str(p) for p in sorted(installs, key=_release_order, reverse=True)]  # newest first
    found.append(sys.executable)
    return found


def _release_order(path: Path) -> tuple[int, ...]:
    """`.../3.13.10/bin/python3.13` after `.../3.13.9/...`: its release as numbers."""
    release = path.parent.parent.name.removeprefix("cpython-").split("-")[0]
    return tuple(int(part) if part.isdigit() else -1 for part in release.split("."))


def _probe(executable: str) -> tuple[str, RuntimePython] | None:
    """(3.X, the interpreter) if `executable` runs as CPython, else None."""
    try:
        done = subprocess.run([executable, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    try:
        facts = json.loads(done.stdout)
    except json.JSONDecodeError:
        return None
    if facts.get("implementation") != "cpython":  # Lambda runs CPython
        return None
    python = RuntimePython(facts["executable"], facts["release"], facts["magic"], facts["cache_tag"])
    return facts["version"], python


def compile_tree(python: RuntimePython, tree: Path, recorded_as: str) -> None:
    """Unchecked-hash pycs beside every .py under `tree`, by `python`, as if the tree lay at
    `recorded_as`. A module that does not compile could not be imported either: it fails the
    synth, named, rather than shipping a tree the runtime must partly compile."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # marshal's output may follow set iteration order
    env.pop("PYTHONPYCACHEPREFIX", None)  # the pycs go beside their sources, where Lambda looks
    done = subprocess.run(
        [python.executable, "-c", _COMPILE, str(tree), recorded_as],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{python.executable} could not compile every module under {tree}:\n"
            f"{(done.stdout + done.stderr).strip()[-3000:]}"
        )


def say_what_is_missing(scope: Construct, runtime: str, python: RuntimePython | None) -> None:
    """The synth's warning when the assets go without bytecode, and what to do about it."""
    if python is not None:
        return
    import aws_cdk as cdk  # here: finding the interpreter (the bench does) needs no Node process

    version = runtime_version(runtime)
    cdk.Annotations.of(scope).add_warning_v2(
        "ferry:no-bytecode",
        f"no {runtime} interpreter found (PATH, pyenv, uv; {RUNTIME_PYTHON_VARIABLE} unset): the Lambda "
        f"code and layer ship without bytecode, so every cold start compiles each module it imports "
        f"(about 4x a handler's init CPU, which Lambda bills). Install Python {version}, or set "
        f"{RUNTIME_PYTHON_VARIABLE} to its path, and synthesize again (docs/aws/deploy.md)",
    )
