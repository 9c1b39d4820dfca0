"""`ferry run`'s ItemReader and ItemBatcher (ferry.pipeline.item_reader): the item shapes and
batch limits the Distributed Map uses, reproduced for one machine."""

from __future__ import annotations

import json

import pytest

from ferry.errors import ConfigError
from ferry.pipeline.item_reader import batches, csv_items, jsonl_items

BATCH_INPUT = {"job": {"job_id": "j", "limits": {"large_object_concurrency": 2}}}


def child_input_bytes(chunk: list[object]) -> int:
    child = {"Items": chunk, "BatchInput": BATCH_INPUT}
    return len(json.dumps(child, separators=(",", ":"), ensure_ascii=False).encode())


def test_batches_stop_at_the_item_count() -> None:
    out = list(batches(range(25), max_items=10, max_bytes=100_000, batch_input=BATCH_INPUT))
    assert [len(b) for b in out] == [10, 10, 5]
    assert [i for b in out for i in b] == list(range(25))


def test_batches_stop_before_the_child_input_exceeds_the_byte_limit_counting_utf8() -> None:
    items = [{"Key": f"données/{i:04d}-日本語", "Size": i} for i in range(200)]
    limit = 2048
    out = list(batches(items, max_items=10_000, max_bytes=limit, batch_input=BATCH_INPUT))
    assert [i for b in out for i in b] == items
    for index, chunk in enumerate(out):
        assert child_input_bytes(chunk) <= limit
        if index + 1 < len(out):  # full: one more item would not have fitted
            assert child_input_bytes([*chunk, out[index + 1][0]]) > limit


def test_an_item_larger_than_the_limit_goes_alone() -> None:
    items = [{"Key": "a"}, {"Key": "x" * 3000}, {"Key": "b"}]
    out = list(batches(items, max_items=10, max_bytes=1024, batch_input=BATCH_INPUT))
    assert out == [[items[0]], [items[1]], [items[2]]]


def test_csv_rows_are_keyed_by_the_header_with_missing_fields_empty_and_extra_ones_dropped() -> None:
    rows = list(csv_items("key,version_id\na.txt\nb.txt,v2,extra\n\n"))
    assert rows == [{"key": "a.txt", "version_id": ""}, {"key": "b.txt", "version_id": "v2"}]
    with pytest.raises(ConfigError, match="names a column twice"):
        list(csv_items("key,key\na,b\n"))


def test_a_jsonl_line_that_is_not_json_is_named() -> None:
    assert list(jsonl_items('{"key": "a"}\n\n{"key": "b"}\n', "s3://m/l.jsonl")) == [
        {"key": "a"},
        {"key": "b"},
    ]
    with pytest.raises(ConfigError, match="line 2 of s3://m/l.jsonl is not JSON"):
        list(jsonl_items('{"key": "a"}\n{key\n', "s3://m/l.jsonl"))


def test_an_inventory_is_read_from_its_manifest_json_and_gzipped_csv_files() -> None:
    import gzip

    import boto3
    from moto import mock_aws

    from ferry.pipeline.item_reader import read_items

    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="inv")
        data = 'src,"photos/a%20b.jpg",12\nsrc,photos/c.jpg,7\n'
        s3.put_object(Bucket="inv", Key="src/cfg/data/1.csv.gz", Body=gzip.compress(data.encode()))
        manifest = {
            "sourceBucket": "src",
            "destinationBucket": "arn:aws:s3:::inv",
            "fileFormat": "CSV",
            "fileSchema": "Bucket, Key, Size",
            "files": [{"key": "src/cfg/data/1.csv.gz"}],
        }
        s3.put_object(
            Bucket="inv", Key="src/cfg/2026-11-22T00-00Z/manifest.json", Body=json.dumps(manifest).encode()
        )
        job = {
            "reader": "inventory",
            "manifest": {"bucket": "inv", "key": "src/cfg/2026-11-22T00-00Z/manifest.json"},
        }
        items = list(read_items(s3, job))
        # every value a string, keys still URL-encoded (CopyBatch decodes them: items.plan_item)
        assert items == [
            {"Bucket": "src", "Key": "photos/a%20b.jpg", "Size": "12"},
            {"Bucket": "src", "Key": "photos/c.jpg", "Size": "7"},
        ]
        s3.put_object(
            Bucket="inv", Key="parquet.json", Body=json.dumps({**manifest, "fileFormat": "Parquet"}).encode()
        )
        with pytest.raises(ConfigError, match="reads CSV only"):
            list(
                read_items(s3, {"reader": "inventory", "manifest": {"bucket": "inv", "key": "parquet.json"}})
            )
