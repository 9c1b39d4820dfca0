"""`--dry-run` says what a run would do, with counts (would copy, would skip), exits 0 and
writes nothing: `ferry copy --dry-run`, and `ferry run` of a spec whose options say dry_run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import S3Server
from ferry.cli.commands.jobs_command import _report_exit, report_text

FERRY = str(Path(sys.executable).with_name("ferry"))


def ferry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FERRY, *args], capture_output=True, text=True, timeout=300)


def three_sources_one_already_copied(versitygw: S3Server, src: str, dst: str) -> None:
    """`a` (5 B) and `b` (7 B) are new; `c` is already identical at the destination."""
    versitygw.client.put_object(Bucket=src, Key="in/c", Body=b"ccc")
    done = ferry("copy", f"s3://{src}/in/", f"s3://{dst}/out/", "--endpoint-url", versitygw.url)
    assert done.returncode == 0, done.stderr
    versitygw.client.put_object(Bucket=src, Key="in/a", Body=b"aaaaa")
    versitygw.client.put_object(Bucket=src, Key="in/b", Body=b"bbbbbbb")


def test_copy_dry_run_says_what_it_would_copy_and_skip_and_writes_nothing(
    versitygw: S3Server, vgw_buckets: tuple[str, str]
) -> None:
    src, dst = vgw_buckets
    three_sources_one_already_copied(versitygw, src, dst)
    before = sorted(versitygw.keys(dst))
    run = ferry("copy", f"s3://{src}/in/", f"s3://{dst}/out/", "--endpoint-url", versitygw.url, "--dry-run")
    assert run.returncode == 0, run.stderr
    last = run.stdout.splitlines()[-1]
    assert last == "dry run: 3 objects: would copy 2 (12 B), would skip 1, 0 failed; nothing was written"
    assert "pending" not in run.stdout
    assert sorted(versitygw.keys(dst)) == before == ["out/c"]
    as_json = ferry(
        "copy", f"s3://{src}/in/", f"s3://{dst}/out/", "--endpoint-url", versitygw.url, "--dry-run", "--json"
    )
    summary = json.loads(as_json.stdout)
    assert (summary["dry_run"], summary["would_copy"], summary["would_skip"]) == (True, 2, 1), summary
    assert summary["would_copy_bytes"] == 12


def test_copy_dry_run_lists_each_object_it_would_copy_and_counts_them_apart_from_pending(
    versitygw: S3Server, vgw_buckets: tuple[str, str]
) -> None:
    """As `ferry sync --dry-run` does: one `would copy:` line per object; and in the JSON (and
    the report's summary) an object it would copy is `would_copy`, not `pending`, which means
    an archive restore under way."""
    src, dst = vgw_buckets
    three_sources_one_already_copied(versitygw, src, dst)
    where = (f"s3://{src}/in/", f"s3://{dst}/out/", "--endpoint-url", versitygw.url, "--dry-run")
    run = ferry("copy", *where)
    assert run.returncode == 0, run.stderr
    listed = sorted(line for line in run.stdout.splitlines() if line.startswith("would "))
    assert listed == [f"would copy: s3://{src}/in/a", f"would copy: s3://{src}/in/b"], run.stdout
    assert run.stdout.splitlines()[-1].startswith("dry run: 3 objects: would copy 2 (12 B), would skip 1")
    as_json = ferry("copy", *where, "--json")
    summary = json.loads(as_json.stdout)  # stdout holds the JSON alone; the list goes to stderr
    assert (summary["pending"], summary["would_copy"], summary["skipped"]) == (0, 2, 1), summary
    assert (
        summary["objects"]
        == summary["copied"]
        + summary["skipped"]
        + summary["failed"]
        + summary["pending"]
        + summary["would_copy"]
        + summary["would_restore"]
    )
    assert f"would copy: s3://{src}/in/a" in as_json.stderr
    sync = ferry("sync", *where)
    assert sorted(line for line in sync.stdout.splitlines() if line.startswith("would ")) == listed


def test_run_of_a_dry_run_spec_says_what_it_would_do_exits_0_and_copies_nothing(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = vgw_buckets
    three_sources_one_already_copied(versitygw, src, dst)
    spec = {
        "job_id": "dry-1",
        "source": {"bucket": src, "prefix": "in/"},
        "destination": {"bucket": dst, "prefix": "out/"},
        "options": {"dry_run": True},
    }
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec))
    run = ferry("run", str(path), "--endpoint-url", versitygw.url, "--ledger", str(tmp_path / "l.sqlite"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith(
        "dry run: 3 objects: would copy 2 (12 B), would skip 1, 0 failed; nothing was written"
    ), run.stdout
    assert "job dry-1: SUCCEEDED" in run.stdout
    assert sorted(versitygw.keys(dst)) == ["out/c"]


def test_a_job_report_of_a_dry_run_says_what_it_would_have_done() -> None:
    summary = {"status": "SUCCEEDED", "dry_run": True, "objects": 3, "skipped": 1, "pending": 2}
    report = {"summary": summary, "report": "s3://r/summary.json", "failures_report": "s3://r/failures.jsonl"}
    text = report_text(report, "dry-1", every_failure=False)
    assert text.splitlines()[1] == (
        "dry run: 3 objects: would copy or restore 2, would skip 1, 0 failed; nothing was written"
    )
    assert _report_exit(summary) == 0
