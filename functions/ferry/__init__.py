"""Ferry: copy very many S3 objects of every size, verified, between buckets, regions,
accounts and S3-compatible endpoints.

The public API is small on purpose: build a `Copier` for two `Endpoint`s and a `CopyPolicy`,
then `copy()` one object or `copy_batch()` many before a deadline. Every door (CLI, Lambda,
Fargate) is a few lines over it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ferry.errors import ConfigError, CopyFailed, FerryError, VerificationFailed
from ferry.models import (
    Compare,
    CopyPolicy,
    CopyResult,
    Endpoint,
    Mode,
    SourceObject,
    Status,
    Strategy,
    Target,
)

if TYPE_CHECKING:
    from ferry.engine.records.checkpoints import (
        Checkpoint,
        CheckpointStore,
        FileCheckpointStore,
        MemoryCheckpointStore,
    )
    from ferry.engine.run.deadlines import deadline_in
    from ferry.engine.strategies.copier import Copier, default_concurrency

# The engine's names are imported on first use (PEP 562): the engine loads botocore, and every
# `ferry` command's `--help`, like any `import ferry.<module>`, runs this file (start-up cost).
_LAZY = {
    "Checkpoint": "ferry.engine.records.checkpoints",
    "CheckpointStore": "ferry.engine.records.checkpoints",
    "FileCheckpointStore": "ferry.engine.records.checkpoints",
    "MemoryCheckpointStore": "ferry.engine.records.checkpoints",
    "Copier": "ferry.engine.strategies.copier",
    "deadline_in": "ferry.engine.run.deadlines",
    "default_concurrency": "ferry.engine.strategies.copier",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ferry' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "Checkpoint",
    "CheckpointStore",
    "Compare",
    "ConfigError",
    "CopyFailed",
    "CopyPolicy",
    "CopyResult",
    "Copier",
    "Endpoint",
    "FerryError",
    "FileCheckpointStore",
    "MemoryCheckpointStore",
    "Mode",
    "SourceObject",
    "Status",
    "Strategy",
    "Target",
    "VerificationFailed",
    "deadline_in",
    "default_concurrency",
]
