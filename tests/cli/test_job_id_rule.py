"""One rule for a job's id wherever a command takes both a spec and `--job-id` (`ferry run`,
`ferry job start --spec`): the option names the job, over the spec's `job_id` if it has one
(as every option given on the command line overrides the spec's own), so a spec that names
its job runs again under a new id without editing the file; a job id is still used once.

And one rule for what an id may hold (jobspec.check_job_id, inside Step Functions' rule for
execution names), kept by every door: `ferry job validate`, `ferry job start`, `ferry run`,
Prepare, and a replication's starter, which makes ids from the replication's name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FakeLambdaContext, S3Server
from ferry.cli.main import main
from ferry.errors import ConfigError
from ferry.jobspec import SpecError, parse_job_spec, validate_job_spec
from ferry.pipeline.ledger.sqlite import SQLiteLedger
from ferry.pipeline.replication.config import Replication
from ferry.pipeline.replication.starter import job_id_for
from handlers import prepare

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


# -- what an id may hold ---------------------------------------------------------------------

# Ids Step Functions refuses as an execution name (StartExecution's `name`: 1-80 characters;
# no whitespace, brackets < > { } [ ], wildcards ? *, special characters " # % \ ^ | ~ ` $ & ,
# ; : /, control characters U+0000-001F and U+007F-009F), each refused by every door.
REFUSED_IDS = ["nightly-photos\n", "nightly photos", "nightly\tphotos", "photos<1>", "photos#1", "a:b", "a/b"]
REFUSED_IDS += ["x" * 81, "nightly\u0085", ""]
_FORBIDDEN = set(' <>{}[]?*"#%\\^|~`$&,;:/')


def step_functions_takes(name: str) -> bool:
    """Step Functions' execution-name rule, as the StartExecution API reference words it."""

    def bad(char: str) -> bool:
        code = ord(char)
        return (
            char.isspace()
            or char in _FORBIDDEN
            or code <= 0x1F
            or 0x7F <= code <= 0x9F
            or 0xD800 <= code <= 0xDFFF
            or code in (0xFFFE, 0xFFFF)
        )

    return 1 <= len(name) <= 80 and not any(bad(c) for c in name)


def spec_with(job_id: str | None, src: str = "src-bucket", dst: str = "dst-bucket") -> dict[str, object]:
    spec: dict[str, object] = {"source": {"bucket": src, "prefix": "in/"}, "destination": {"bucket": dst}}
    if job_id is not None:
        spec["job_id"] = job_id
    return spec


def test_every_id_the_rule_takes_step_functions_takes_and_80_characters_is_the_longest() -> None:
    def takes(job_id: str) -> bool:
        try:
            return parse_job_spec(spec_with(job_id)).job_id == job_id
        except SpecError as error:
            assert str(error).startswith(f"job_id: {job_id!r} must be "), str(error)
            return False

    for code in [*range(0x3000), 0xFEFF, 0xFFFE, 0xFFFF, 0x1F600]:
        name = f"a{chr(code)}b"
        assert not takes(name) or step_functions_takes(name), repr(name)
    assert takes("a" * 80) and takes("nightly-photos_2026.11")
    for refused in REFUSED_IDS:
        assert not step_functions_takes(refused), repr(refused)
        assert not takes(refused), repr(refused)


@pytest.mark.parametrize("job_id", REFUSED_IDS)
def test_job_validate_and_job_start_refuse_the_id_in_one_line_before_any_aws_call(
    tmp_path: Path, job_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec_with(job_id)))
    for argv in (
        ["job", "validate", str(path)],
        ["job", "start", "--spec", str(path), "--region", "eu-west-1"],
        [
            "job",
            "start",
            "s3://src-bucket/in/",
            "s3://dst-bucket/",
            "--job-id",
            job_id,
            "--region",
            "eu-west-1",
        ],
    ):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith(f"ferry: error: job_id: {job_id!r} must be ") and err.count("\n") == 1, err


def test_run_refuses_an_id_with_a_trailing_newline_and_records_nothing(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="in/a.txt", Body=b"a")
    path = tmp_path / "job.json"
    for job_id, extra in (("nightly-photos\n", ()), (None, ("--job-id", "nightly photos"))):
        path.write_text(json.dumps(spec_with(job_id, src, dst)))
        done = run(versitygw, tmp_path, str(path), *extra)
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("ferry: error: job_id: ") and done.stderr.count("\n") == 1, done.stderr
        assert done.stdout == "" and versitygw.keys(dst) == []
    ledger = SQLiteLedger(tmp_path / "ledger.sqlite")
    assert ledger.job("nightly-photos\n") is None and ledger.job("nightly photos") is None


@pytest.mark.parametrize("job_id", ["nightly-photos\n", "photos<1>", "x" * 81])
def test_prepare_rejects_the_id_from_the_spec_or_the_execution_name(pipeline: object, job_id: str) -> None:
    for event in (
        {"spec": spec_with(job_id, "src", "dst"), "execution_name": "a-good-name"},
        {"spec": spec_with(None, "src", "dst"), "execution_name": job_id},
    ):
        job = prepare.handler(event, FakeLambdaContext())
        assert job.get("rejected", "").startswith(f"job_id: {job_id!r} must be "), job


def test_a_replication_names_its_jobs_within_the_rule_and_refuses_a_name_that_would_not() -> None:
    def replication(name: str) -> Replication:
        return Replication.parse(
            {"name": name, "source": {"bucket": "src"}, "destination": {"bucket": "dst"}}, "replications[0]"
        )

    longest = replication("r" * 40)
    job_id = job_id_for(longest, ["m-1", "m-2"])
    assert len(job_id) == 73
    assert validate_job_spec(longest.job_spec(job_id, "reports", "jobs/x/events.jsonl")).job_id == job_id
    for name in ("photos\n", "photos 1", "r" * 41):
        with pytest.raises(ConfigError, match=r"replications\[0\]\.name: "):
            replication(name)
