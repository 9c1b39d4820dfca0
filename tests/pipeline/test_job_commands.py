"""`ferry job start/status/report/list/retry` against the parent state machine in moto, run by
parent_harness, with the stack found from CloudFormation outputs (a stack created in moto
holding the three outputs the CDK stack declares).

What moto cannot do: RedriveExecution ("The redrive_execution action has not been implemented"
in moto 5.2.5), so the redrive branch of `retry` is tested through its decision
(`plan_retry`) on DescribeExecution answers shaped as the API reference gives them.
"""

from __future__ import annotations

import datetime as dt
import gzip
import html
import io
import json
import re
import threading
import time
from typing import Any

import boto3
import pytest
from test_parent_workflow import (  # noqa: F401  (parent is a fixture)
    MAX_ITEMS_PER_BATCH,
    RUN_TIMEOUT_S,
    Parent,
    _break_batches_holding,
    _history,
    _versioned_pair,
    parent,
    put_sources,
)

from conftest import PIPELINE_REPORTS, PIPELINE_TABLE
from ferry.cli.commands.job_retry import (
    FAILED_OBJECTS,
    NOTHING,
    REDRIVE,
    SAME_SOURCE,
    failed_history_keys,
    histories_retry_spec,
    next_retry_id,
    plan_retry,
)
from ferry.cli.main import main
from ferry.cli.shared.stack_outputs import find_stack_outputs
from ferry.errors import ConfigError
from ferry.jobspec import MAX_SPEC_BYTES
from ferry.pipeline.batches import pass_event
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from handlers import copy_batch, finalize

REGION = ["--region", "us-east-1"]
LISTED = 205  # put_sources(..., 200) plus the awkward keys


class Terminal(io.StringIO):
    """stdout as a terminal: what rich draws a bar on."""

    def isatty(self) -> bool:
        return True


def make_stack(name: str, outputs: dict[str, str]) -> None:
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    boto3.client("cloudformation", region_name="us-east-1").create_stack(
        StackName=name, TemplateBody=json.dumps(template)
    )


@pytest.fixture
def stack(parent: Parent) -> Parent:  # noqa: F811 (the fixture)
    make_stack(
        "Ferry",
        {
            "StateMachineArn": parent.machine_arn,
            "TableName": PIPELINE_TABLE,
            "ReportBucketName": PIPELINE_REPORTS,
        },
    )
    return parent


def ferry(*argv: str, stdout: io.StringIO | None = None) -> tuple[int, str, str]:
    out, err = stdout or io.StringIO(), io.StringIO()
    code = main([*argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def wait_for_end(name: str) -> dict[str, Any]:
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    arn = f"arn:aws:states:us-east-1:123456789012:execution:ferry:{name}"
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=arn)
        if described["status"] != "RUNNING":
            return described
        time.sleep(0.1)
    raise AssertionError(f"{name} still running after {RUN_TIMEOUT_S} s")


def hold_batches_after_the_first(job: Parent, monkeypatch: Any) -> threading.Event:
    """copy-batch runs the first batch at once; the others wait until the event is set, so a
    test can look at a job half-way."""
    release, lock, calls = threading.Event(), threading.Lock(), []

    def held(event: dict[str, Any], context: Any) -> Any:
        with lock:
            calls.append(1)
            first = len(calls) == 1
        if not first:
            assert release.wait(RUN_TIMEOUT_S), "the test never released the batches"
        return copy_batch.handler(event, context)

    monkeypatch.setitem(job.harness.lambdas.handlers, "copy-batch", held)
    return release


# -- stack outputs -------------------------------------------------------------------------------


def test_stack_outputs_are_found_by_name_and_a_missing_one_is_named(stack: Parent) -> None:
    cloudformation = boto3.client("cloudformation", region_name="us-east-1")
    outputs = find_stack_outputs(cloudformation, "Ferry")
    assert (outputs.state_machine_arn, outputs.table, outputs.report_bucket) == (
        stack.machine_arn,
        PIPELINE_TABLE,
        PIPELINE_REPORTS,
    )
    assert outputs.execution_arn("j1") == "arn:aws:states:us-east-1:123456789012:execution:ferry:j1"

    code, out, err = ferry("job", "status", "j1", "--stack", "Nope", *REGION)
    assert (code, out) == (1, "")
    assert err == (
        "ferry: error: no stack 'Nope' in us-east-1: deploy it (npx cdk deploy), or name yours with "
        "--stack NAME and its region with --region\n"
    )

    make_stack("Half", {"StateMachineArn": stack.machine_arn, "TableName": PIPELINE_TABLE})
    code, _, err = ferry("job", "list", "--stack", "Half", *REGION)
    assert code == 1 and err.count("\n") == 1
    assert "stack 'Half' (CREATE_COMPLETE) has no output ReportBucketName" in err

    with pytest.raises(ConfigError, match="no stack 'Nope'"):
        find_stack_outputs(cloudformation, "Nope")


# -- start, status, report, list -----------------------------------------------------------------


def test_a_job_is_started_watched_reported_and_listed(stack: Parent, monkeypatch: Any) -> None:
    s3 = stack.pipeline.s3
    put_sources(s3, "in/", 200)
    release = hold_batches_after_the_first(stack, monkeypatch)

    code, out, err = ferry(
        "job", "start", "s3://src/in/", "s3://dst/out/", "--job-id", "cli-job", "--exclude", "*.tmp", *REGION
    )

    assert (code, err) == (0, ""), err
    arn = "arn:aws:states:us-east-1:123456789012:execution:ferry:cli-job"
    assert out.splitlines() == [
        "started job cli-job",
        f"  execution: {arn}",
        f"  console: https://us-east-1.console.aws.amazon.com/states/home?region=us-east-1#/v2/executions/details/{arn}",
        "  follow it: ferry job status cli-job --watch",
    ]
    # The spec was validated locally and sent normalised: the option given is in the job's record.
    ledger = DynamoLedger(stack.pipeline.dynamodb, PIPELINE_TABLE)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while ledger.tally("cli-job").counts.total < MAX_ITEMS_PER_BATCH and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ledger.job("cli-job")["spec"]["options"]["exclude"] == ["*.tmp"]

    # Half-way: one batch recorded, the rest held.
    code, out, _ = ferry("job", "status", "cli-job", "--json", *REGION)
    half = json.loads(out)
    assert code == 0
    assert (half["execution_status"], half["job_status"]) == ("RUNNING", "RUNNING")
    assert (half["listed"], half["done"], half["copied"], half["failed"]) == (
        LISTED,
        MAX_ITEMS_PER_BATCH,
        40,
        0,
    )
    assert half["bytes_copied"] > 0 and half["eta_seconds"] is not None and half["eta_seconds"] >= 0
    assert half["map_run"]["itemCounts"]["total"] == LISTED

    code, out, _ = ferry("job", "status", "cli-job", *REGION, stdout=Terminal())
    assert code == 0
    assert "━" in out and f"{MAX_ITEMS_PER_BATCH}/{LISTED}" in out, out  # rich's bar and counter
    assert "job cli-job: RUNNING (execution RUNNING)" in out
    assert f"objects: {MAX_ITEMS_PER_BATCH} of {LISTED} listed so far: 40 copied" in out

    code, out, _ = ferry("job", "status", "cli-job", *REGION)  # a pipe: text only, no bar
    assert "━" not in out and "\x1b[" not in out and out.startswith("job cli-job: RUNNING")

    code, out, err = ferry("job", "report", "cli-job", *REGION)
    assert (code, out) == (1, "") and "job 'cli-job' is still running" in err

    # --watch on a terminal follows the bar to the end.
    threading.Timer(0.3, release.set).start()
    code, out, _ = ferry(
        "job", "status", "cli-job", "--watch", "--interval", "0.1", *REGION, stdout=Terminal()
    )
    assert code == 0, out
    assert f"{LISTED}/{LISTED}" in out and "job cli-job: SUCCEEDED (execution SUCCEEDED)" in out

    code, out, _ = ferry("job", "status", "cli-job", "--json", *REGION)
    after = json.loads(out)
    assert (after["execution_status"], after["job_status"], after["done"], after["copied"]) == (
        "SUCCEEDED",
        "SUCCEEDED",
        LISTED,
        LISTED,
    )
    assert after["eta_seconds"] is None and after["stopped_at"] is not None

    code, out, _ = ferry("job", "report", "cli-job", *REGION)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "job cli-job: SUCCEEDED"
    assert lines[1].startswith(f"{LISTED} objects: {LISTED} copied, 0 skipped, 0 failed, 0 pending | ")
    assert "  from s3://src/in/ to s3://dst/out/" in lines
    assert f"  report: s3://{PIPELINE_REPORTS}/jobs/cli-job/summary.json" in lines

    code, out, _ = ferry("job", "report", "cli-job", "--json", *REGION)
    report = json.loads(out)
    assert report["summary"] == stack.report("cli-job")

    code, out, _ = ferry("job", "list", "--json", *REGION)
    jobs = json.loads(out)["jobs"]
    assert [
        (j["job_id"], j["execution_status"], j["job_status"], j["objects"], j["copied"]) for j in jobs
    ] == [("cli-job", "SUCCEEDED", "SUCCEEDED", LISTED, LISTED)]
    code, out, _ = ferry("job", "list", *REGION)
    assert out.splitlines()[0].split() == [
        "JOB",
        "EXECUTION",
        "JOB",
        "STATUS",
        "STARTED",
        "OBJECTS",
        "COPIED",
        "FAILED",
        "BYTES",
    ]
    assert out.splitlines()[1].split()[:3] == ["cli-job", "SUCCEEDED", "SUCCEEDED"]
    code, out, _ = ferry("job", "list", "--status", "failed", *REGION)
    assert out == "no jobs in stack Ferry with status FAILED\n"

    # The same job id again is refused in one line, before anything is written.
    code, out, err = ferry("job", "start", "s3://src/in/", "s3://dst/out/", "--job-id", "cli-job", *REGION)
    assert code == 1 and "a job 'cli-job' already exists in stack 'Ferry'" in err


def test_start_validates_the_spec_before_anything_starts(stack: Parent, tmp_path: Any) -> None:
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    code, _, err = ferry("job", "start", "s3://src/in/", "s3://src/in/sub/", *REGION)
    assert code == 1 and "is inside the source" in err
    code, _, err = ferry("job", "start", "s3://src/in/", "s3://dst/", "--part-size", "1KiB", *REGION)
    assert code == 1 and err.startswith("ferry: error: --part-size:")
    spec = tmp_path / "job.json"
    spec.write_text(
        json.dumps(
            {"source": {"bucket": "src"}, "destination": {"bucket": "dst"}, "options": {"mode": "fast"}}
        )
    )
    code, _, err = ferry("job", "start", "--spec", str(spec), *REGION)
    assert code == 1 and "options.mode: 'fast' is not one of" in err
    code, _, err = ferry("job", "start", *REGION)
    assert code == 1 and "give what to copy" in err
    assert sfn.list_executions(stateMachineArn=stack.machine_arn)["executions"] == []

    # --spec with an option on top: the flag wins.
    stack.pipeline.s3.put_object(Bucket="src", Key="some/a.txt", Body=b"a")
    spec.write_text(
        json.dumps(
            {
                "job_id": "from-spec",
                "source": {"bucket": "src", "prefix": "some/"},
                "destination": {"bucket": "dst"},
                "options": {"mode": "stream"},
            }
        )
    )
    code, out, err = ferry("job", "start", "--spec", str(spec), "--mode", "server-side", "--json", *REGION)
    assert code == 0, err
    started = json.loads(out)
    assert started["job_id"] == "from-spec"
    assert wait_for_end("from-spec")["status"] == "SUCCEEDED"
    job = DynamoLedger(stack.pipeline.dynamodb, PIPELINE_TABLE).job("from-spec")
    assert job["spec"]["options"]["mode"] == "server-side"

    # The same spec again: its job id is taken; --job-id starts it under another, file unedited.
    code, _, err = ferry("job", "start", "--spec", str(spec), *REGION)
    assert code == 1 and "'from-spec' already exists" in err and "--job-id" in err, err
    code, out, err = ferry("job", "start", "--spec", str(spec), "--job-id", "from-option", "--json", *REGION)
    assert code == 0, err
    assert json.loads(out)["job_id"] == "from-option"
    assert wait_for_end("from-option")["status"] == "SUCCEEDED"
    again = DynamoLedger(stack.pipeline.dynamodb, PIPELINE_TABLE).job("from-option")
    assert again["spec"]["job_id"] == "from-option"
    assert json.loads(spec.read_text())["job_id"] == "from-spec"


# -- retry ---------------------------------------------------------------------------------------


def test_retry_starts_a_job_over_exactly_the_failed_objects(
    stack: Parent, monkeypatch: Any, tmp_path: Any
) -> None:
    s3 = stack.pipeline.s3
    put_sources(s3, "in/", 200)
    _break_batches_holding(stack, monkeypatch, "in/050.txt", also_record_failure=False)
    code, _, err = ferry("job", "start", "s3://src/in/", "s3://dst/out/", "--job-id", "flaky", *REGION)
    assert code == 0, err
    assert wait_for_end("flaky")["error"] == "FerryJobIncomplete"

    code, out, _ = ferry("job", "report", "flaky", *REGION)
    assert code == 2
    assert out.splitlines()[0] == "job flaky: PARTIAL"
    assert f"{LISTED} objects: {LISTED - 40} copied, 0 skipped, 40 failed, 0 pending" in out
    assert out.count("  failed: s3://src/in/") == 20 and "... and 20 more failures" in out
    code, out, _ = ferry("job", "report", "flaky", "--failures", "--json", *REGION)
    failed = {f["key"] for f in json.loads(out)["failures"]}

    # The same report as one page: its counts and every failed key (40 < the 50 a page lists).
    page_path = tmp_path / "flaky.html"
    code, _, err = ferry("job", "report", "flaky", "--html", str(page_path), *REGION)
    assert code == 2, err
    page = page_path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "flaky" in page
    assert all(html.escape(key) in page for key in failed)
    assert not re.search(r"(src|href)\s*=\s*[\"']?https?:", page)
    assert len(failed) == 40 and "in/050.txt" in failed

    code, out, _ = ferry("job", "status", "flaky", "--json", *REGION)
    assert code == 2 and json.loads(out)["failed"] == 40

    # The cause is gone: the retry copies the failed objects, and only those.
    monkeypatch.setitem(stack.harness.lambdas.handlers, "copy-batch", copy_batch.handler)
    code, out, err = ferry("job", "retry", "flaky", *REGION)
    assert code == 0, err
    manifest_key = "jobs/flaky-retry-1/input/failed-objects.jsonl"
    assert out.splitlines()[:2] == [
        "job flaky: 40 of 205 objects failed: started job flaky-retry-1 over those 40 objects only",
        f"  manifest: s3://{PIPELINE_REPORTS}/{manifest_key}",
    ]
    rows = [
        json.loads(line)
        for line in s3.get_object(Bucket=PIPELINE_REPORTS, Key=manifest_key)["Body"].iter_lines()
    ]
    assert sorted(r["key"] for r in rows) == sorted(failed) and {r["bucket"] for r in rows} == {"src"}

    described = wait_for_end("flaky-retry-1")
    assert described["status"] == "SUCCEEDED", described
    retry = stack.report("flaky-retry-1")
    assert (retry["objects"], retry["copied"], retry["failed"]) == (40, 40, 0)
    assert retry["source"]["manifest"] == {"bucket": PIPELINE_REPORTS, "key": manifest_key, "format": "jsonl"}
    listed = {o["Key"] for o in s3.list_objects_v2(Bucket="dst", Prefix="out/", MaxKeys=1000)["Contents"]}
    assert len(listed) == LISTED  # the first job's 165 and the retry's 40, each where it belongs

    code, out, _ = ferry("job", "retry", "flaky-retry-1", *REGION)
    assert (code, out) == (0, "job flaky-retry-1: every object was copied or skipped: nothing to retry\n")


RETRY_KEYS = [f"in/k{n:02}" for n in range(45)]  # batches of 40 and 5: the second fails


def _source_of(kind: str, s3: Any) -> dict[str, Any]:
    """The spec's source for each kind of job `ferry job retry` takes: a listing, each manifest
    format, and a replication's job (a JSON Lines manifest with the replication's tag)."""
    if kind == "listing":
        return {"source": {"bucket": "src", "prefix": "in/"}}
    if kind == "inventory":
        rows = "".join(f'"src","{k}","{len(k)}","true","false"\n' for k in RETRY_KEYS)
        s3.put_object(Bucket="src", Key="inv/data/part-0.csv.gz", Body=gzip.compress(rows.encode()))
        manifest = {
            "sourceBucket": "src",
            "destinationBucket": "arn:aws:s3:::src",
            "version": "2016-11-30",
            "fileFormat": "CSV",
            "fileSchema": "Bucket, Key, Size, IsLatest, IsDeleteMarker",
            "files": [{"key": "inv/data/part-0.csv.gz", "size": 1, "MD5checksum": "0"}],
        }
        body, key = json.dumps(manifest), "inv/manifest.json"
    elif kind == "csv":
        body, key = "key\n" + "".join(f"{k}\n" for k in RETRY_KEYS), "lists/keys.csv"
    else:
        body, key = "".join(json.dumps({"key": k}) + "\n" for k in RETRY_KEYS), "lists/keys.jsonl"
    s3.put_object(Bucket="src", Key=key, Body=body.encode())
    fmt = {"inventory": "inventory", "csv": "csv"}.get(kind, "jsonl")
    source: dict[str, Any] = {
        "source": {"bucket": "src", "prefix": "in/", "manifest": {"bucket": "src", "key": key, "format": fmt}}
    }
    if kind == "replication":
        source["replication"] = {"name": "photos"}
    return source


@pytest.mark.parametrize("kind", ["listing", "csv", "jsonl", "inventory", "replication"])
def test_retry_of_every_kind_of_job_copies_its_failed_objects(
    stack: Parent, monkeypatch: Any, tmp_path: Any, kind: str
) -> None:
    s3 = stack.pipeline.s3
    for key in RETRY_KEYS:
        s3.put_object(Bucket="src", Key=key, Body=key.encode())
    spec = {
        "job_id": f"{kind}-job",
        "destination": {"bucket": "dst", "prefix": "out/"},
        **_source_of(kind, s3),
    }
    spec_file = tmp_path / "job.json"
    spec_file.write_text(json.dumps(spec))
    real = copy_batch.handler

    def broken(event: dict[str, Any], context: Any) -> Any:
        if "in/k42" in json.dumps(pass_event(event).get("items")):
            raise RuntimeError("cannot process the batch holding in/k42")
        return real(event, context)

    monkeypatch.setitem(stack.harness.lambdas.handlers, "copy-batch", broken)
    code, _, err = ferry("job", "start", "--spec", str(spec_file), *REGION)
    assert code == 0, err
    assert wait_for_end(f"{kind}-job")["error"] == "FerryJobIncomplete"
    monkeypatch.setitem(stack.harness.lambdas.handlers, "copy-batch", real)

    code, out, err = ferry("job", "retry", f"{kind}-job", *REGION)

    assert code == 0, err
    assert f"5 of 45 objects failed: started job {kind}-job-retry-1 over those 5 objects only" in out
    described = wait_for_end(f"{kind}-job-retry-1")
    assert described["status"] == "SUCCEEDED", described.get("cause")
    retry = stack.report(f"{kind}-job-retry-1")
    assert (retry["objects"], retry["copied"], retry["failed"]) == (5, 5, 0)
    listed = {o["Key"] for o in s3.list_objects_v2(Bucket="dst", Prefix="out/")["Contents"]}
    assert listed == {"out/" + k[3:] for k in RETRY_KEYS}
    if kind == "replication":
        assert stack.ledger_job(f"{kind}-job-retry-1")["spec"]["replication"]["name"] == "photos"


def test_the_keys_an_all_versions_retry_names_fit_one_job_spec_or_none_are_named() -> None:
    """At the real limit: a spec holds MAX_SPEC_BYTES; keys of 1,000 bytes fill it after about
    250. Those that fit make a spec the validator takes; one more and the retry goes over the
    same source instead (failed_history_keys: None)."""
    spec = {
        "job_id": "big",
        "source": {"bucket": "src", "prefix": "p/"},
        "destination": {"bucket": "dst", "prefix": ""},
        "options": {"all_versions": True},
    }
    keys = [f"p/{n:04}" + "x" * 994 for n in range(400)]
    fitting = 0
    while failed_history_keys(({"key": k} for k in keys[: fitting + 1]), spec) is not None:
        fitting += 1
    assert (MAX_SPEC_BYTES - 2_000) // 1_001 <= fitting <= MAX_SPEC_BYTES // 1_001, fitting
    named = failed_history_keys(({"key": k} for k in keys[:fitting] * 2), spec)  # a version a line
    assert named is not None and len(named) == fitting
    retry = histories_retry_spec(spec, "big-retry-1", named)
    assert len(retry.options.include) == fitting and retry.options.all_versions
    assert failed_history_keys(({"key": k} for k in keys[: fitting + 1]), spec) is None
    assert failed_history_keys([{"key": "elsewhere/k"}], spec) is None


# Keys in listing order: the first 40 make the first batch (MAX_ITEMS_PER_BATCH), the last 5
# the second. `odd1-copy.txt` is in the first and is what `odd[1]*?.txt`, unescaped, would match.
HISTORY_KEYS = (
    [f"h/a{n:02}" for n in range(39)] + ["h/odd1-copy.txt", "h/odd[1]*?.txt"] + [f"h/z{n}" for n in range(4)]
)


def test_retry_of_an_all_versions_job_copies_the_failed_keys_histories_only(
    stack: Parent, monkeypatch: Any, tmp_path: Any
) -> None:
    """A history cannot be named by a manifest (options.all_versions refuses source.manifest):
    the retry is an all_versions job over the same source whose options.include names the
    failed keys exactly (glob characters escaped), so it lists, copies and counts only them."""
    s3 = stack.pipeline.s3
    _versioned_pair(s3)
    for n, key in enumerate(HISTORY_KEYS):
        for version in range(2):
            s3.put_object(Bucket="src", Key=key, Body=f"{key} v{version}".encode())
            time.sleep(0.002)  # moto orders a key's versions by time
        if n % 10 == 0:
            s3.delete_object(Bucket="src", Key=key)
    _break_batches_holding(stack, monkeypatch, "h/z1", also_record_failure=False)
    spec = {
        "job_id": "hist",
        "source": {"bucket": "src", "prefix": "h/"},
        "destination": {"bucket": "dst", "prefix": "out/"},
        "options": {"all_versions": True},
    }
    spec_file = tmp_path / "hist.json"
    spec_file.write_text(json.dumps(spec))
    code, _, err = ferry("job", "start", "--spec", str(spec_file), *REGION)
    assert code == 0, err
    assert wait_for_end("hist")["error"] == "FerryJobIncomplete"
    failed_keys = {f.key for f in DynamoLedger(stack.pipeline.dynamodb, PIPELINE_TABLE).failures("hist")}
    assert failed_keys == set(HISTORY_KEYS[40:])

    monkeypatch.setitem(stack.harness.lambdas.handlers, "copy-batch", copy_batch.handler)
    code, out, err = ferry("job", "retry", "hist", *REGION)

    assert code == 0, err
    described = wait_for_end("hist-retry-1")
    assert described["status"] == "SUCCEEDED", [
        f.reason for f in DynamoLedger(stack.pipeline.dynamodb, PIPELINE_TABLE).failures("hist-retry-1")
    ]
    assert out.splitlines()[0].endswith(
        "started job hist-retry-1 over the histories of those 5 keys only (options.include names them)"
    ), out
    retry = stack.report("hist-retry-1")
    assert retry["keys"] == 5 and retry["failed"] == 0, retry
    assert retry["copied"] == 5 * 2 + 1  # two versions each, and h/odd[1]*?.txt's delete marker
    retried = stack.ledger_job("hist-retry-1")["spec"]
    assert sorted(retried["options"]["include"]) == ["odd[[]1][*][?].txt", "z0", "z1", "z2", "z3"]
    assert retried["options"]["all_versions"] is True and "manifest" not in retried["source"]
    for n, key in enumerate(HISTORY_KEYS):
        expected = [f"{key} v0", f"{key} v1"] + (["<marker>"] if n % 10 == 0 else [])
        assert _history(s3, "dst", "out/" + key[2:]) == expected, key


NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)


def described(status: str, **fields: Any) -> dict[str, Any]:
    return {"status": status, "stopDate": NOW - dt.timedelta(hours=1), **fields}


def test_retry_redrives_an_execution_stopped_mid_way_within_14_days() -> None:
    assert plan_retry(described("ABORTED"), None, NOW).action == REDRIVE
    assert plan_retry(described("TIMED_OUT", redriveStatus="REDRIVABLE"), None, NOW).action == REDRIVE
    old = plan_retry(described("ABORTED", stopDate=NOW - dt.timedelta(days=15)), None, NOW)
    assert old.action == SAME_SOURCE and "more than 14 days ago" in old.reason
    refused = described(
        "TIMED_OUT",
        redriveStatus="NOT_REDRIVABLE",
        redriveStatusReason="Execution history event limit exceeded.",
    )
    plan = plan_retry(refused, None, NOW)
    assert plan.action == SAME_SOURCE and "Execution history event limit exceeded." in plan.reason


def test_retry_never_redrives_a_job_that_finalize_settled() -> None:
    partial = {"status": "PARTIAL", "objects": 10, "failed": 2, "pending": 0}
    plan = plan_retry(described("FAILED", error="FerryJobIncomplete"), partial, NOW)
    assert plan == plan.__class__(FAILED_OBJECTS, "2 of 10 objects failed")
    done = {"status": "SUCCEEDED", "objects": 10, "failed": 0, "pending": 0}
    assert plan_retry(described("SUCCEEDED"), done, NOW).action == NOTHING
    pending = {"status": "PARTIAL", "objects": 10, "failed": 0, "pending": 3}
    assert plan_retry(described("FAILED", error="FerryJobIncomplete"), pending, NOW).action == NOTHING
    no_report = plan_retry(described("FAILED", error="FerryFinalizeFailed"), None, NOW)
    assert no_report.action == SAME_SOURCE
    with pytest.raises(ConfigError, match="refused before anything was copied: source.bucket: nope"):
        plan_retry(described("FAILED", error="FerryJobRejected", cause="source.bucket: nope"), None, NOW)
    with pytest.raises(ConfigError, match="still running"):
        plan_retry({"status": "RUNNING"}, None, NOW)


def test_retry_ids_count_on() -> None:
    taken = {"photos-retry-1", "photos-retry-2"}
    assert next_retry_id("photos", taken.__contains__) == "photos-retry-3"
    assert next_retry_id("photos-retry-2", taken.__contains__) == "photos-retry-3"


def test_a_replication_job_of_the_longest_name_can_be_retried() -> None:
    """A replication's job id is its name (up to 40 characters), '-' and 32 hex digits: 73
    characters, and `-retry-N` would pass Step Functions' 80-character execution name limit."""
    from ferry.jobspec import parse_job_spec
    from ferry.pipeline.replication.config import Replication
    from ferry.pipeline.replication.starter import job_id_for

    replication = Replication.parse(
        {"name": "n" * 40, "source": {"bucket": "a", "prefix": "in/"}, "destination": {"bucket": "b"}}, "r"
    )
    first = job_id_for(replication, ["message-1"])
    other = job_id_for(replication, ["message-2"])
    assert len(first) == 73
    taken: set[str] = set()
    retry = next_retry_id(first, taken.__contains__)
    assert len(retry) <= 80 and retry.startswith("n" * 40 + "-") and retry.endswith("-retry-1")
    parse_job_spec({"job_id": retry, "source": {"bucket": "src-a"}, "destination": {"bucket": "dst-b"}})
    assert next_retry_id(other, taken.__contains__) != retry, "two jobs, two retry ids"
    taken.add(retry)
    assert next_retry_id(first, taken.__contains__) == retry[: -len("1")] + "2"
    assert next_retry_id(retry, taken.__contains__) == retry[: -len("1")] + "2", (
        "a retry of a retry counts on"
    )
    # Any id of at most 80 characters can be retried, and short ones keep their name whole.
    assert len(next_retry_id("x" * 80, lambda _: False)) <= 80
    assert next_retry_id("x" * 69, lambda _: False) == "x" * 69 + "-retry-1"


def test_the_status_line_says_how_a_job_ended_that_finalize_did_not_settle() -> None:
    from ferry.cli.commands.job_runs import JobStatus
    from ferry.cli.commands.jobs_command import status_text

    counts = {"objects": 40, "copied": 40, "skipped": 0, "failed": 0, "pending": 0, "bytes_copied": 4096}
    arn = "arn:aws:states:eu-west-1:123456789012:execution:Ferry-jobs:j"

    def status(execution: str, job: str | None, error: str | None = None) -> JobStatus:
        return JobStatus("j", arn, execution, job, NOW, NOW, counts, 1, 100, error=error, now=NOW)

    assert status_text(status("ABORTED", "RUNNING")).startswith("job j: ABORTED (execution ABORTED)")
    assert status_text(status("FAILED", None, "FerryJobRejected")).startswith(
        "job j: REJECTED (execution FAILED: FerryJobRejected)"
    )
    assert status_text(status("RUNNING", None)).startswith("job j: STARTING (execution RUNNING)")
    text = status_text(status("FAILED", "PARTIAL", "FerryJobIncomplete"))
    assert text.startswith("job j: PARTIAL (execution FAILED: FerryJobIncomplete)")
    assert "objects: 40 of 100 listed: 40 copied" in text  # ended: no "so far", no ETA
    assert "ETA" not in text and "region=eu-west-1#/v2/executions/details/" + arn in text


def test_an_all_versions_jobs_status_weighs_keys_against_the_keys_listed() -> None:
    """The Map of an all_versions job reads keys, and its objects are their versions: 30
    versions of 10 keys, of 20 keys listed, is half done, not more than done."""
    from ferry.cli.commands.job_runs import JobStatus
    from ferry.cli.commands.jobs_command import status_text

    counts = {"objects": 30, "copied": 30, "skipped": 0, "failed": 0, "pending": 0, "bytes_copied": 30}
    arn = "arn:aws:states:eu-west-1:123456789012:execution:Ferry-jobs:j"
    started = NOW - dt.timedelta(seconds=10)
    status = JobStatus("j", arn, "RUNNING", "RUNNING", started, None, counts, 1, 20, items=10, now=NOW)
    text = status_text(status)
    assert "objects: 30 versions of 10 keys, of 20 keys listed so far: 30 copied" in text, text
    assert status.eta_seconds == 10.0  # 10 keys in 10 s, 10 keys to go
    assert status.to_dict()["items"] == 10


def test_a_job_that_ended_without_a_report_is_started_again_over_the_same_source(
    stack: Parent, monkeypatch: Any
) -> None:
    """Finalize fails for good (FerryFinalizeFailed): no summary.json says which objects were
    done, and redriving would only re-enter the Fail state, so the retry reruns the spec."""
    put_sources(stack.pipeline.s3, "in/", 60)

    def broken(event: dict[str, Any], context: Any) -> Any:
        raise RuntimeError("the report bucket is gone")

    handlers = stack.harness.lambdas.handlers
    monkeypatch.setitem(handlers, "finalize", broken)
    code, _, err = ferry("job", "start", "s3://src/in/", "s3://dst/out/", "--job-id", "unreported", *REGION)
    assert code == 0, err
    assert wait_for_end("unreported")["error"] == "FerryFinalizeFailed"
    code, out, err = ferry("job", "report", "unreported", *REGION)
    assert code == 1 and "job 'unreported' ended FAILED without a report (FerryFinalizeFailed" in err

    monkeypatch.setitem(handlers, "finalize", finalize.handler)
    code, out, err = ferry("job", "retry", "unreported", "--json", *REGION)

    assert code == 0, err
    outcome = json.loads(out)
    assert outcome["action"] == SAME_SOURCE and outcome["manifest"] is None
    assert outcome["reason"] == "the execution failed (FerryFinalizeFailed) without a report"
    assert outcome["new_job"]["job_id"] == "unreported-retry-1"
    assert wait_for_end("unreported-retry-1")["status"] == "SUCCEEDED"
    report = stack.report("unreported-retry-1")
    assert report["source"] == {"bucket": "src", "prefix": "in/"} and report["objects"] == 65
    assert report["skipped"] == 65  # the first run had copied them all: identical, so skipped


def test_a_wrong_spec_is_named_before_any_aws_setting_is_needed(monkeypatch: Any, tmp_path: Any) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    code, out, err = ferry("job", "start", "s3://src/in/", "s3://src/in/sub/")
    assert (code, out) == (1, "")
    assert err.startswith("ferry: error: destination: s3://src/in/sub/ is inside the source s3://src/in/")
    code, out, err = ferry("job", "status", "j1")
    assert err == "ferry: error: no AWS region: give --region (the stack's region) or set AWS_REGION\n"


def test_all_versions_is_a_job_start_option_and_what_it_cannot_go_with_is_named_first(
    monkeypatch: Any, tmp_path: Any
) -> None:
    from ferry.cli.commands.jobs_command import spec_from_args
    from ferry.cli.main import build_parser

    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    code, out, err = ferry(
        "job", "start", "s3://src/in/", "s3://dst/", "--all-versions", "--no-skip-existing"
    )
    assert (code, out) == (1, "")
    assert err.startswith("ferry: error: options.skip_existing: all_versions finds") and err.count("\n") == 1
    args = build_parser().parse_args(["job", "start", "s3://src/in/", "s3://dst/", "--all-versions"])
    assert spec_from_args(args)["options"] == {"all_versions": True}
    for compare in ("size-mtime", "size", "existence"):
        code, out, err = ferry(
            "job", "start", "s3://src/in/", "s3://dst/", "--all-versions", "--compare", compare
        )  # fmt: skip
        assert (code, out) == (1, ""), compare
        assert err == (
            f"ferry: error: options.compare: {compare} cannot go with all_versions: a history is matched "
            "version by version by its contents; leave out compare\n"
        )


def test_retry_sends_a_redrive_the_service_model_accepts_for_an_aborted_job() -> None:
    """moto has no RedriveExecution, so the request itself is checked against botocore's own
    Step Functions model (Stubber validates every parameter) on clients that answer as the
    API reference documents: an ABORTED execution an hour ago, no report, no ledger record."""
    from botocore.stub import Stubber

    from ferry.cli.commands.job_retry import retry_job
    from ferry.cli.commands.job_runs import JobClients
    from ferry.cli.shared.stack_outputs import StackOutputs

    session = boto3.Session(region_name="eu-west-1", aws_access_key_id="k", aws_secret_access_key="s")
    clients = JobClients(
        cloudformation=session.client("cloudformation"),
        stepfunctions=session.client("stepfunctions"),
        dynamodb=session.client("dynamodb"),
        s3=session.client("s3"),
    )
    outputs = StackOutputs(
        "Ferry", "arn:aws:states:eu-west-1:123456789012:stateMachine:Ferry-jobs", "Ferry-Ledger", "reports"
    )
    arn = outputs.execution_arn("stopped")
    with (
        Stubber(clients.stepfunctions) as sfn,
        Stubber(clients.dynamodb) as ddb,
        Stubber(clients.s3) as s3,
    ):
        ddb.add_response("get_item", {})
        sfn.add_response(
            "describe_execution",
            {
                "executionArn": arn,
                "stateMachineArn": outputs.state_machine_arn,
                "status": "ABORTED",
                "startDate": NOW - dt.timedelta(hours=2),
                "stopDate": NOW - dt.timedelta(hours=1),
                "redriveStatus": "REDRIVABLE",
            },
            {"executionArn": arn},
        )
        s3.add_client_error("get_object", "NoSuchKey", http_status_code=404)
        sfn.add_response("redrive_execution", {"redriveDate": NOW}, {"executionArn": arn})
        outcome = retry_job(clients, outputs, "stopped", now=NOW)
        sfn.assert_no_pending_responses()
    assert (outcome.plan.action, outcome.redriven_arn, outcome.started) == (REDRIVE, arn, None)
