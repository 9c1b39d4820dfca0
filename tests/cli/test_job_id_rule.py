"""One rule for a job's id wherever a command takes both a spec and `--job-id` (`ferry run`,
`ferry job start --spec`): the option names the job when the spec has no `job_id`; the same
id in both is fine; two different ids are refused in one line before anything is written or
any AWS call is made, as s5cmd and rclone refuse contradictory flags rather than pick one."""

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


def test_run_refuses_a_job_id_that_differs_from_the_specs_and_writes_nothing(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="in/a.txt", Body=b"a")
    spec = spec_file(tmp_path, src, dst, "from-spec")
    done = run(versitygw, tmp_path, spec, "--job-id", "from-option")
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "--job-id 'from-option'" in done.stderr and "'from-spec'" in done.stderr, done.stderr
    assert done.stdout == ""
    assert versitygw.keys(dst) == []
    ledger = SQLiteLedger(tmp_path / "ledger.sqlite")
    assert ledger.job("from-spec") is None and ledger.job("from-option") is None


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


def test_job_start_refuses_a_job_id_that_differs_from_the_specs_before_any_aws_call(
    tmp_path: Path,
) -> None:
    spec = spec_file(tmp_path, "src-bucket", "dst-bucket", "from-spec")
    done = ferry("job", "start", "--spec", spec, "--job-id", "from-option", "--region", "eu-west-1")
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "--job-id 'from-option'" in done.stderr and "'from-spec'" in done.stderr, done.stderr


def test_the_rule_is_in_both_commands_help() -> None:
    for command in (["run"], ["job", "start"]):
        helped = ferry(*command, "--help")
        text = " ".join(helped.stdout.split())
        assert "a different job_id in the spec is refused" in text, text
