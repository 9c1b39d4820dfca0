"""The job's objects as a bounded histogram (classes, size bins, part layouts), never a list, and
the bytes each listed item takes in the Map's batches, which decide how many objects a batch
holds and so how many batches the Map makes."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ferry.costs.inputs import PipelineShape
from ferry.listed_items import select


def item_json_bytes(key: str | int, size: int, storage_class: str) -> int:
    """Bytes of one item as the ItemBatcher measures it: the `s3:listObjectsV2` reader's item
    (input-output-itemreader.html: `Etag` with its quotes, LastModified in epoch seconds) as
    CopyPrefix's ItemSelector renames it (ferry.listed_items), compact UTF-8 JSON."""
    key_text = key if isinstance(key, str) else "k" * key
    item = {
        "Etag": '"' + "0" * 32 + '"',
        "Key": key_text,
        "LastModified": 1668699881,
        "Size": size,
        "StorageClass": storage_class,
    }
    return _json_bytes(select(item))


def _json_bytes(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


# The child's input around its items: `{"Items":[...],"BatchInput":{"job":{...}}}` as the
# ItemBatcher builds it from the ASL's BatchInput, for a job id of ASSUMED_JOB_ID_LENGTH
# characters (the execution's name: a UUID unless one is given).
ASSUMED_JOB_ID_LENGTH = 36
BATCH_WRAPPER_BYTES = _json_bytes(
    {
        "Items": [],
        "BatchInput": {
            "job": {"job_id": "0" * ASSUMED_JOB_ID_LENGTH, "limits": {"large_object_concurrency": 2}}
        },
    }
)


BINS_PER_DOUBLING = 8


def _bin(size: int) -> int:
    return -1 if size <= 0 else int(math.log2(size) * BINS_PER_DOUBLING)


@dataclass
class Bin:
    objects: int = 0
    bytes: int = 0
    item_bytes: int = 0
    parts: int = 0  # source parts, summed, where the listing's ETags tell them

    @property
    def mean_parts(self) -> int:
        return max(1, round(self.parts / self.objects)) if self.objects else 1

    @property
    def mean_size(self) -> int:
        return round(self.bytes / self.objects) if self.objects else 0


@dataclass
class Workload:
    """Objects by (storage class, size bin, layout): eight bins per doubling of size, so memory
    is bounded by the classes times ~700 bins whatever the number of objects. Layout is
    "single" or "multipart" where a listing's ETag says (`-N`), "assumed" otherwise."""

    bins: dict[tuple[str, int, str], Bin] = field(default_factory=dict)

    def add(
        self,
        size: int,
        storage_class: str | None = None,
        key: str | int = 60,
        count: int = 1,
        etag: str | None = None,
        full_checksum: bool | None = None,
    ) -> None:
        cls = storage_class or "STANDARD"
        parts = _etag_parts(etag)
        layout = (
            "assumed" if parts is None else ("multipart" if parts > 1 or "-" in (etag or "") else "single")
        )
        if full_checksum is not None:
            layout += "+crc" if full_checksum else "+md5"
        entry = self.bins.setdefault((cls, _bin(size), layout), Bin())
        entry.objects += count
        entry.bytes += size * count
        entry.item_bytes += item_json_bytes(key, size, cls) * count
        entry.parts += (parts or 0) * count

    def add_listed(self, item: Mapping[str, Any]) -> None:
        """One ListObjectsV2 `Contents` entry: size, class, key, ETag (its `-N` part count) and,
        where the endpoint lists it, the checksum type (FULL_OBJECT: a full-object CRC)."""
        checksum_type = item.get("ChecksumType")
        full = None if checksum_type is None else checksum_type == "FULL_OBJECT"
        self.add(
            int(item.get("Size") or 0),
            item.get("StorageClass"),
            str(item["Key"]),
            etag=item.get("ETag"),
            full_checksum=full,
        )

    @classmethod
    def uniform(
        cls, objects: int, size: int, storage_class: str = "STANDARD", key_length: int = 60
    ) -> Workload:
        work = cls()
        if objects:
            work.add(size, storage_class, key_length, count=objects)
        return work

    @property
    def objects(self) -> int:
        return sum(b.objects for b in self.bins.values())

    @property
    def bytes(self) -> int:
        return sum(b.bytes for b in self.bins.values())

    @property
    def item_bytes(self) -> int:
        """Every object's item as the Map batches it, archived ones too: the Map lists them all."""
        return sum(b.item_bytes for b in self.bins.values())

    def by_class(self) -> dict[str, tuple[int, int]]:
        out: dict[str, list[int]] = {}
        for (cls, _, _), b in self.bins.items():
            entry = out.setdefault(cls, [0, 0])
            entry[0] += b.objects
            entry[1] += b.bytes
        return {k: (v[0], v[1]) for k, v in sorted(out.items())}


def items_per_batch(shape: PipelineShape, mean_item_bytes: float) -> int:
    """The ItemBatcher's batch: the item cap, or fewer where the bytes cap binds first. The
    bytes are the child's whole input: the wrapper and BatchInput once, each item and its comma."""
    room = shape.max_input_bytes_per_batch - BATCH_WRAPPER_BYTES + 1  # the first item has no comma
    by_bytes = int(room // (max(1.0, mean_item_bytes) + 1))
    return max(1, min(shape.max_items_per_batch, by_bytes))


@dataclass(frozen=True)
class Batches:
    """How the Map's ItemBatcher cuts the objects: `count` batches of up to `size`, whose
    items average `mean_item_bytes`."""

    size: int
    count: int
    mean_item_bytes: float


def batches_of(work: Workload, shape: PipelineShape) -> Batches:
    """The batches the Map makes of `work`'s items, on a pipeline of `shape`."""
    objects = work.objects
    mean_item = work.item_bytes / objects if objects else 1.0
    size = items_per_batch(shape, mean_item)
    return Batches(size, math.ceil(objects / size) if objects else 0, mean_item)


def bin_layout(layout: str, b: Bin) -> tuple[int | None, bool | None]:
    """(source parts, full-object checksum) for `object_requests`, from a bin's layout key."""
    shape, _, checksum = layout.partition("+")
    parts = None if shape == "assumed" else b.mean_parts
    return parts, (None if not checksum else checksum == "crc")


def _etag_parts(etag: str | None) -> int | None:
    """A listed ETag's part count: `-N` for a multipart upload, 1 for a plain MD5; None unknown."""
    if not etag:
        return None
    _, dash, count = etag.strip('"').rpartition("-")
    if dash and count.isdigit():
        return int(count)
    return 1
