"""`ferry run` reads a manifest in bounded memory: the ItemReader streams the manifest object
line by line from S3 instead of holding its text (and a list of its lines) whole, so a
manifest of millions of keys costs what a manifest of thousands does (issue 13, Load).

Measured with tracemalloc (every Python allocation, peak while reading) on a real S3 server,
for manifests 8 times apart in size; `make load` does the same at a million keys, by RSS."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from typing import Any

import pytest

from ferry.pipeline.item_reader import batches, read_items

BATCH_INPUT = {"job": {"job_id": "j", "limits": {"large_object_concurrency": 2}}}


def manifest(rows: int, fmt: str) -> bytes:
    if fmt == "csv":
        lines = ["bucket,key"] + [f"src,photos/{i // 1000:04d}/img-{i:07d}.jpg" for i in range(rows)]
    else:
        lines = [
            json.dumps({"bucket": "src", "key": f"photos/{i // 1000:04d}/img-{i:07d}.jpg"})
            for i in range(rows)
        ]
    return ("\n".join(lines) + "\n").encode()


def peak_while_reading(s3: Any, bucket: str, key: str, fmt: str) -> tuple[int, int]:
    """(items read, peak bytes Python allocated meanwhile) for one pass of the reader and the
    batcher, as `ferry run` drives them."""
    job = {"reader": fmt, "manifest": {"bucket": bucket, "key": key}}
    tracemalloc.start()
    try:
        items = sum(
            len(chunk)
            for chunk in batches(
                read_items(s3, job), max_items=200, max_bytes=128 * 1024, batch_input=BATCH_INPUT
            )
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return items, peak


@pytest.mark.parametrize("fmt,suffix", [("jsonl", ".jsonl"), ("csv", ".csv"), ("csv", ".csv.gz")])
def test_a_manifest_8_times_larger_is_read_in_the_same_memory(versitygw: Any, fmt: str, suffix: str) -> None:
    s3, bucket = versitygw.client, versitygw.bucket("manifest")
    peaks = {}
    for rows in (1_500, 12_000):
        body = manifest(rows, fmt)
        key = f"m-{rows}{suffix}"
        s3.put_object(Bucket=bucket, Key=key, Body=gzip.compress(body) if suffix.endswith(".gz") else body)
        read_items(s3, {"reader": fmt, "manifest": {"bucket": bucket, "key": key}})  # warm imports
        items, peaks[rows] = peak_while_reading(s3, bucket, key, fmt)
        assert items == rows
    # Held whole, the 12,000-row manifest needs MiBs more than the 1,500-row one (its
    # bytes, its text and a list of its lines); streamed, the two peaks are alike.
    assert peaks[12_000] < peaks[1_500] * 1.5 + 128 * 1024, peaks
