"""Load the state machine from `statemachine/*.asl.json` and fill in its `${Substitutions}`.

The ASL stays a reviewable JSON file. A string that is exactly `${Name}` takes the value as
it is (a list of subnets stays a list); `${Name}` inside a longer string is replaced as text.
`"${ChildWorkflow}"` in the parent includes `copy_batch.asl.json` as a Distributed Map's
ItemProcessor, so the child is written once and can also run on its own (as the tests do).
Step Functions wants state names unique in the whole definition, and each reader (prefix,
CSV, JSON Lines, inventory) needs its own Map state, so each included copy's state names
end with the name of the Map that runs them: `CopyBatch (CopyPrefix)`.
A placeholder left without a value, or a value no placeholder uses, is an error: a typo
cannot deploy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

STATEMACHINE_DIR = Path(__file__).resolve().parents[2] / "statemachine"
PARENT_FILE = "ferry.asl.json"
CHILD_FILE = "copy_batch.asl.json"
CHILD_PLACEHOLDER = "ChildWorkflow"
DISTRIBUTED = {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z][A-Za-z0-9]*)\}")


def read(name: str, directory: Path = STATEMACHINE_DIR) -> dict[str, Any]:
    return json.loads((directory / name).read_text())


def child_definition(values: Mapping[str, Any], directory: Path = STATEMACHINE_DIR) -> dict[str, Any]:
    """The child workflow as a complete state machine (what each Map child execution runs)."""
    return substitute(read(CHILD_FILE, directory), values)


def parent_definition(values: Mapping[str, Any], directory: Path = STATEMACHINE_DIR) -> dict[str, Any]:
    """The whole state machine: the parent with the child included in every Distributed Map."""
    parent = read(PARENT_FILE, directory)
    child = read(CHILD_FILE, directory)
    marker = f"${{{CHILD_PLACEHOLDER}}}"
    for name, state in parent["States"].items():
        if state.get("ItemProcessor") == marker:
            state["ItemProcessor"] = {"ProcessorConfig": DISTRIBUTED, **_renamed(child, f" ({name})")}
    return substitute(parent, values)


def _renamed(machine: Mapping[str, Any], suffix: str) -> dict[str, Any]:
    """A copy of a (sub-)state machine whose state names, and the references to them, end in
    `suffix`, at every depth (an inline Map's own states too)."""
    names = _state_names(machine)

    def rename(node: Any, key: str | None = None) -> Any:
        if isinstance(node, Mapping):
            out = {}
            for k, v in node.items():
                if k == "States":
                    out[k] = {n + suffix: rename(s) for n, s in v.items()}
                else:
                    out[k] = rename(v, k)
            return out
        if isinstance(node, list):
            return [rename(v, key) for v in node]
        if key in ("StartAt", "Next", "Default") and node in names:
            return node + suffix
        return node

    return rename({k: v for k, v in machine.items() if k in ("StartAt", "States")})


def _state_names(node: Any) -> set[str]:
    names: set[str] = set()
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "States" and isinstance(value, Mapping):
                names.update(value)
            names |= _state_names(value)
    elif isinstance(node, list):
        for value in node:
            names |= _state_names(value)
    return names


def placeholders(document: Any) -> set[str]:
    """Every `${Name}` a document uses."""
    found: set[str] = set()
    if isinstance(document, str):
        found.update(_PLACEHOLDER.findall(document))
    elif isinstance(document, Mapping):
        for value in document.values():
            found |= placeholders(value)
    elif isinstance(document, list):
        for value in document:
            found |= placeholders(value)
    return found


def substitute(document: Any, values: Mapping[str, Any]) -> Any:
    wanted = placeholders(document)
    missing = wanted - set(values)
    if missing:
        raise KeyError(f"no value for ${{{', '.join(sorted(missing))}}} in the state machine definition")
    unused = set(values) - wanted
    if unused:
        raise KeyError(
            f"values given for placeholders the definition does not use: {', '.join(sorted(unused))}"
        )
    return _fill(document, values)


def _fill(node: Any, values: Mapping[str, Any]) -> Any:
    if isinstance(node, str):
        whole = _PLACEHOLDER.fullmatch(node)
        if whole:
            value = values[whole.group(1)]
            return _fill(value, values) if isinstance(value, dict | list) else value
        return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), node)
    if isinstance(node, Mapping):
        return {key: _fill(value, values) for key, value in node.items()}
    if isinstance(node, list):
        return [_fill(value, values) for value in node]
    return node
