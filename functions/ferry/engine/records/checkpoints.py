"""Multipart checkpoints: enough to resume a copy without copying a finished part again.

The store is an interface so that the CLI keeps checkpoints in memory or in files and the
Lambda workers in DynamoDB, with the same engine code.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass
class Checkpoint:
    copy_id: str
    upload_id: str
    strategy: str
    source_etag: str
    source_size: int
    algorithm: str | None
    part_bounds: list[tuple[int, int]]
    parts: dict[int, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["parts"] = {str(k): v for k, v in self.parts.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Checkpoint:
        data = dict(data)
        data["parts"] = {int(k): v for k, v in data.get("parts", {}).items()}
        data["part_bounds"] = [tuple(b) for b in data["part_bounds"]]
        return cls(**data)


def copy_id(
    source_bucket: str, source_key: str, version_id: str | None, dest_bucket: str, dest_key: str
) -> str:
    """Stable id of one source-to-destination copy, usable as a file name or a table key."""
    text = json.dumps([source_bucket, source_key, version_id, dest_bucket, dest_key])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class CheckpointStore(Protocol):
    def load(self, copy_id: str) -> Checkpoint | None: ...
    def save(self, checkpoint: Checkpoint) -> None: ...
    def delete(self, copy_id: str) -> None: ...


class MemoryCheckpointStore:
    def __init__(self) -> None:
        self._items: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def load(self, copy_id: str) -> Checkpoint | None:
        with self._lock:
            data = self._items.get(copy_id)
        return Checkpoint.from_dict(data) if data else None

    def save(self, checkpoint: Checkpoint) -> None:
        with self._lock:
            self._items[checkpoint.copy_id] = json.loads(json.dumps(checkpoint.to_dict()))

    def delete(self, copy_id: str) -> None:
        with self._lock:
            self._items.pop(copy_id, None)

    def __len__(self) -> int:
        return len(self._items)


class FileCheckpointStore:
    """One JSON file per copy; written atomically so a crash never leaves half a checkpoint."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def _path(self, copy_id: str) -> Path:
        return self.directory / f"{copy_id}.json"

    def load(self, copy_id: str) -> Checkpoint | None:
        path = self._path(copy_id)
        if not path.exists():
            return None
        return Checkpoint.from_dict(json.loads(path.read_text()))

    def save(self, checkpoint: Checkpoint) -> None:
        path = self._path(checkpoint.copy_id)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(checkpoint.to_dict()))
        tmp.replace(path)

    def delete(self, copy_id: str) -> None:
        self._path(copy_id).unlink(missing_ok=True)
