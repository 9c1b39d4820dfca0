"""A job spec is checked once, before anything moves, by the same validator on every door.

From the outside: the `ferry` process, its exit code and stderr, the destination bucket and
the ledger. A spec-level mistake must never reach the objects (where it would fail each of a
million objects alike, with nothing on stderr).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from conftest import S3Server

FERRY = str(Path(sys.executable).with_name("ferry"))


def ferry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FERRY, *args], capture_output=True, text=True, timeout=300)


def spec_file(tmp_path: Path, spec: dict[str, Any] | str) -> str:
    path = tmp_path / f"job-{uuid.uuid4().hex[:6]}.json"
    path.write_text(spec if isinstance(spec, str) else json.dumps(spec), encoding="utf-8")
    return str(path)


def assert_refused(result: subprocess.CompletedProcess[str], field: str) -> None:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert 1 <= len(lines) <= 3, result.stderr
    assert lines[0].startswith(f"ferry: error: {field}"), result.stderr
    assert "Traceback" not in result.stderr


def jobs_recorded(ledger: Path) -> list[tuple[str, ...]]:
    if not ledger.exists():
        return []
    with sqlite3.connect(ledger) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "jobs" not in tables:
            return []
        return list(db.execute("SELECT * FROM jobs"))


def bad_specs(src: str, dst: str) -> list[tuple[str, dict[str, Any], str]]:
    """(what is wrong, the spec, the field its refusal must name first)."""

    def with_options(**options: Any) -> dict[str, Any]:
        return {
            "source": {"bucket": src, "prefix": "data/"},
            "destination": {"bucket": dst},
            "options": options,
        }

    return [
        (
            "destination inside the source",
            {
                "source": {"bucket": src, "prefix": "data/"},
                "destination": {"bucket": src, "prefix": "data/copy/"},
            },
            "destination: ",
        ),
        (
            "destination is the source",
            {"source": {"bucket": src, "prefix": "data/"}, "destination": {"bucket": src, "prefix": "data/"}},
            "destination: ",
        ),
        ("an unknown storage class", with_options(storage_class="GLACIER_FAST"), "options.storage_class: "),
        ("eleven tags", with_options(tags={f"k{i}": "v" for i in range(11)}), "options.tags: "),
        ("a reserved tag key", with_options(tags={"aws:owner": "me"}), "options.tags: "),
        ("a tag value S3 refuses", with_options(tags={"team": "a&b"}), "options.tags: "),
        ("metadata over 2 KB", with_options(metadata={"note": "x" * 2100}), "options.metadata: "),
        ("metadata not ASCII", with_options(metadata={"city": "Zürich"}), "options.metadata.city: "),
        ("a metadata name with a space", with_options(metadata={"my name": "x"}), "options.metadata: "),
        (
            "a destination prefix over S3's key length",
            {
                "source": {"bucket": src, "prefix": "data/"},
                "destination": {"bucket": dst, "prefix": "d" * 1030},
            },
            "destination.prefix: ",
        ),
        (
            "a control character in the source prefix",
            {"source": {"bucket": src, "prefix": "da\x01ta/"}, "destination": {"bucket": dst}},
            "source.prefix: ",
        ),
        (
            "a spec over Step Functions' input quota",
            with_options(exclude=[f"skip/this/very/long/path/number-{i:07d}/*" for i in range(8000)]),
            "the job spec: ",
        ),
        (
            "all_versions with a manifest",
            {
                "source": {"bucket": src, "manifest": {"bucket": src, "key": "m.jsonl", "format": "jsonl"}},
                "destination": {"bucket": dst},
                "options": {"all_versions": True},
            },
            "options.all_versions: ",
        ),
        (
            "all_versions without skip_existing",
            with_options(all_versions=True, skip_existing=False),
            "options.skip_existing: ",
        ),
        ("all_versions not a boolean", with_options(all_versions="yes"), "options.all_versions: "),
        (
            "all_versions onto the source itself",
            {
                "source": {"bucket": src, "prefix": "data/"},
                "destination": {"bucket": src, "prefix": "data/"},
                "options": {"all_versions": True, "storage_class": "STANDARD_IA"},
            },
            "destination: ",
        ),
        (
            "a job id Step Functions refuses",
            {"job_id": "night\tly", "source": {"bucket": src}, "destination": {"bucket": dst}},
            "job_id: ",
        ),
    ]


CASES = [case[0] for case in bad_specs("s", "d")]


@pytest.mark.parametrize("case", CASES)
def test_ferry_job_validate_and_ferry_run_refuse_each_bad_spec_alike_before_anything_is_written(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path, case: str
) -> None:
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="data/one.txt", Body=b"one")
    _, spec, field = next(c for c in bad_specs(src, dst) if c[0] == case)
    path = spec_file(tmp_path, spec)

    assert_refused(ferry("job", "validate", path), field)

    ledger = tmp_path / "ledger.sqlite"
    run = ferry("run", path, "--endpoint-url", versitygw.url, "--ledger", str(ledger))
    assert_refused(run, field)
    assert versitygw.keys(dst) == [] and versitygw.keys(src) == ["data/one.txt"]
    assert jobs_recorded(ledger) == []


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            '{"source": {"bucket": "a-bucket"}, "destination": {"bucket": "b-bucket", "bucket": "c-bucket"}}',
            "twice",
        ),
        (
            '{"source": {"bucket": "a-bucket"}, "destination": {"bucket": "b-bucket"}, "options": {"part_size": NaN}}',
            "NaN",
        ),
    ],
)
def test_a_json_text_that_parsers_read_two_ways_is_refused(tmp_path: Path, text: str, said: str) -> None:
    result = ferry("job", "validate", spec_file(tmp_path, text))
    assert result.returncode == 1 and said in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_storage_class_the_store_lacks_is_refused_once_by_asking_it_before_the_fan_out(
    minio: S3Server, tmp_path: Path
) -> None:
    """MinIO offers STANDARD and REDUCED_REDUNDANCY only (without tiers): a valid S3 class it
    lacks passes the offline checks, and the destination is asked once, up front."""
    src, dst = minio.bucket("src"), minio.bucket("dst")
    for i in range(3):
        minio.client.put_object(Bucket=src, Key=f"data/{i}.txt", Body=b"x")
    spec = {
        "source": {"bucket": src, "prefix": "data/"},
        "destination": {"bucket": dst},
        "options": {"storage_class": "DEEP_ARCHIVE"},
    }
    ledger = tmp_path / "ledger.sqlite"
    run = ferry("run", spec_file(tmp_path, spec), "--endpoint-url", minio.url, "--ledger", str(ledger))
    assert_refused(run, "options.storage_class: the destination")
    assert minio.keys(dst) == [] and minio.open_uploads(dst) == []
    assert jobs_recorded(ledger) == []

    spec["options"] = {"storage_class": "REDUCED_REDUNDANCY"}  # one it has: the job runs
    ok = ferry("run", spec_file(tmp_path, spec), "--endpoint-url", minio.url, "--ledger", str(ledger))
    assert ok.returncode == 0, ok.stderr
    assert sorted(minio.keys(dst)) == ["0.txt", "1.txt", "2.txt"]


def test_a_manifest_row_outside_the_source_prefix_is_skipped_with_that_reason(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = vgw_buckets
    for key in ("data/in.txt", "other/out.txt"):
        versitygw.client.put_object(Bucket=src, Key=key, Body=b"x")
    rows = "".join(json.dumps({"key": k}) + "\n" for k in ("data/in.txt", "other/out.txt"))
    versitygw.client.put_object(Bucket=src, Key="manifest.jsonl", Body=rows.encode())
    spec = {
        "source": {
            "bucket": src,
            "prefix": "data/",
            "manifest": {"bucket": src, "key": "manifest.jsonl", "format": "jsonl"},
        },
        "destination": {"bucket": dst, "prefix": "copy/"},
    }
    report = tmp_path / "report.jsonl"
    run = ferry(
        "run",
        spec_file(tmp_path, spec),
        "--endpoint-url",
        versitygw.url,
        "--ledger",
        str(tmp_path / "l.sqlite"),
        "--report",
        str(report),
    )
    assert run.returncode == 0, run.stderr
    assert versitygw.keys(dst) == ["copy/in.txt"]
    rows_out = [json.loads(line) for line in report.read_text().splitlines()]
    skipped = [r for r in rows_out if r.get("key") == "other/out.txt"]
    assert skipped and skipped[0]["status"] == "skipped"
    assert skipped[0]["reason"] == "outside source.prefix 'data/'"


def test_the_storage_class_list_is_s3s_own() -> None:
    """The offline list of storage classes follows the S3 API model botocore ships."""
    import botocore.session

    from ferry.jobspec import STORAGE_CLASSES

    model = botocore.session.get_session().get_service_model("s3")
    assert set(STORAGE_CLASSES) == set(model.shape_for("StorageClass").enum)
