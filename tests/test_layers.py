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


def test_every_part_of_the_engine_is_a_layer_of_its_own_contract() -> None:
    """The engine's folders each own one mechanism and import downward only; a module left at
    the engine's root, or a new folder missing from the contract, would sit outside that order."""
    engine = PACKAGE / "engine"
    parts = {p.parent.name for p in engine.glob("*/__init__.py")}
    loose = {p.stem for p in engine.glob("*.py") if p.stem != "__init__"}
    assert loose == set(), f"engine modules outside a folder: {sorted(loose)}"
    assert parts == set().union(*_layers("ferry.engine"))


def test_every_folder_of_the_package_is_built() -> None:
    """setuptools' `packages` is a list, not a search: a folder missing from it would be left
    out of the wheel while every test, run from the source tree, still imports it."""
    folders = {".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("__init__.py")}
    built = set(_pyproject()["tool"]["setuptools"]["packages"])
    assert folders == built, f"pyproject.toml's [tool.setuptools] packages: {sorted(folders ^ built)}"
