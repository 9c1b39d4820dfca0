"""Bad manifests, through the pipeline's own steps on moto (the `pipeline` fixture).

Two kinds of problem, two answers:
- the manifest as a whole cannot be read as the format it claims (wrong encoding, no `key`
  column, a row the CSV or JSON parser cannot read, a JSON Lines row that is not an object
  with a key, a line of many MB, no rows at all): Prepare
  refuses the job with one line naming the file, the line and the fix, before the job record
  or any object is written. On AWS the ItemReader would otherwise stop the Map Run mid-way
  (States.ItemReaderFailed) after some batches had copied;
- one row is wrong inside a readable manifest (a CSV row with an empty key, a size that is
  not a size, a size over S3's 5 TiB): CopyBatch fails THAT object with the reason in the job's record, the others
  copy, and the counts add up.
"""

from __future__ import annotations

import gzip
import json
import time
from typing import Any

import pytest

from conftest import PIPELINE_TABLE, FakeLambdaContext
from ferry.limits import TiB
from ferry.pipeline.item_reader import read_items
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from handlers import copy_batch, prepare


def start(
    pipeline: Any, body: bytes, fmt: str, key: str | None = None, name: str = "exec-1"
) -> dict[str, Any]:
    key = key or f"lists/m.{fmt}"
    pipeline.s3.put_object(Bucket="src", Key=key, Body=body)
    spec = {
        "source": {"bucket": "src", "manifest": {"bucket": "src", "key": key, "format": fmt}},
        "destination": {"bucket": "dst", "prefix": "out/"},
    }
    event = {"spec": spec, "execution_name": name, "execution_arn": f"arn:aws:states:::execution:x:{name}"}
    return prepare.handler(event, FakeLambdaContext())


def assert_refused_before_anything_is_written(pipeline: Any, result: dict[str, Any], *parts: str) -> str:
    assert set(result) == {"rejected"}, result
    message = result["rejected"]
    assert message.startswith("source.manifest: "), message
    assert "\n" not in message and "Traceback" not in message
    for part in parts:
        assert part in message, message
    assert DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).job("exec-1") is None
    assert pipeline.s3.list_objects_v2(Bucket="dst").get("KeyCount", 0) == 0
    return message


@pytest.mark.parametrize(
    ("body", "fmt", "parts"),
    [
        # Windows' "Unicode" text (PowerShell's Out-File, Notepad): UTF-16 with a byte-order mark.
        (
            "key\nphotos/a.jpg\n".encode("utf-16"),
            "csv",
            ["s3://src/lists/m.csv", "UTF-16", "save it as UTF-8"],
        ),
        ('{"key": "a"}\n'.encode("utf-16-be"), "jsonl", ["s3://src/lists/m.jsonl", "line 1", "UTF-16"]),
        # Latin-1 bytes on line 3: é is 0xe9, not UTF-8
        (b"key\nphotos/a.jpg\nphotos/caf\xe9.jpg\n", "csv", ["line 3", "not UTF-8", "0xe9", "iconv"]),
        # JSON Lines with a byte-order mark
        (b'\xef\xbb\xbf{"key": "a"}\n', "jsonl", ["line 1", "byte-order mark"]),
        # no header: the first key would be taken for the column name and silently dropped
        (b"photos/a.jpg\nphotos/b.jpg\n", "csv", ["line 1", "no 'key' column", "'photos/a.jpg'", "header"]),
        (b"bucket,path\nsrc,a.jpg\n", "csv", ["line 1", "no 'key' column", "bucket, path"]),
        (b"key,size,key\na,1,b\n", "csv", ["line 1", "'key' twice"]),
        # a quote inside an unquoted field: a CSV reader would silently make "ab.txt" of it
        (b'key\nphotos/a.jpg\n"a"b.txt\nc.txt\n', "csv", ["line 3", 'write a " inside a field as ""']),
        # an unclosed quote swallows every later row into one key
        (b'key\nphotos/a.jpg\n"b.txt\nc.txt\nd.txt\n', "csv", ["line 3", "quote", "never closed"]),
        (b'{"key": "a"}\n{"key": "b"\n', "jsonl", ["line 2", "not JSON"]),
        (b'{"key": "a", "size": NaN}\n', "jsonl", ["line 1", "not JSON", "NaN"]),
        (b"key\n", "csv", ["no rows", "nothing to copy"]),
        (b"", "csv", ["is empty"]),
        (b"\n\n", "jsonl", ["no rows"]),
        # JSON Lines rows that name no object: not an object, no key, a key that is no key
        (
            b'{"key": "a"}\n"just-a-string.txt"\n',
            "jsonl",
            ["line 2", '"just-a-string.txt", not a JSON object'],
        ),
        (b'{"key": "a"}\n[1, 2]\n', "jsonl", ["line 2", "not a JSON object"]),
        (b'{"key": "a"}\n{"bucket": "src"}\n', "jsonl", ["line 2", 'has no "key"', '{"bucket": "src"}']),
        (b'{"key": ""}\n', "jsonl", ["line 1", 'a "key" that is not a key']),
    ],
    ids=[
        "utf16-csv",
        "utf16be-jsonl",
        "latin1-line3",
        "jsonl-bom",
        "no-header",
        "no-key-column",
        "duplicate-column",
        "stray-quote",
        "unclosed-quote",
        "bad-json-line2",
        "json-nan",
        "header-only",
        "empty",
        "blank-jsonl",
        "jsonl-string-row",
        "jsonl-list-row",
        "jsonl-keyless-row",
        "jsonl-empty-key",
    ],
)
def test_prepare_refuses_a_manifest_it_cannot_read_naming_file_line_and_fix(
    pipeline, body, fmt, parts
) -> None:
    assert_refused_before_anything_is_written(pipeline, start(pipeline, body, fmt), *parts)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_line_of_many_mb_is_refused_quickly(pipeline, fmt) -> None:
    """A 16 MiB line (a manifest with no newlines, a binary file named .csv): refused with the
    line's number. (Memory: tests/cli/test_bad_input_cli.py measures it over real HTTP.)"""
    huge = b"x" * (16 * 1024 * 1024)
    body = (b"key\nphotos/a.jpg\n" + huge + b"\n") if fmt == "csv" else (b'{"key": "a"}\n' + huge + b"\n")
    started = time.monotonic()
    result = start(pipeline, body, fmt)
    message = assert_refused_before_anything_is_written(
        pipeline, result, f"line {3 if fmt == 'csv' else 2}", "longer than 256 KiB"
    )
    assert "one object" in message
    assert time.monotonic() - started < 30


def test_a_gzipped_manifest_is_checked_after_decompression(pipeline) -> None:
    body = gzip.compress(b"key\nphotos/a.jpg\nphotos/caf\xe9.jpg\n")
    result = start(pipeline, body, "csv", key="lists/m.csv.gz")
    assert_refused_before_anything_is_written(
        pipeline, result, "s3://src/lists/m.csv.gz", "line 3", "not UTF-8"
    )


def test_a_truncated_gzip_manifest_is_refused(pipeline) -> None:
    """A .gz upload cut short: the rows after the cut would be lost without a word."""
    body = gzip.compress(b"key\n" + b"".join(b"photos/%05d.jpg\n" % i for i in range(2000)))
    result = start(pipeline, body[: len(body) // 2], "csv", key="lists/m.csv.gz")
    assert_refused_before_anything_is_written(pipeline, result, "s3://src/lists/m.csv.gz", "cut short")


def test_an_inventory_whose_files_list_is_malformed_is_refused(pipeline) -> None:
    manifest = {
        "sourceBucket": "src",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size",
        "files": [{"size": 12}],
    }
    result = start(pipeline, json.dumps(manifest).encode(), "inventory", key="inv/manifest.json")
    assert_refused_before_anything_is_written(pipeline, result, "s3://src/inv/manifest.json", "files", "key")


def test_an_inventory_without_a_key_column_is_refused_naming_the_file(pipeline) -> None:
    manifest = {"sourceBucket": "src", "fileFormat": "CSV", "fileSchema": "Bucket, Size", "files": []}
    result = start(pipeline, json.dumps(manifest).encode(), "inventory", key="inv/manifest.json")
    assert_refused_before_anything_is_written(
        pipeline, result, "s3://src/inv/manifest.json", "fileSchema", "no Key column", "Bucket, Size"
    )


def test_an_inventory_whose_data_file_is_gone_is_refused(pipeline) -> None:
    """A lifecycle rule expired a data file that manifest.json still lists: the ItemReader
    would stop the Map mid-way at that file, after the files before it were copied."""
    pipeline.s3.put_object(Bucket="src", Key="inv/data/1.csv.gz", Body=gzip.compress(b"src,a.txt\n"))
    manifest = {
        "sourceBucket": "src",
        "destinationBucket": "arn:aws:s3:::src",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key",
        "files": [{"key": "inv/data/1.csv.gz"}, {"key": "inv/data/2.csv.gz"}],
    }
    result = start(pipeline, json.dumps(manifest).encode(), "inventory", key="inv/manifest.json")
    assert_refused_before_anything_is_written(
        pipeline, result, "s3://src/inv/manifest.json", "s3://src/inv/data/2.csv.gz", "cannot be read"
    )


def test_a_csv_with_a_byte_order_mark_is_read_and_copied(pipeline) -> None:
    """Excel's "CSV UTF-8" starts with a byte-order mark: the first column is still `key`."""
    pipeline.s3.put_object(Bucket="src", Key="photos/a.jpg", Body=b"a")
    job = start(pipeline, b"\xef\xbb\xbfkey\nphotos/a.jpg\n", "csv")
    assert "rejected" not in job, job
    items = list(read_items(pipeline.s3, job))
    out = copy_batch.handler({"job": job, "items": items, "pass": 1}, FakeLambdaContext())
    assert out["counts"]["copied"] == 1, out
    assert pipeline.s3.get_object(Bucket="dst", Key="out/photos/a.jpg")["Body"].read() == b"a"


def test_a_header_with_spaces_after_the_commas_names_its_columns(pipeline) -> None:
    """`bucket, key` (as S3 Inventory's own fileSchema is written) names `key`, not ` key`."""
    pipeline.s3.put_object(Bucket="src", Key="photos/a.jpg", Body=b"a")
    job = start(pipeline, b"bucket, key\nsrc,photos/a.jpg\n", "csv")
    assert "rejected" not in job, job
    out = copy_batch.handler(
        {"job": job, "items": list(read_items(pipeline.s3, job)), "pass": 1}, FakeLambdaContext()
    )
    assert out["counts"]["copied"] == 1, out


def test_bad_rows_fail_only_their_object_with_the_reason_and_the_counts_add_up(pipeline) -> None:
    """A readable CSV with rows that name no object or claim an impossible size: each fails
    with its reason in the job's record, none goes to the large-object path, the rest copy."""
    for key in ("ok/a.txt", "ok/b.txt", "ok/c.txt"):
        pipeline.s3.put_object(Bucket="src", Key=key, Body=key.encode())
    rows = [
        "key,size",
        "ok/a.txt,8",
        ",5",  # no key
        f"big/six-tib.bin,{6 * TiB}",  # over S3's 5 TiB
        "neg.bin,-1",
        "words.bin,twelve",
        "ok/b.txt,",  # size left out: read from S3
        "ok/c.txt,8,extra,fields",  # extra fields dropped, as the ItemReader drops them
    ]
    job = start(pipeline, ("\n".join(rows) + "\n").encode(), "csv")
    assert "rejected" not in job, job
    items = list(read_items(pipeline.s3, job))
    assert len(items) == 7
    out = copy_batch.handler({"job": job, "items": items, "pass": 1}, FakeLambdaContext())
    assert out["large"] == [], "a row claiming 6 TiB must not start a Fargate task"
    counts = out["counts"]
    assert (counts["copied"], counts["failed"]) == (3, 4), counts
    assert counts["copied"] + counts["skipped"] + counts["failed"] + counts["pending"] == len(items)
    failures = {f.key: f.reason for f in DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).failures("exec-1")}
    assert "manifest row has no key" in failures[""]
    assert "5 TiB" in failures["big/six-tib.bin"] and "size" in failures["big/six-tib.bin"]
    assert "-1" in failures["neg.bin"] and "size" in failures["neg.bin"]
    assert "'twelve'" in failures["words.bin"]
    assert sorted(o["Key"] for o in pipeline.s3.list_objects_v2(Bucket="dst")["Contents"]) == [
        "out/ok/a.txt",
        "out/ok/b.txt",
        "out/ok/c.txt",
    ]


def test_bad_json_lines_rows_fail_only_their_object(pipeline) -> None:
    """JSON Lines rows whose size is no size (a float, 1e400 read as infinity, true): each
    fails alone; one such row never fails its whole batch."""
    pipeline.s3.put_object(Bucket="src", Key="ok.txt", Body=b"ok")
    lines = [
        '{"key": "ok.txt"}',
        '{"key": "inf.bin", "size": 1e400}',
        '{"key": "half.bin", "size": 1.5}',
        '{"key": "bool.bin", "size": true}',
        '{"key": "inv.bin", "Size": "7000000000000"}',
    ]
    job = start(pipeline, ("\n".join(lines) + "\n").encode(), "jsonl")
    assert "rejected" not in job, job
    items = list(read_items(pipeline.s3, job))
    assert len(items) == len(lines)
    out = copy_batch.handler({"job": job, "items": items, "pass": 1}, FakeLambdaContext())
    counts = out["counts"]
    assert (counts["copied"], counts["failed"]) == (1, 4), counts
    reasons = [f.reason for f in DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).failures("exec-1")]
    assert len(reasons) == counts["failed"], "every failed row is in the job's failures"
    assert sum("5 TiB" in r for r in reasons) == 2  # 1e400 (infinite) and 7 TB
    assert sum("whole number of bytes" in r for r in reasons) == 2  # 1.5 and true


def test_a_key_with_a_unicode_line_separator_stays_one_row(pipeline) -> None:
    """JSON allows U+2028 and U+0085 unescaped inside a string, and S3 keys may hold them:
    JSON Lines are split at "\\n" only, so such a key is one row, not a broken line."""
    key = "odd\u2028name\u0085.txt"
    pipeline.s3.put_object(Bucket="src", Key=key, Body=b"x")
    body = (json.dumps({"key": key}, ensure_ascii=False) + "\n").encode()
    job = start(pipeline, body, "jsonl")
    assert "rejected" not in job, job
    items = list(read_items(pipeline.s3, job))
    assert items == [{"key": key}]


def test_an_inventory_row_over_5_tib_fails_alone(pipeline) -> None:
    """S3 Inventory rows are strings; one claiming 6 TiB (a hand-edited or corrupt inventory)
    fails with the reason, the other row copies, no Fargate task is asked for."""
    pipeline.s3.put_object(Bucket="src", Key="ok.txt", Body=b"ok")
    data = f'src,ok.txt,2,true,false\nsrc,"big%20one.bin",{6 * TiB},true,false\n'.encode()
    pipeline.s3.put_object(Bucket="src", Key="inv/data/1.csv.gz", Body=gzip.compress(data))
    manifest = {
        "sourceBucket": "src",
        "destinationBucket": "arn:aws:s3:::src",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, IsLatest, IsDeleteMarker",
        "files": [{"key": "inv/data/1.csv.gz"}],
    }
    job = start(pipeline, json.dumps(manifest).encode(), "inventory", key="inv/manifest.json")
    assert "rejected" not in job, job
    items = list(read_items(pipeline.s3, job))
    out = copy_batch.handler({"job": job, "items": items, "pass": 1}, FakeLambdaContext())
    assert out["large"] == []
    assert (out["counts"]["copied"], out["counts"]["failed"]) == (1, 1), out["counts"]
    (failure,) = DynamoLedger(pipeline.dynamodb, PIPELINE_TABLE).failures("exec-1")
    assert "5 TiB" in failure.reason and failure.key == "big one.bin"  # decoded, as a retry needs it
