"""Multipart checkpoints in the ledger's DynamoDB table, split into items by part range.

Why split: DynamoDB refuses an item over 400 KB, and a checkpoint records every finished
part (ETag, MD5, checksums: about 195 bytes of JSON each), so one item held about 2,050
parts, while S3 allows 10,000 and a 5 TiB object needs them all (parts of 525 MiB at least).
Why not S3's own ListParts instead: it returns a part's MD5 only as its ETag, which is no
MD5 under SSE-KMS or SSE-C, and a part's checksum only when the upload was created with
one; the proofs a resumed copy completes with (verify.py) need both, so Ferry keeps its
own record. Why not an object in the report bucket: the engine's other stores, and the
ledger's TTL, already live here, and a checkpoint is read and written by one copy at a time.

Table layout (beside the ledger's items, see dynamodb.py):
    CKPT#<id>  CKPT         the upload: id, strategy, source, algorithm, part sizes (run-length)
    CKPT#<id>  PARTS#<n>    parts n*1000+1 .. (n+1)*1000 done so far, and the upload id they
                            belong to
A save writes the part items that changed, then the head; a load takes only the part items
of the head's upload, so a crash between writes, or the items of a discarded upload, can
never make a part of another upload count as done. Every item expires (TTL).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from ferry.engine.records.checkpoints import Checkpoint
from ferry.pipeline.ledger import attribute_values
from ferry.pipeline.ledger.contract import DAY

# A part record is at most about 230 bytes of JSON (an ETag, an MD5 apart from it and a
# SHA-256 checksum): 1,000 of them are about 230 KB, well inside an item's 400 KB, and 10,000
# parts take 10 items. The head's run-length sizes are at most about 170 KB (10,000 sizes
# that all differ, each up to 5 GiB).
PARTS_PER_ITEM = 1_000
HEAD = "CKPT"
PARTS = "PARTS#"
# An item not rewritten for this long is written again with its expiry pushed back, so a copy
# that lasts days keeps every item of its checkpoint.
_REFRESH_FRACTION = 0.5

_serialize, _deserialize = (
    attribute_values.serialize,
    attribute_values.deserialize,
)  # boto3's rules, not boto3


def run_lengths(bounds: list[tuple[int, int]]) -> list[list[int]]:
    """Part sizes as [size, count] runs: a uniform plan is two runs whatever its part count."""
    runs: list[list[int]] = []
    for start, end in bounds:
        size = end - start
        if runs and runs[-1][0] == size:
            runs[-1][1] += 1
        else:
            runs.append([size, 1])
    return runs


def bounds_of(runs: list[list[int]]) -> list[tuple[int, int]]:
    bounds, start = [], 0
    for size, count in runs:
        for _ in range(count):
            bounds.append((start, start + size))
            start += size
    return bounds


def _part_item_sk(index: int) -> str:
    return f"{PARTS}{index:05d}"


class DynamoCheckpointStore:
    """Multipart checkpoints for the engine, kept until they expire (TTL) or the copy ends."""

    def __init__(self, client: Any, table: str, *, ttl_days: int = 7) -> None:
        self.client, self.table, self.ttl_days = client, table, ttl_days
        # What this process last wrote, per copy and item: (serialized value, when). Only the
        # items that changed are written again (a pass adds parts to one or two items).
        self._written: dict[str, dict[str, tuple[str, float]]] = {}
        self._lock = threading.Lock()

    def _pk(self, copy_id: str) -> str:
        return f"CKPT#{copy_id}"

    def _items(self, copy_id: str, *, keys_only: bool = False) -> Iterator[dict[str, Any]]:
        args: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": self._pk(copy_id)}},
            "ConsistentRead": True,
        }
        if keys_only:
            args["ProjectionExpression"] = "pk, sk"
        for page in self.client.get_paginator("query").paginate(**args):
            for raw in page.get("Items", []):
                yield {name: _deserialize(value) for name, value in raw.items()}

    def load(self, copy_id: str) -> Checkpoint | None:
        items = {item["sk"]: item for item in self._items(copy_id)}
        head = items.get(HEAD)
        if head is None:
            return None
        if "data" in head:  # saved whole in one item (before checkpoints were split)
            return Checkpoint.from_dict(json.loads(head["data"]))
        data = json.loads(head["head"])
        parts: dict[int, dict[str, Any]] = {}
        written: dict[str, tuple[str, float]] = {HEAD: (head["head"], self._written_at(head))}
        for sk, item in items.items():
            if sk.startswith(PARTS) and item.get("upload_id") == data["upload_id"]:
                parts.update({int(n): record for n, record in json.loads(item["parts"]).items()})
                written[sk] = (item["parts"], self._written_at(item))
        with self._lock:
            self._written[copy_id] = written
        return Checkpoint(
            copy_id=copy_id,
            upload_id=data["upload_id"],
            strategy=data["strategy"],
            source_etag=data["source_etag"],
            source_size=data["source_size"],
            algorithm=data["algorithm"],
            part_bounds=bounds_of(data["sizes"]),
            parts=dict(sorted(parts.items())),
        )

    def _written_at(self, item: Mapping[str, Any]) -> float:
        return float(item.get("expires_at", 0)) - self.ttl_days * DAY

    def save(self, checkpoint: Checkpoint) -> None:
        head = json.dumps(
            {
                "upload_id": checkpoint.upload_id,
                "strategy": checkpoint.strategy,
                "source_etag": checkpoint.source_etag,
                "source_size": checkpoint.source_size,
                "algorithm": checkpoint.algorithm,
                "sizes": run_lengths([tuple(b) for b in checkpoint.part_bounds]),  # type: ignore[misc]
            },
            separators=(",", ":"),
        )
        groups: dict[int, dict[str, Any]] = {}
        for number, record in sorted(checkpoint.parts.items()):
            groups.setdefault((number - 1) // PARTS_PER_ITEM, {})[str(number)] = record
        with self._lock:
            written = self._written.setdefault(checkpoint.copy_id, {})
            if written.get(HEAD, ("",))[0] != head:
                written.clear()  # another upload (or the first save): every part item is new
        now = time.time()
        stale = now - self.ttl_days * DAY * _REFRESH_FRACTION
        expires = int(now) + self.ttl_days * DAY
        pk = self._pk(checkpoint.copy_id)
        for index, records in groups.items():
            sk = _part_item_sk(index)
            value = json.dumps(records, separators=(",", ":"))
            if self._unchanged(written, sk, value, stale):
                continue
            self._put(
                {"pk": pk, "sk": sk, "upload_id": checkpoint.upload_id, "parts": value, "expires_at": expires}
            )
            with self._lock:
                written[sk] = (value, now)
        # The head last: a crash before it leaves part items that load() matches to no upload
        # or to the same upload (whose parts they truly are).
        if not self._unchanged(written, HEAD, head, stale):
            self._put({"pk": pk, "sk": HEAD, "head": head, "expires_at": expires})
            with self._lock:
                written[HEAD] = (head, now)

    def _unchanged(self, written: Mapping[str, tuple[str, float]], sk: str, value: str, stale: float) -> bool:
        with self._lock:
            last = written.get(sk)
        return last is not None and last[0] == value and last[1] > stale

    def _put(self, item: Mapping[str, Any]) -> None:
        self.client.put_item(TableName=self.table, Item={k: _serialize(v) for k, v in item.items()})

    def delete(self, copy_id: str) -> None:
        with self._lock:
            self._written.pop(copy_id, None)
        for item in list(self._items(copy_id, keys_only=True)):
            self.client.delete_item(
                TableName=self.table, Key={"pk": {"S": item["pk"]}, "sk": {"S": item["sk"]}}
            )
