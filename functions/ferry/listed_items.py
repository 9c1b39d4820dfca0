"""A listed object as the parent's Distributed Map hands it to CopyBatch: the five fields of the
`s3:listObjectsV2` ItemReader's item under one-letter names.

Why: a batch is capped in bytes (MaxInputBytesPerBatch, under Step Functions' 256 KiB state
payload), so the bytes each item carries decide how many objects share one child execution,
and each child costs state transitions. The reader's own item (`{"Etag": ..., "Key": ...,
"LastModified": ..., "Size": ..., "StorageClass": ...}`, input-output-itemreader.html) spends
about 50 bytes on field names; the ItemSelector of `CopyPrefix` in statemachine/ferry.asl.json
renames them (tests/test_estimate.py keeps that selector equal to `LISTED_FIELDS`). Every
field is kept: the worker copies a listed object from this evidence alone (size, ETag, class;
the time for `compare: size-mtime`), without a HEAD.

This module is vocabulary: the estimate sizes batches with it, the pipeline reads items with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# short name -> the listObjectsV2 reader's field (the ItemSelector's "<short>.$": "$$.Map.Item.Value.<field>")
LISTED_FIELDS: dict[str, str] = {
    "k": "Key",
    "s": "Size",
    "e": "Etag",
    "c": "StorageClass",
    "t": "LastModified",
}


def select(item: Mapping[str, Any]) -> dict[str, Any]:
    """What the ItemSelector makes of one reader item (a field the item lacks is left out, as
    `ferry run`'s own listing may have no time for an object)."""
    return {short: item[long] for short, long in LISTED_FIELDS.items() if long in item}


def expand(item: Mapping[str, Any]) -> dict[str, Any]:
    """A selected item under the reader's names again; an item already in the reader's shape
    (an execution started before the selector existed) comes back unchanged."""
    return {LISTED_FIELDS.get(name, name): value for name, value in item.items()}
