"""`ferry run JOB.json` as a user runs it (the installed executable) against versitygw: the
pipeline's own code on this machine, with the SQLite ledger (default) and with a DynamoDB
table (moto's server), a prefix job and a manifest job, a large object through the
large-object entry point, a re-run that skips everything, and a failure counted with its
reason and exit code 2. Counts always add up to the objects listed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from conftest import S3Server, create_ledger_table
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from ferry.pipeline.ledger.sqlite import SQLiteLedger
from ferry_process import ferry as run_process

FERRY = str(Path(sys.executable).with_name("ferry"))
MiB = 1024 * 1024


def ferry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FERRY, *args], capture_output=True, text=True, timeout=300)


def write_spec(tmp_path: Path, spec: dict[str, Any]) -> str:
    path = tmp_path / f"job-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(spec))
    return str(path)


def assert_counts_add_up(summary: dict[str, Any]) -> None:
    parts = summary["copied"] + summary["skipped"] + summary["failed"] + summary["pending"]
    assert parts == summary["objects"] == summary["objects_read_by_map"]


def dynamodb_table(motoserver: S3Server) -> tuple[Any, str]:
    client = boto3.client("dynamodb", endpoint_url=motoserver.url, region_name="us-east-1")
    name = f"ledger-{uuid.uuid4().hex[:8]}"
    create_ledger_table(client, name)
    return client, name


@pytest.fixture(params=["sqlite", "dynamodb"])
def ledger_args(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[list[str], Any]:
    """The command-line options choosing the ledger, and that ledger opened for the test."""
    if request.param == "sqlite":
        path = tmp_path / "ledger.sqlite"
        return ["--ledger", str(path), "--report-dir", str(tmp_path / "reports")], lambda: SQLiteLedger(path)
    motoserver = request.getfixturevalue("motoserver")
    client, table = dynamodb_table(motoserver)
    args = [
        "--table",
        table,
        "--table-endpoint-url",
        motoserver.url,
        "--report-dir",
        str(tmp_path / "reports"),
    ]
    return args, lambda: DynamoLedger(client, table)


def test_a_prefix_job_runs_on_either_ledger_and_a_rerun_skips_everything(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path, ledger_args: Any
) -> None:
    src, dst = vgw_buckets
    keys = [f"data/{i:02d}.txt" for i in range(12)] + ["data/sub/deep.txt", "other/not-me.txt"]
    for key in keys:
        versitygw.client.put_object(Bucket=src, Key=key, Body=f"body of {key}".encode())
    spec = write_spec(
        tmp_path,
        {"source": {"bucket": src, "prefix": "data"}, "destination": {"bucket": dst, "prefix": "copy/"}},
    )
    args, open_ledger = ledger_args
    common = ["--endpoint-url", versitygw.url, "--max-items-per-batch", "5", *args]

    first = ferry("run", spec, *common, "--json")
    assert first.returncode == 0, first.stderr
    assert first.stderr.startswith(
        "13 objects: 13 copied"
    )  # the summary (--json: on stderr), no bar in a pipe
    assert "\r" not in first.stderr and "\x1b" not in first.stderr
    summary = json.loads(first.stdout)
    assert (summary["objects"], summary["copied"], summary["status"]) == (13, 13, "SUCCEEDED")
    assert summary["batches"] == 3  # 5 + 5 + 3 items, one pass each
    assert_counts_add_up(summary)
    assert sorted(versitygw.keys(dst)) == sorted(f"copy/{k[5:]}" for k in keys if k.startswith("data/"))
    assert (
        versitygw.client.get_object(Bucket=dst, Key="copy/sub/deep.txt")["Body"].read()
        == b"body of data/sub/deep.txt"
    )
    job = open_ledger().job(summary["job_id"])
    assert job["status"] == "SUCCEEDED" and job["copied"] == 13

    again = ferry("run", spec, *common)
    assert again.returncode == 0, again.stderr
    assert "13 objects: 0 copied, 13 skipped, 0 failed, 0 pending" in again.stdout
    assert ": SUCCEEDED; report: " in again.stdout


def test_an_object_above_the_threshold_goes_through_the_large_object_entry_point(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = vgw_buckets
    big = bytes(range(256)) * (6 * MiB // 256)
    versitygw.client.put_object(Bucket=src, Key="in/big.bin", Body=big)
    for i in range(3):
        versitygw.client.put_object(Bucket=src, Key=f"in/small-{i}", Body=b"x" * i)
    spec = write_spec(
        tmp_path,
        {"job_id": "large-1", "source": {"bucket": src, "prefix": "in/"}, "destination": {"bucket": dst}},
    )
    ledger, report = tmp_path / "l.sqlite", tmp_path / "report.jsonl"
    run = ferry(
        "run", spec, "--endpoint-url", versitygw.url, "--ledger", str(ledger),
        "--large-object-threshold", "5MiB", "--report", str(report),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "4 objects: 4 copied, 0 skipped, 0 failed, 0 pending" in run.stdout
    assert versitygw.client.get_object(Bucket=dst, Key="big.bin")["Body"].read() == big
    markers = [m["sk"] for m in SQLiteLedger(ledger).batches("large-1")]
    large = [m for m in markers if "-large-" in m]
    assert len(large) == 1, markers  # recorded under the large-object key, by copy_large_object
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    rows, summary = lines[:-1], lines[-1]["summary"]
    assert {r["key"]: r["status"] for r in rows} == {
        k: "copied" for k in ["in/big.bin", "in/small-0", "in/small-1", "in/small-2"]
    }
    assert next(r for r in rows if r["key"] == "in/big.bin")["bytes"] == len(big)
    assert summary["copied"] == 4 and summary["bytes_copied"] == len(big) + 3
    assert summary["job_id"] == "large-1" and summary["status"] == "SUCCEEDED"
    assert Path(summary["report"]).is_file()  # summary.json beside the ledger, as Finalize writes it
    assert "<html" in Path(summary["report_html"]).read_text()[:200].lower()  # and the page beside it


def test_a_manifest_job_on_dynamodb_counts_a_missing_object_failed_with_its_reason_and_exits_2(
    versitygw: S3Server, vgw_buckets: tuple[str, str], motoserver: S3Server, tmp_path: Path
) -> None:
    src, dst = vgw_buckets
    for key in ("m/a.txt", "m/b.txt", "m/c.txt"):
        versitygw.client.put_object(Bucket=src, Key=key, Body=key.encode())
    manifest = "key\nm/a.txt\nm/b.txt\nm/missing.txt\nm/c.txt\n"
    versitygw.client.put_object(Bucket=src, Key="lists/run.csv", Body=manifest.encode())
    client, table = dynamodb_table(motoserver)
    spec = write_spec(
        tmp_path,
        {
            "job_id": "manifest-1",
            "source": {
                "bucket": src,
                "prefix": "m/",
                "manifest": {"bucket": src, "key": "lists/run.csv", "format": "csv"},
            },
            "destination": {"bucket": dst, "prefix": "from-list/"},
        },
    )
    run = ferry(
        "run", spec, "--endpoint-url", versitygw.url, "--table", table, "--table-endpoint-url", motoserver.url,
        "--report-dir", str(tmp_path / "reports"), "--json",
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    summary = json.loads(run.stdout)
    assert (summary["objects"], summary["copied"], summary["failed"]) == (4, 3, 1)
    assert summary["status"] == "PARTIAL"
    assert_counts_add_up(summary)
    assert sorted(versitygw.keys(dst)) == ["from-list/a.txt", "from-list/b.txt", "from-list/c.txt"]
    assert f"failed: s3://{src}/m/missing.txt: " in run.stderr
    ledger = DynamoLedger(client, table)
    (failure,) = list(ledger.failures("manifest-1"))
    assert failure.key == "m/missing.txt" and ("NoSuchKey" in failure.reason or "not exist" in failure.reason)
    assert ledger.job("manifest-1")["status"] == "PARTIAL"
    failures_file = Path(summary["failures_report"])
    assert json.loads(failures_file.read_text())["key"] == "m/missing.txt"


def test_a_refused_spec_a_reused_job_id_and_a_missing_table_exit_1_with_one_line(
    versitygw: S3Server, vgw_buckets: tuple[str, str], motoserver: S3Server, tmp_path: Path
) -> None:
    src, dst = vgw_buckets
    ledger = ["--ledger", str(tmp_path / "l.sqlite"), "--endpoint-url", versitygw.url]
    bad = ferry(
        "run",
        write_spec(
            tmp_path, {"source": {"bucket": src}, "destination": {"bucket": dst}, "options": {"mode": "fast"}}
        ),
        *ledger,
    )
    assert bad.returncode == 1
    assert bad.stderr.startswith("ferry: error: options.mode") and "Traceback" not in bad.stderr
    deletes = {
        "source": {"bucket": src},
        "destination": {"bucket": dst},
        "replication": {"name": "r", "deletes": True},
    }
    refused = ferry("run", write_spec(tmp_path, deletes), *ledger)
    assert refused.returncode == 1 and refused.stderr.startswith("ferry: error: replication.deletes: ")
    versitygw.client.put_object(Bucket=src, Key="k", Body=b"1")
    spec = write_spec(
        tmp_path,
        {"job_id": "once", "source": {"bucket": src}, "destination": {"bucket": dst, "prefix": "x/"}},
    )
    assert ferry("run", spec, *ledger).returncode == 0
    again = ferry("run", spec, *ledger)
    assert again.returncode == 1 and "a job 'once' already exists" in again.stderr
    missing = ferry(
        "run",
        spec,
        "--endpoint-url",
        versitygw.url,
        "--table",
        "nope",
        "--table-endpoint-url",
        motoserver.url,
    )
    assert missing.returncode == 1
    assert (
        missing.stderr
        == "ferry: error: --table: no DynamoDB table 'nope' in us-east-1: give the stack's TableName output (and --table-region if it lives elsewhere)\n"
    )


def test_a_mistyped_source_prefix_is_refused_in_one_line_and_the_job_id_stays_free(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    """As `ferry copy` refuses a SRC that matches nothing: a job of no object is far more
    often a typo than a wish. Refused before the job is recorded, so the same job id runs
    once the prefix is put right."""
    src, dst = vgw_buckets
    for key in ("photos/a.jpg", "photos/b.jpg"):
        versitygw.client.put_object(Bucket=src, Key=key, Body=b"picture")
    ledger = ["--ledger", str(tmp_path / "l.sqlite"), "--report-dir", str(tmp_path / "reports")]
    job = {"job_id": "pictures", "destination": {"bucket": dst, "prefix": "p/"}}

    typo = run_process(
        "run", write_spec(tmp_path, {**job, "source": {"bucket": src, "prefix": "photo"}}),
        "--endpoint-url", versitygw.url, *ledger,
    )  # fmt: skip

    assert (typo.returncode, typo.stdout) == (1, ""), typo.stdout + typo.stderr
    assert typo.stderr == (
        f"ferry: error: source: nothing matched s3://{src}/photo/: no object under it; "
        f"did you mean s3://{src}/photos/?\n"
    )
    assert not (tmp_path / "reports" / "jobs" / "pictures").exists()
    fixed = run_process(
        "run", write_spec(tmp_path, {**job, "source": {"bucket": src, "prefix": "photos"}}),
        "--endpoint-url", versitygw.url, *ledger, "--json",
    )  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads(fixed.stdout)["copied"] == 2


def test_a_local_jobs_report_is_written_as_html_as_finalize_wrote_it(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    """`ferry job report JOB --local --html FILE` writes the page, as it does for a job on
    AWS: the very page Finalize wrote beside summary.json, failures listed."""
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="a.txt", Body=b"a")
    versitygw.client.put_object(Bucket=src, Key="m.csv", Body=b"key\na.txt\ngone.txt\n")
    ledger = ["--ledger", str(tmp_path / "l.sqlite")]
    spec = write_spec(
        tmp_path,
        {
            "job_id": "with-page",
            "source": {"bucket": src, "manifest": {"bucket": src, "key": "m.csv", "format": "csv"}},
            "destination": {"bucket": dst},
        },
    )
    run = run_process("run", spec, "--endpoint-url", versitygw.url, *ledger, "--report-dir", str(tmp_path))
    assert run.returncode == 2, run.stdout + run.stderr
    page = tmp_path / "page.html"

    report = run_process("job", "report", "with-page", "--local", *ledger, "--html", str(page))

    assert report.returncode == 2, report.stdout + report.stderr
    assert page.is_file(), report.stdout + report.stderr
    written = (tmp_path / "jobs" / "with-page" / "report.html").read_text()
    assert page.read_text() == written
    assert "gone.txt" in written and "with-page" in written


def test_a_job_between_two_endpoints_checks_and_writes_the_destination_on_its_own(
    versitygw: S3Server, motoserver: S3Server, tmp_path: Path
) -> None:
    """Prepare's write check and the copies use the destination's endpoint (streamed)."""
    src, dst = versitygw.bucket("src"), motoserver.bucket("dst")
    versitygw.client.put_object(Bucket=src, Key="p/a.txt", Body=b"from versitygw")
    spec = write_spec(
        tmp_path, {"source": {"bucket": src, "prefix": "p/"}, "destination": {"bucket": dst, "prefix": "q/"}}
    )
    run = ferry(
        "run", spec, "--source-endpoint-url", versitygw.url, "--dest-endpoint-url", motoserver.url,
        "--ledger", str(tmp_path / "l.sqlite"),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "1 object: 1 copied" in run.stdout and "stream" in run.stdout
    assert motoserver.client.get_object(Bucket=dst, Key="q/a.txt")["Body"].read() == b"from versitygw"


def test_a_server_side_job_between_two_endpoints_is_refused_before_it_is_recorded(
    versitygw: S3Server, motoserver: S3Server, tmp_path: Path
) -> None:
    """A server copies server-side only from itself: a job with options.mode server-side
    between two endpoints could copy nothing, and is refused in one line by Prepare, before
    the job is recorded (its id stays free), as `ferry copy --mode server-side` refuses it."""
    src, dst = versitygw.bucket("src"), motoserver.bucket("dst")
    versitygw.client.put_object(Bucket=src, Key="p/a.txt", Body=b"from versitygw")
    job = {"job_id": "across", "source": {"bucket": src, "prefix": "p/"}, "destination": {"bucket": dst}}
    sides = ["--source-endpoint-url", versitygw.url, "--dest-endpoint-url", motoserver.url]
    ledger = ["--ledger", str(tmp_path / "l.sqlite"), "--report-dir", str(tmp_path / "reports")]

    run = ferry("run", write_spec(tmp_path, {**job, "options": {"mode": "server-side"}}), *sides, *ledger)

    assert (run.returncode, run.stdout) == (1, ""), run.stdout + run.stderr
    assert run.stderr == (
        f"ferry: error: options.mode server-side needs one endpoint for both sides, but the source is at "
        f"{versitygw.url} and the destination at {motoserver.url}: use options.mode stream "
        "(or auto, which streams between endpoints)\n"
    )
    assert not (tmp_path / "reports" / "jobs" / "across").exists()
    streamed = ferry("run", write_spec(tmp_path, {**job, "options": {"mode": "auto"}}), *sides, *ledger)
    assert streamed.returncode == 0, streamed.stderr


def test_a_source_bucket_in_another_region_is_read_here_as_ferry_copy_reads_it(
    motoserver: S3Server, tmp_path: Path
) -> None:
    """The Distributed Map reads only buckets in the stack's region, so Prepare refuses others
    on AWS; on this machine the reader lists any region (botocore follows S3's redirect)."""
    src = f"src-eu-{uuid.uuid4().hex[:8]}"
    motoserver.client.create_bucket(Bucket=src, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    dst = motoserver.bucket("dst")
    motoserver.client.put_object(Bucket=src, Key="p/a.txt", Body=b"a")
    spec = write_spec(tmp_path, {"source": {"bucket": src, "prefix": "p/"}, "destination": {"bucket": dst}})
    run = ferry(
        "run",
        spec,
        "--endpoint-url",
        motoserver.url,
        "--region",
        "us-east-1",
        "--ledger",
        str(tmp_path / "l.sqlite"),
    )
    assert run.returncode == 0, run.stderr
    assert "1 object: 1 copied" in run.stdout


@pytest.mark.slow
def test_a_pass_that_reaches_its_deadline_hands_over_and_the_next_pass_resumes_from_the_checkpoint(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    """CopyBatch's hand-over loop: a streamed multipart copy stops at the pass's deadline with
    a checkpoint in the ledger; later passes resume it without copying a part twice.

    Sized so that one 2.5 s pass cannot finish, however fast the machine: one 5 MiB part in
    flight (--memory-limit 5MiB), 1 GiB would need 410 MiB/s, more than this machine streams
    with 16 parts in flight (357 MiB/s in bench/results/latest.md, case 3; 600 MiB once
    finished in one pass on a quiet machine); and so that 200 passes do even on 2 loaded
    cores (at 5 MiB/s, about 80). A pass starts the object only if 1 s plus a part
    at 16 MiB/s fits before its deadline, which leaves 1.2 s for a pass's start-up."""
    src, dst = vgw_buckets
    body = bytes(range(256)) * (1024 * MiB // 256)
    # With a full-object CRC (not only an MD5 ETag) the stream may go in parts, each checkpointed.
    versitygw.client.put_object(Bucket=src, Key="h/big.bin", Body=body, ChecksumAlgorithm="CRC32C")
    spec = write_spec(
        tmp_path,
        {
            "job_id": "handover-1",
            "source": {"bucket": src, "prefix": "h/"},
            "destination": {"bucket": dst},
            "options": {"mode": "stream", "part_size": "5MiB"},
        },
    )
    ledger, report = tmp_path / "l.sqlite", tmp_path / "r.jsonl"
    run = ferry(
        "run", spec, "--endpoint-url", versitygw.url, "--ledger", str(ledger), "--pass-seconds", "2.5", "--memory-limit", "5MiB", "--max-passes", "200",
        "--report", str(report),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "1 object: 1 copied" in run.stdout
    passes = [m["sk"] for m in SQLiteLedger(ledger).batches("handover-1")]
    # Keys sort as text (as DynamoDB's do): "-p9" after "-p24". Every pass 1..N left its marker.
    numbers = sorted(int(re.search(r"-p(\d+)$", sk).group(1)) for sk in passes)  # type: ignore[union-attr]
    assert len(passes) >= 2 and numbers == list(range(1, len(passes) + 1)), passes
    (row,) = [json.loads(line) for line in report.read_text().splitlines()[:-1]]
    assert row["parts_resumed"] > 0 and row["bytes"] == len(body)
    assert versitygw.client.get_object(Bucket=dst, Key="big.bin")["Body"].read() == body
    assert versitygw.open_uploads(dst) == []


def test_a_manifest_that_breaks_mid_way_is_refused_before_the_job_starts_with_its_line_and_exit_1(
    versitygw: S3Server, vgw_buckets: tuple[str, str], tmp_path: Path
) -> None:
    """Prepare reads the manifest through before the Map (ferry.pipeline.manifest_check): a line
    the ItemReader could not read refuses the job in one line, nothing copied, no job record."""
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="a.txt", Body=b"a")
    versitygw.client.put_object(Bucket=src, Key="l.jsonl", Body=b'{"key": "a.txt"}\n{"key": \n')
    spec = write_spec(
        tmp_path,
        {
            "source": {"bucket": src, "manifest": {"bucket": src, "key": "l.jsonl", "format": "jsonl"}},
            "destination": {"bucket": dst, "prefix": "x/"},
        },
    )
    run = ferry(
        "run", spec, "--endpoint-url", versitygw.url, "--ledger", str(tmp_path / "l.sqlite"), "--json"
    )
    assert run.returncode == 1
    assert run.stderr.startswith(f"ferry: error: source.manifest: line 2 of s3://{src}/l.jsonl is not JSON")
    assert run.stderr.count("\n") == 1 and run.stdout == ""
    assert versitygw.keys(dst) == []
