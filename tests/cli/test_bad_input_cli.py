"""Bad input at the command line: job spec files and manifests that `ferry run`, `ferry job
validate` and `ferry job start` are given. Each answer is one line (`ferry: error: ...`) that
names the field or the file and line, exit code 1, no traceback, and nothing written."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from conftest import S3Server
from ferry.cli.main import main
from ferry.pipeline.ledger.sqlite import SQLiteLedger

FERRY = str(Path(sys.executable).with_name("ferry"))
GOOD = {"source": {"bucket": "src"}, "destination": {"bucket": "dst"}}


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def assert_one_line(err: str, *parts: str) -> None:
    assert err.startswith("ferry: error: "), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for part in parts:
        assert part in err, err


def spec_paths(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "job.json"
    path.write_bytes(data)
    return str(path)


def every_door(tmp_path: Path, spec: str) -> list[tuple[int, str, str]]:
    """The spec given to each command that reads one; none needs AWS to refuse it."""
    ledger = str(tmp_path / "l.sqlite")
    return [
        call("job", "validate", spec),
        call("job", "start", "--spec", spec, "--region", "us-east-1"),
        call("run", spec, "--ledger", ledger, "--endpoint-url", "http://127.0.0.1:9"),
    ]


@pytest.mark.parametrize(
    ("data", "parts"),
    [
        # PowerShell's `>` and Out-File write UTF-16 with a byte-order mark
        (json.dumps(GOOD).encode("utf-16"), ["job.json", "UTF-16", "save it as UTF-8"]),
        (
            json.dumps({**GOOD, "job_id": "café"}, ensure_ascii=False).encode("latin-1"),
            ["job.json", "not UTF-8", "line 1", "0xe9"],
        ),
    ],
    ids=["utf16", "latin1"],
)
def test_a_spec_file_in_another_encoding_is_named_in_one_line(tmp_path, data, parts) -> None:
    for code, _, err in every_door(tmp_path, spec_paths(tmp_path, data)):
        assert code == 1
        assert_one_line(err, *parts)
    assert not (tmp_path / "l.sqlite").exists() or SQLiteLedger(tmp_path / "l.sqlite").job("x") is None


def test_a_spec_file_with_a_utf8_byte_order_mark_is_read(tmp_path) -> None:
    spec = spec_paths(tmp_path, b"\xef\xbb\xbf" + json.dumps(GOOD).encode())
    code, out, err = call("job", "validate", spec)
    assert code == 0, err
    assert json.loads(out)["source"] == {"bucket": "src", "prefix": ""}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({**GOOD, "options": "fast"}, "options: must be an object, not str"),
        ({**GOOD, "options": ["stream"]}, "options: must be an object, not list"),
        (
            {"source": "s3://src/photos", "destination": {"bucket": "dst"}},
            "source: must be an object, not str",
        ),
        (
            {**GOOD, "destination": {"bucket": "dst", "region": "eu-west-1"}},
            "destination.region: unknown field",
        ),
        (
            {
                "source": {"manifest": {"bucket": "src", "key": "m.csv", "format": "csv", "gzip": True}},
                "destination": {"bucket": "dst"},
            },
            "source.manifest.gzip: unknown field",
        ),
        (
            {
                "source": {"manifest": {"bucket": "src", "key": "m.csv", "format": ["csv"]}},
                "destination": {"bucket": "dst"},
            },
            "source.manifest.format: ['csv'] is not one of",
        ),
        (
            {
                "source": {"manifest": {"bucket": "src", "key": 7, "format": "csv"}},
                "destination": {"bucket": "dst"},
            },
            "source.manifest.key: give the manifest's object key",
        ),
        ({**GOOD, "source": {"bucket": "src", "prefix": 5}}, "source.prefix: must be a string"),
        ({**GOOD, "destination": {"bucket": "dst", "prefix": None}}, "destination.prefix: must be a string"),
        ({**GOOD, "options": {"Mode": "stream"}}, "options.Mode: unknown option"),
        ({**GOOD, "options": {"include": 5}}, "options.include: must be a list of glob patterns"),
        ({**GOOD, "options": {"part_size": 1.5}}, "options.part_size: must be a size"),
        ({**GOOD, "options": {"tags": {"team": 1}}}, "options.tags: must be an object of string keys"),
        ({**GOOD, "options": {"restore_days": "7"}}, "options.restore_days: '7' must be a whole number"),
        ({**GOOD, "options": {"dry_run": "no"}}, "options.dry_run: must be true or false"),
        (
            {**GOOD, "replication": {"name": "r", "deletes": "yes"}},
            "replication.deletes: must be true or false",
        ),
        ({**GOOD, "replication": {"name": "r", "every": "1h"}}, "replication.every: unknown field"),
        ({**GOOD, "job_id": 5}, "job_id: 5 must be"),
    ],
)
def test_a_wrong_field_is_named_by_every_command_that_reads_a_spec(tmp_path, spec, field) -> None:
    """Unknown fields and wrong types, nested ones too, refused by `ferry job validate`,
    `ferry job start` (before it asks AWS anything) and `ferry run` (before it writes)."""
    path = spec_paths(tmp_path, json.dumps(spec).encode())
    for code, _, err in every_door(tmp_path, path):
        assert code == 1, err
        assert_one_line(err, field)
        assert err.startswith(f"ferry: error: {field.split(':')[0]}:"), err


def test_job_start_with_a_flag_over_a_spec_whose_options_are_not_an_object_names_the_field(tmp_path) -> None:
    path = spec_paths(tmp_path, json.dumps({**GOOD, "options": ["stream"]}).encode())
    code, _, err = call("job", "start", "--spec", path, "--mode", "stream", "--region", "us-east-1")
    assert code == 1
    assert_one_line(err, "options: must be an object, not list")


# -- manifests through `ferry run`, against versitygw ----------------------------------------


def run_manifest(versitygw: S3Server, src: str, dst: str, tmp_path: Path, body: bytes, fmt: str) -> Any:
    versitygw.client.put_object(Bucket=src, Key=f"lists/m.{fmt}", Body=body)
    spec = spec_paths(
        tmp_path,
        json.dumps(
            {
                "job_id": "bad-manifest",
                "source": {
                    "bucket": src,
                    "manifest": {"bucket": src, "key": f"lists/m.{fmt}", "format": fmt},
                },
                "destination": {"bucket": dst, "prefix": "out/"},
            }
        ).encode(),
    )
    return subprocess.run(
        [FERRY, "run", spec, "--endpoint-url", versitygw.url, "--ledger", str(tmp_path / "l.sqlite"),
         "--report-dir", str(tmp_path / "reports"), "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_run_refuses_a_utf16_manifest_in_one_line_and_writes_nothing(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="photos/a.jpg", Body=b"a")
    run = run_manifest(versitygw, src, dst, tmp_path, "key\nphotos/a.jpg\n".encode("utf-16"), "csv")
    assert run.returncode == 1, run.stderr
    assert_one_line(run.stderr, f"s3://{src}/lists/m.csv", "UTF-16", "save it as UTF-8")
    assert run.stdout == ""
    assert versitygw.keys(dst) == []
    assert SQLiteLedger(tmp_path / "l.sqlite").job("bad-manifest") is None
    assert not (tmp_path / "reports").exists()


def test_run_refuses_a_manifest_that_breaks_on_a_late_line_before_copying_any_row(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    """Line 1,502 of a JSON Lines manifest is broken: the 1,500 good rows before it are not
    copied (the ItemReader would have handed them out before it reached the bad line)."""
    src, dst = vgw_buckets
    lines = [json.dumps({"key": f"d/{i:04d}"}) for i in range(1500)] + ['{"key": "d/x"}', '{"key": ']
    versitygw.client.put_object(Bucket=src, Key="d/0000", Body=b"0")
    run = run_manifest(versitygw, src, dst, tmp_path, ("\n".join(lines) + "\n").encode(), "jsonl")
    assert run.returncode == 1, run.stderr
    assert_one_line(run.stderr, f"line 1502 of s3://{src}/lists/m.jsonl is not JSON")
    assert versitygw.keys(dst) == []


def test_run_fails_only_the_bad_rows_of_a_good_manifest_and_the_counts_add_up(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = vgw_buckets
    for key in ("ok/a.txt", "ok/b.txt"):
        versitygw.client.put_object(Bucket=src, Key=key, Body=key.encode())
    body = f"key,size\nok/a.txt,8\n,3\nhuge.bin,{6 * 1024**4}\nok/b.txt,\n".encode()
    run = run_manifest(versitygw, src, dst, tmp_path, body, "csv")
    assert run.returncode == 2, run.stderr
    summary = json.loads(run.stdout)
    assert (summary["objects"], summary["copied"], summary["failed"]) == (4, 2, 2), summary
    assert summary["objects"] == summary["objects_read_by_map"]
    assert summary["status"] == "PARTIAL"
    assert "manifest row has no key" in run.stderr
    assert "huge.bin" in run.stderr and "5 TiB" in run.stderr
    assert sorted(versitygw.keys(dst)) == ["out/ok/a.txt", "out/ok/b.txt"]
    failures = [json.loads(line) for line in Path(summary["failures_report"]).read_text().splitlines()]
    assert len(failures) == 2


def test_a_line_of_64_mib_is_refused_without_holding_it_in_memory(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    """`ferry run` (in this process, so tracemalloc sees every allocation) reads a manifest whose
    second line is 64 MiB over HTTP: refused naming the line, peak memory a few MiB."""
    src, dst = vgw_buckets
    versitygw.client.put_object(
        Bucket=src, Key="lists/m.csv", Body=b"key\n" + b"k" * (64 * 1024 * 1024) + b"\n"
    )
    spec = spec_paths(
        tmp_path,
        json.dumps(
            {
                "source": {"bucket": src, "manifest": {"bucket": src, "key": "lists/m.csv", "format": "csv"}},
                "destination": {"bucket": dst},
            }
        ).encode(),
    )
    tracemalloc.start()
    try:
        code, _, err = call(
            "run", spec, "--endpoint-url", versitygw.url, "--ledger", str(tmp_path / "l.sqlite")
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 1
    assert_one_line(err, f"line 2 of s3://{src}/lists/m.csv is longer than 256 KiB")
    assert peak < 16 * 1024 * 1024, f"peak {peak / 1024 / 1024:.1f} MiB to refuse a 64 MiB line"
    assert versitygw.keys(dst) == []
