"""Ferry's own upload marks are never copied as objects, by any door, against versitygw: a
source that is itself a Ferry destination holds them (`.ferry/uploads/<hash>/<hash>.json`,
left by an upload still open, and under a configured marks_prefix too). `ferry copy` (to a
bucket and to a folder), `ferry sync`, a listing job and a manifest job (`ferry run`, the
pipeline's own code) and a replication's events each leave them where they are: sync and
copy leave them out of the listing, as check does; a job counts each one it is given, skipped
with the reason, so its counts still add up to what the Map listed."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from replication_events import s3_event, sqs_event, sqs_record

from conftest import S3Server
from ferry.engine.records.upload_marks import UploadMark, mark_key, write_mark
from ferry.models import DEFAULT_MARKS_PREFIX
from ferry.pipeline.replication.config import Replication
from ferry.pipeline.replication.starter import handle_batch

FERRY = str(Path(sys.executable).with_name("ferry"))
OBJECTS = {"data/a.txt": b"a", "data/b.txt": b"bb", "top.txt": b"top"}
CUSTOM_MARKS = "ops/ferry-marks/"


def ferry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FERRY, *args], capture_output=True, text=True, timeout=300)


def put_marks(server: S3Server, bucket: str) -> list[str]:
    """The bucket as a Ferry destination leaves it: its objects, and the marks of two uploads
    still open (one under the default folder, one under a configured one)."""
    for key, body in OBJECTS.items():
        server.client.put_object(Bucket=bucket, Key=key, Body=body)
    marks = []
    for prefix in (DEFAULT_MARKS_PREFIX, CUSTOM_MARKS):
        mark = UploadMark(
            dest_key="data/big.bin",
            upload_id=uuid.uuid4().hex,
            job_id=None,
            source_bucket="elsewhere",
            source_key="big.bin",
            source_version=None,
            source_etag="0" * 32,
            source_size=20 * 1024 * 1024,
            strategy="stream",
            algorithm=None,
            part_bounds=((0, 10 * 1024 * 1024), (10 * 1024 * 1024, 20 * 1024 * 1024)),
            created=dt.datetime.now(dt.UTC),
        )
        write_mark(server.client, bucket, mark, marks_prefix=prefix)
        marks.append(mark_key(mark.dest_key, mark.upload_id, prefix))
    return marks


def under_marks(keys: list[str]) -> list[str]:
    return [k for k in keys if k.startswith((DEFAULT_MARKS_PREFIX, CUSTOM_MARKS)) or "ferry-marks" in k]


@pytest.fixture
def marked(versitygw: S3Server, vgw_buckets: tuple[str, str]) -> tuple[str, str, list[str]]:
    src, dst = vgw_buckets
    return src, dst, put_marks(versitygw, src)


def test_ferry_copy_of_a_bucket_root_leaves_the_sources_marks(versitygw: S3Server, marked: Any) -> None:
    src, dst, marks = marked
    done = ferry(
        "copy", f"s3://{src}/", f"s3://{dst}/", "--endpoint-url", versitygw.url,
        "--marks-prefix", CUSTOM_MARKS, "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(versitygw.keys(dst)) == sorted(OBJECTS)
    summary = json.loads(done.stdout.splitlines()[-1])
    assert (summary["objects"], summary["copied"]) == (3, 3), summary

    named = ferry("copy", f"s3://{src}/{marks[0]}", f"s3://{dst}/m.json", "--endpoint-url", versitygw.url)
    assert named.returncode == 1 and "Ferry's own upload marks, which are never copied" in named.stderr
    assert "m.json" not in versitygw.keys(dst)


def test_ferry_copy_of_a_bucket_root_to_a_folder_leaves_the_marks(
    versitygw: S3Server, marked: Any, tmp_path: Path
) -> None:
    """A download takes no --marks-prefix (it names the destination's folder): the default
    folder's marks stay behind; a configured folder's cannot be told from the user's files."""
    src, _, marks = marked
    done = ferry("copy", f"s3://{src}/", str(tmp_path / "here"), "--endpoint-url", versitygw.url)
    assert done.returncode == 0, done.stderr
    here = tmp_path / "here"
    files = sorted(str(p.relative_to(here)) for p in here.rglob("*") if p.is_file())
    assert files == sorted([*OBJECTS, marks[1]])
    assert not (here / ".ferry").exists()


def test_ferry_sync_of_a_bucket_root_leaves_the_marks(versitygw: S3Server, marked: Any) -> None:
    src, dst, _ = marked
    done = ferry(
        "sync", f"s3://{src}/", f"s3://{dst}/", "--endpoint-url", versitygw.url, "--marks-prefix", CUSTOM_MARKS
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(versitygw.keys(dst)) == sorted(OBJECTS)


def run_job(server: S3Server, tmp_path: Path, spec: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / f"{spec['job_id']}.json"
    path.write_text(json.dumps(spec))
    done = ferry(
        "run", str(path), "--endpoint-url", server.url, "--ledger", str(tmp_path / "l.sqlite"),
        "--report-dir", str(tmp_path / "reports"), "--report", str(tmp_path / f"{spec['job_id']}.jsonl"), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    assert (
        summary["copied"] + summary["skipped"] + summary["failed"] + summary["pending"] == summary["objects"]
    )
    return summary


def skipped_rows(tmp_path: Path, job_id: str) -> dict[str, str]:
    lines = [json.loads(line) for line in (tmp_path / f"{job_id}.jsonl").read_text().splitlines()]
    return {r["key"]: r["reason"] for r in lines if r.get("status") == "skipped"}


OWN_MARK = "one of Ferry's own upload marks: never copied as an object"


def test_a_listing_job_of_a_bucket_root_counts_the_marks_skipped_and_copies_none(
    versitygw: S3Server, marked: Any, tmp_path: Path
) -> None:
    src, dst, marks = marked
    spec = {
        "job_id": "root-listing",
        "source": {"bucket": src},
        "destination": {"bucket": dst},
        "options": {"marks_prefix": CUSTOM_MARKS},
    }
    summary = run_job(versitygw, tmp_path, spec)
    assert (summary["objects"], summary["copied"], summary["skipped"]) == (5, 3, 2), summary
    assert skipped_rows(tmp_path, "root-listing") == dict.fromkeys(marks, OWN_MARK)
    assert sorted(versitygw.keys(dst)) == sorted(OBJECTS)


def test_a_manifest_that_names_the_marks_copies_none(
    versitygw: S3Server, marked: Any, tmp_path: Path
) -> None:
    src, dst, marks = marked
    rows = [*OBJECTS, *marks]
    versitygw.client.put_object(
        Bucket=src, Key="lists/all.csv", Body=("key\n" + "\n".join(rows) + "\n").encode()
    )
    spec = {
        "job_id": "marks-manifest",
        "source": {"bucket": src, "manifest": {"bucket": src, "key": "lists/all.csv", "format": "csv"}},
        "destination": {"bucket": dst, "prefix": "copied/"},
        "options": {"marks_prefix": CUSTOM_MARKS},
    }
    summary = run_job(versitygw, tmp_path, spec)
    assert (summary["objects"], summary["copied"], summary["skipped"]) == (5, 3, 2), summary
    assert skipped_rows(tmp_path, "marks-manifest") == dict.fromkeys(marks, OWN_MARK)
    assert sorted(versitygw.keys(dst)) == sorted(f"copied/{k}" for k in OBJECTS)


class StartedExecutions:
    """The replication starter's Step Functions, recording what it starts."""

    def __init__(self) -> None:
        self.started: list[dict[str, Any]] = []

    def start_execution(self, **kwargs: Any) -> dict[str, str]:
        self.started.append(kwargs)
        return {
            "executionArn": f"arn:aws:states:us-east-1:123456789012:execution:ferry-jobs:{kwargs['name']}"
        }


def test_replication_events_for_the_marks_start_nothing_and_the_job_copies_only_objects(
    versitygw: S3Server, marked: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Created and deleted marks send events like any key: the starter leaves them out (each
    logged; its message done with, not sent to the dead-letter queue), so the job it starts
    names the objects only, and `ferry run` of that job copies them."""
    src, dst, marks = marked
    reports = versitygw.bucket("reports")
    replication = Replication.parse(
        {
            "name": "marked",
            "source": {"bucket": src},
            "destination": {"bucket": dst, "prefix": "replica/"},
            "deletes": True,
            "options": {"marks_prefix": CUSTOM_MARKS},
        },
        "replications[0]",
    )
    events = [s3_event(src, key, sequencer=f"{n:016X}") for n, key in enumerate([*OBJECTS, *marks])]
    events.append(s3_event(src, marks[0], sequencer="00000000000000FF", detail_type="Object Deleted"))
    records = [sqs_record(e) for e in events]
    sfn = StartedExecutions()
    caplog.set_level("INFO")

    response = handle_batch(
        sqs_event(records),
        replication,
        s3=versitygw.client,
        stepfunctions=sfn,
        report_bucket=reports,
        state_machine_arn="arn:aws:states:us-east-1:123456789012:stateMachine:ferry-jobs",
        deletes=lambda: pytest.fail("no delete was for an object"),
    )

    assert response["batchItemFailures"] == []
    (started,) = sfn.started
    spec = json.loads(started["input"])
    manifest = spec["source"]["manifest"]
    body = versitygw.client.get_object(Bucket=manifest["bucket"], Key=manifest["key"])["Body"].read().decode()
    assert sorted(json.loads(line)["key"] for line in body.splitlines()) == sorted(OBJECTS)
    assert sum("event left out" in r.getMessage() for r in caplog.records) == len(marks) + 1

    spec["job_id"] = "replicated"
    spec["replication"]["deletes"] = False  # copy records need the DynamoDB ledger; the copies do not
    summary = run_job(versitygw, tmp_path, spec)
    assert (summary["objects"], summary["copied"]) == (3, 3), summary
    assert sorted(versitygw.keys(dst)) == sorted(f"replica/{k}" for k in OBJECTS)
