"""The layering rule (imports point down only) is checked by import-linter in `make lint`; these
tests keep that contract complete, so a module added at the package's root or a new part
cannot slip past it unchecked, and keep the package's folders in its build, so a part that the
tests import from the source tree is also in an installed `ferry`."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "functions" / "ferry"


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _layers(container: str | None = None) -> list[set[str]]:
    """The layers of the package's contract, or of the contract inside one of its folders."""
    config = _pyproject()["tool"]["importlinter"]
    (contract,) = (
        c for c in config["contracts"] if c["type"] == "layers" and c.get("containers", [None]) == [container]
    )
    return [{name.strip() for name in layer.replace("|", ":").split(":")} for layer in contract["layers"]]


def test_every_module_at_the_package_root_is_in_the_vocabulary_layer() -> None:
    root_modules = {f"ferry.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert root_modules == _layers()[-1]


def test_every_part_of_the_package_is_a_layer() -> None:
    parts = {f"ferry.{p.parent.name}" for p in PACKAGE.glob("*/__init__.py")}
    layered = set().union(*_layers())
    assert parts <= layered, f"add {sorted(parts - layered)} to the layers contract in pyproject.toml"


def test_every_part_of_the_engine_and_the_command_line_is_a_layer_of_its_own_contract() -> None:
    """Inside the engine each folder owns one mechanism, inside the command line the commands
    sit apart from what they share; both import downward only. A module or folder added to
    either and missing from its contract would sit outside that order."""
    for folder in ("engine", "cli"):
        inside = {p.stem for p in (PACKAGE / folder).glob("*.py") if p.stem != "__init__"}
        inside |= {p.parent.name for p in (PACKAGE / folder).glob("*/__init__.py")}
        assert inside == set().union(*_layers(f"ferry.{folder}")), folder


def test_every_folder_of_the_package_is_built() -> None:
    """setuptools' `packages` is a list, not a search: a folder missing from it would be left
    out of the wheel while every test, run from the source tree, still imports it."""
    folders = {".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("__init__.py")}
    built = set(_pyproject()["tool"]["setuptools"]["packages"])
    assert folders == built, f"pyproject.toml's [tool.setuptools] packages: {sorted(folders ^ built)}"
