"""Ferry: copy very many S3 objects of every size, verified, between buckets, regions,
accounts and S3-compatible endpoints.

The public API is small on purpose: build a `Copier` for two `Endpoint`s and a `CopyPolicy`,
then `copy()` one object or `copy_batch()` many before a deadline. Every door (CLI, Lambda,
Fargate) is a few lines over it.
"""

from ferry.engine.checkpoints import Checkpoint, CheckpointStore, FileCheckpointStore, MemoryCheckpointStore
from ferry.engine.copier import Copier, deadline_in, default_concurrency
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
