"""Copy records: what Ferry left at a destination key when it last copied there for a
replication with deletes on, kept so that a later delete can prove the key still holds that copy
(pipeline/replication/deletes.py says why the destination's own state is not enough).

The copy path writes them and the deletes read them; on AWS they are items of the ledger's table
(`dynamodb.DynamoCopyRecords`, `COPY#<hash>`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CopyRecord:
    """What Ferry left at a destination key when it last copied there for a replication."""

    dest_bucket: str
    dest_key: str
    dest_etag: str
    size: int
    source_bucket: str
    source_key: str
    dest_version_id: str | None = None
    source_etag: str | None = None
    source_version_id: str | None = None
    sequencer: str | None = None  # the Object Created event's, when the item carried it
    replication: str | None = None
    job_id: str | None = None
    event_key: str | None = None  # the Object Created event's spelling, when it had two forms

    @property
    def item_id(self) -> str:
        """One item per destination key, spread over partitions (no hot bucket partition)."""
        return record_id(self.dest_bucket, self.dest_key)


def record_id(bucket: str, key: str) -> str:
    """The record's id: a hash of the destination bucket and key."""
    return hashlib.sha256(f"{bucket}\0{key}".encode()).hexdigest()[:40]


class CopyRecords(Protocol):
    """Where copy records live (dynamodb.DynamoCopyRecords on AWS)."""

    def get(self, bucket: str, key: str) -> CopyRecord | None: ...
    def put(self, record: CopyRecord) -> None: ...
    def forget(self, record: CopyRecord) -> None: ...
