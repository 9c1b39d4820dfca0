"""One rule for a job's id wherever a command takes both a spec and `--job-id` (`ferry run`,
`ferry job start --spec`): the option names the job, over the spec's `job_id` if it has one
(as every option given on the command line overrides the spec's own), so a spec that names
its job runs again under a new id without editing the file; a job id is still used once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import S3Server
from ferry.pipeline.ledger.sqlite import SQLiteLedger

FERRY = str(Path(sys.executable).with_name("ferry"))


def ferry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FERRY, *args], capture_output=True, text=True, timeout=300)


def spec_file(tmp_path: Path, src: str, dst: str, job_id: str | None) -> str:
    spec: dict[str, object] = {"source": {"bucket": src, "prefix": "in/"}, "destination": {"bucket": dst}}
    if job_id:
        spec["job_id"] = job_id
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec))
    return str(path)


def run(versitygw: S3Server, tmp_path: Path, spec: str, *extra: str) -> subprocess.CompletedProcess[str]:
    ledger = tmp_path / "ledger.sqlite"
    return ferry("run", spec, "--endpoint-url", versitygw.url, "--ledger", str(ledger), "--quiet", *extra)


def test_a_spec_with_a_job_id_runs_again_under_another_job_id_without_editing_the_file(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    """A job id is used once per ledger: the second run of the same spec is refused, says how to
    run it again, and `--job-id NEW` does, the spec file left as it is."""
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="in/a.txt", Body=b"a")
    spec = spec_file(tmp_path, src, dst, "nightly")
    written = Path(spec).read_text()
    first = run(versitygw, tmp_path, spec)
    assert first.returncode == 0, first.stderr
    assert "job nightly: SUCCEEDED" in first.stdout
    again = run(versitygw, tmp_path, spec)
    assert again.returncode == 1, again.stderr
    assert "already exists" in again.stderr and "--job-id" in again.stderr, again.stderr
    versitygw.client.put_object(Bucket=src, Key="in/b.txt", Body=b"bb")
    other = run(versitygw, tmp_path, spec, "--job-id", "nightly-2")
    assert other.returncode == 0, other.stderr
    assert "job nightly-2: SUCCEEDED" in other.stdout
    assert other.stdout.startswith("2 objects: 1 copied, 1 skipped"), other.stdout
    assert Path(spec).read_text() == written
    ledger = SQLiteLedger(tmp_path / "ledger.sqlite")
    assert ledger.job("nightly")["status"] == "SUCCEEDED"
    assert ledger.job("nightly-2")["spec"]["job_id"] == "nightly-2"


def test_run_takes_the_same_id_in_both_and_the_option_alone(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="in/a.txt", Body=b"a")
    same = run(versitygw, tmp_path, spec_file(tmp_path, src, dst, "same-id"), "--job-id", "same-id")
    assert same.returncode == 0, same.stderr
    assert "job same-id: SUCCEEDED" in same.stdout
    alone = run(versitygw, tmp_path, spec_file(tmp_path, src, dst, None), "--job-id", "option-id")
    assert alone.returncode == 0, alone.stderr
    assert "job option-id: SUCCEEDED" in alone.stdout


def test_the_rule_is_in_both_commands_help() -> None:
    for command in (["run"], ["job", "start"]):
        helped = ferry(*command, "--help")
        text = " ".join(helped.stdout.split())
        assert "--job-id overrides the spec's job_id" in text, text
