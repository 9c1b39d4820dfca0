"""Ctrl-C (SIGINT) and SIGTERM during `ferry run`: what is in flight finishes and is recorded,
the job is recorded INTERRUPTED (never RUNNING forever), the command that resumes it is
printed, and the resume copies every remaining object once, redoing nothing recorded.

From the outside: the `ferry` process (slowed by tests/cli/slow_run.py so that it is still
running when the signal comes), its exit code and stderr, the SQLite ledger and the bucket.
"""

from __future__ import annotations

import json
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import S3Server

SLOW_RUN = [sys.executable, str(Path(__file__).with_name("slow_run.py"))]
FERRY = str(Path(sys.executable).with_name("ferry"))
OBJECTS = 60


def batches_recorded(ledger: Path) -> int:
    try:
        with sqlite3.connect(ledger) as db:
            return int(db.execute("SELECT count(*) FROM batches").fetchone()[0])
    except sqlite3.Error:
        return 0


def job_status(ledger: Path, job_id: str) -> str:
    with sqlite3.connect(ledger) as db:
        return str(db.execute("SELECT status FROM jobs WHERE job_id = ?", (job_id,)).fetchone()[0])


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_is_recorded_and_resumes_to_succeeded_copying_each_object_once(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path, signum: int
) -> None:
    src, dst = vgw_buckets
    for i in range(OBJECTS):
        versitygw.client.put_object(Bucket=src, Key=f"data/{i:03d}", Body=f"object {i}".encode())
    spec = tmp_path / "job.json"
    spec.write_text(
        json.dumps(
            {
                "job_id": "nightly",
                "source": {"bucket": src, "prefix": "data/"},
                "destination": {"bucket": dst},
            }
        )
    )
    ledger = tmp_path / "ledger.sqlite"
    argv = [
        "run",
        str(spec),
        "--endpoint-url",
        versitygw.url,
        "--ledger",
        str(ledger),
        "--max-items-per-batch",
        "3",
        "--batch-concurrency",
        "1",
    ]
    run = subprocess.Popen([*SLOW_RUN, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while batches_recorded(ledger) < 3 and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.05)
    assert run.poll() is None, "the run ended before it could be interrupted"
    run.send_signal(signum)
    out, err = run.communicate(timeout=120)

    assert run.returncode == 128 + signum, err
    assert "Traceback" not in err
    assert job_status(ledger, "nightly") == "INTERRUPTED"
    copied_before = len(versitygw.keys(dst))
    assert 0 < copied_before < OBJECTS
    resume_line = err.strip().splitlines()[-1].strip()
    assert resume_line.startswith("ferry run ") and resume_line.endswith("--resume nightly"), err
    resume_argv = shlex.split(resume_line)[1:]
    assert resume_argv == [*argv, "--resume", "nightly"]

    # Local jobs can be looked at without a stack, as `ferry job` looks at a deployed one's.
    listed = subprocess.run([FERRY, "job", "list", "--ledger", str(ledger)], capture_output=True, text=True)
    assert listed.returncode == 0 and listed.stdout.startswith("nightly  INTERRUPTED  started "), listed
    status = subprocess.run(
        [FERRY, "job", "status", "nightly", "--ledger", str(ledger)], capture_output=True, text=True
    )
    assert status.returncode == 3, status  # unfinished, as a job still pending
    assert "--resume nightly" in status.stdout

    report = tmp_path / "report.jsonl"
    resumed = subprocess.run(
        [FERRY, *resume_argv, "--json", "--report", str(report)], capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert (summary["status"], summary["objects"], summary["objects_read_by_map"]) == (
        "SUCCEEDED",
        OBJECTS,
        OBJECTS,
    )
    # Copied once each: nothing recorded before was copied again (it would say skipped: already there).
    assert (summary["copied"], summary["skipped"], summary["failed"]) == (OBJECTS, 0, 0)
    rows = [json.loads(line) for line in report.read_text().splitlines() if '"summary"' not in line]
    assert sorted(r["key"] for r in rows) == [f"data/{i:03d}" for i in range(OBJECTS)]
    assert sorted(versitygw.keys(dst)) == [f"{i:03d}" for i in range(OBJECTS)]
    assert versitygw.client.get_object(Bucket=dst, Key="042")["Body"].read() == b"object 42"
    assert job_status(ledger, "nightly") == "SUCCEEDED"

    local_report = subprocess.run(
        [FERRY, "job", "report", "nightly", "--ledger", str(ledger)], capture_output=True, text=True
    )
    assert local_report.returncode == 0, local_report.stderr
    assert local_report.stdout.startswith(
        f"job nightly: SUCCEEDED\n{OBJECTS} objects: {OBJECTS} copied, 0 skipped, 0 failed"
    )

    again = subprocess.run([FERRY, *resume_argv], capture_output=True, text=True, timeout=60)
    assert again.returncode == 1
    assert again.stderr == "ferry: error: --resume: job 'nightly' is SUCCEEDED: there is nothing to resume\n"


def test_a_resume_with_another_spec_is_refused_before_anything_moves(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="data/a", Body=b"a")
    ledger = tmp_path / "ledger.sqlite"
    missing = subprocess.run(
        [FERRY, "run", str(tmp_path / "x.json"), "--ledger", str(ledger), "--resume", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    spec = tmp_path / "job.json"
    spec.write_text(
        json.dumps({"source": {"bucket": src, "prefix": "data/"}, "destination": {"bucket": dst}})
    )
    absent = subprocess.run(
        [
            FERRY,
            "run",
            str(spec),
            "--endpoint-url",
            versitygw.url,
            "--ledger",
            str(ledger),
            "--resume",
            "nope",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert absent.returncode == 1
    assert absent.stderr.startswith("ferry: error: --resume: no job 'nope' in this ledger")
    assert versitygw.keys(dst) == []


def test_local_job_commands_name_a_missing_ledger_or_job_in_one_line(tmp_path: Path) -> None:
    missing = subprocess.run(
        [FERRY, "job", "list", "--ledger", str(tmp_path / "none.sqlite")], capture_output=True, text=True
    )
    assert missing.returncode == 1
    assert missing.stderr.startswith("ferry: error: no ledger at ") and len(missing.stderr.splitlines()) == 1


def test_an_interrupted_all_versions_run_resumes_to_every_history_whole_and_in_order(
    minio: S3Server, tmp_path: Path
) -> None:
    """An all_versions job's items are keys, each copied whole in order: a run stopped mid-way
    and resumed leaves every history complete and in order, each version reported once."""
    from version_histories import history, versioned, write

    keys = 24
    src, dst = versioned(minio, "src"), versioned(minio, "dst")
    write(minio, src, [(f"h/{i:02d}", f"{i} v1".encode()) for i in range(keys)])
    write(minio, src, [(f"h/{i:02d}", f"{i} v2".encode()) for i in range(keys)])
    write(minio, src, [(f"h/{i:02d}", None) for i in range(0, keys, 3)])  # every third deleted
    versions = 2 * keys + len(range(0, keys, 3))
    spec = tmp_path / "job.json"
    spec.write_text(
        json.dumps(
            {
                "job_id": "histories",
                "source": {"bucket": src, "prefix": "h/"},
                "destination": {"bucket": dst},
                "options": {"all_versions": True},
            }
        )
    )
    ledger = tmp_path / "ledger.sqlite"
    argv = ["run", str(spec), "--endpoint-url", minio.url, "--ledger", str(ledger)]
    argv += ["--max-items-per-batch", "2", "--batch-concurrency", "1"]
    run = subprocess.Popen([*SLOW_RUN, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while batches_recorded(ledger) < 2 and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.05)
    assert run.poll() is None, "the run ended before it could be interrupted"
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=120)
    assert run.returncode == 128 + signal.SIGINT, err
    assert job_status(ledger, "histories") == "INTERRUPTED"
    listed = minio.client.list_object_versions(Bucket=dst)
    written_before = len(listed.get("Versions", [])) + len(listed.get("DeleteMarkers", []))
    assert 0 < written_before < versions
    resume_argv = shlex.split(err.strip().splitlines()[-1].strip())[1:]
    assert resume_argv == [*argv, "--resume", "histories"]

    report = tmp_path / "report.jsonl"
    resumed = subprocess.run(
        [FERRY, *resume_argv, "--json", "--report", str(report)], capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert (summary["status"], summary["objects"], summary["failed"]) == ("SUCCEEDED", versions, 0)
    assert summary["copied"] + summary["skipped"] == versions, summary
    rows = [json.loads(line) for line in report.read_text().splitlines() if '"summary"' not in line]
    assert len(rows) == versions  # each version once
    assert len({(r["key"], r["source_version_id"]) for r in rows}) == versions
    for i in range(keys):
        expected = [f"{i} v1", f"{i} v2"] + (["<delete marker>"] if i % 3 == 0 else [])
        assert history(minio, dst, f"{i:02d}") == expected, i  # the source prefix is not kept
