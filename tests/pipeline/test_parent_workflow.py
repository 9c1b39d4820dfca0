"""The whole pipeline: the PARENT state machine, as the CDK app renders it, executed by moto's
Step Functions interpreter with parent_harness supplying what moto lacks (ItemBatcher, the
JSONL and inventory readers, a full listing, failure tolerance, ResultWriter files, child
executions), every Lambda task running the real handler and every Fargate task running
`handlers.copy_large.main()`, in-process.

Each scenario asserts the bytes, metadata and tags at the destination, the execution's status
and output, the job report Finalize writes, the ledger's counts and the Map Run's
ResultWriter files, never SUCCEEDED alone.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import time
import zipfile
from typing import Any
from urllib.parse import quote_plus

import boto3
import pytest
from botocore.exceptions import ClientError
from listing_support import (
    assert_items_are_the_histories,
    atomic_moto_s3,
    dest_history,
    fill_source,
    install_clock,
    pages_context,
)
from listing_support import spec as listing_spec
from parent_harness import FargateTasks, LambdaRouter, ParentHarness

from conftest import PIPELINE_REPORTS, PIPELINE_TABLE, FakeLambdaContext
from ferry.listed_items import expand
from ferry.pipeline.batches import pass_event
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from ferry_cdk.definition import parent_definition
from handlers import copy_batch, finalize, list_versions, prepare, record_failure

HANDLERS = {
    "prepare": prepare.handler,
    "list-versions": list_versions.handler,
    "copy-batch": copy_batch.handler,
    "record-failure": record_failure.handler,
    "finalize": finalize.handler,
}
MAX_ITEMS_PER_BATCH = 40
MAX_CONCURRENCY = 4
RUN_TIMEOUT_S = 120


class Parent:
    """The parent state machine in moto, and what a test needs to run and inspect it."""

    def __init__(self, pipeline: Any, harness: ParentHarness, machine_arn: str) -> None:
        self.pipeline, self.harness, self.machine_arn = pipeline, harness, machine_arn
        self.sfn = boto3.client("stepfunctions", region_name="us-east-1")

    def run(self, spec: dict[str, Any], name: str, *, timeout_s: float = RUN_TIMEOUT_S) -> dict[str, Any]:
        """Start an execution and wait for it to end; describe_execution's result. `timeout_s`
        only stops a hung run from hanging the suite: it is no assertion on speed."""
        arn = self.sfn.start_execution(stateMachineArn=self.machine_arn, name=name, input=json.dumps(spec))[
            "executionArn"
        ]
        deadline, pause = time.monotonic() + timeout_s, 0.05
        while time.monotonic() < deadline:
            described = self.sfn.describe_execution(executionArn=arn)
            if described["status"] != "RUNNING":
                return described
            # Asked often at first (most runs take a second or two), then less: every
            # question takes the interpreter's lock from the execution it waits for.
            time.sleep(pause)
            pause = min(pause * 1.5, 1.0)
        raise AssertionError(
            f"execution {name} still RUNNING after {timeout_s} s; Lambda calls so far: "
            f"{[n for n, _ in self.harness.lambdas.calls][-20:]}"
        )

    def ledger_job(self, job_id: str) -> dict[str, Any]:
        job = DynamoLedger(self.pipeline.dynamodb, PIPELINE_TABLE).job(job_id)
        assert job is not None, f"no job {job_id} in the ledger"
        return job

    def report(self, job_id: str) -> dict[str, Any]:
        body = self.pipeline.s3.get_object(Bucket=PIPELINE_REPORTS, Key=f"jobs/{job_id}/summary.json")["Body"]
        return json.loads(body.read())

    def result_files(self, details: dict[str, str]) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
        """The ResultWriter manifest and, per status, the child records of its files."""
        s3 = self.pipeline.s3
        manifest = json.loads(s3.get_object(Bucket=details["Bucket"], Key=details["Key"])["Body"].read())
        records: dict[str, list[dict[str, Any]]] = {}
        for status, files in manifest["ResultFiles"].items():
            for entry in files:
                body = s3.get_object(Bucket=manifest["DestinationBucket"], Key=entry["Key"])["Body"].read()
                assert len(body) == entry["Size"]
                records.setdefault(status, []).extend(json.loads(body))
        return manifest, records


@pytest.fixture
def parent(pipeline, monkeypatch) -> Parent:
    monkeypatch.setenv("FERRY_MAX_ITEMS_PER_BATCH", str(MAX_ITEMS_PER_BATCH))
    monkeypatch.setenv("FERRY_MAX_CONCURRENCY", str(MAX_CONCURRENCY))
    pipeline.services.cache_clear()
    fargate_environment = {
        **pipeline.settings.worker_environment(fargate=True),
        "FERRY_TABLE": PIPELINE_TABLE,
        "FERRY_REPORT_BUCKET": PIPELINE_REPORTS,
        "FERRY_MAX_ITEMS_PER_BATCH": str(MAX_ITEMS_PER_BATCH),
        "FERRY_MAX_CONCURRENCY": str(MAX_CONCURRENCY),
    }
    harness = ParentHarness(
        LambdaRouter(HANDLERS, context=lambda name, call: FakeLambdaContext()),
        FargateTasks(fargate_environment),
    ).install(monkeypatch)

    iam = boto3.client("iam", region_name="us-east-1")
    role = iam.create_role(RoleName="ferry-parent", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    awslambda = boto3.client("lambda", region_name="us-east-1")
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(
            "handler.py", "def handler(event, context):\n    raise RuntimeError('routed in-process')\n"
        )
    arns = {
        name: awslambda.create_function(
            FunctionName=name,
            Runtime="python3.13",
            Role=role,
            Handler="handler.handler",
            Code={"ZipFile": archive.getvalue()},
        )["FunctionArn"]
        for name in HANDLERS
    }
    definition = parent_definition(
        {
            "PrepareFunctionArn": arns["prepare"],
            "ListVersionsFunctionArn": arns["list-versions"],
            "CopyBatchFunctionArn": arns["copy-batch"],
            "RecordFailureFunctionArn": arns["record-failure"],
            "FinalizeFunctionArn": arns["finalize"],
            "ReportBucket": PIPELINE_REPORTS,
            "LedgerTable": PIPELINE_TABLE,
            "ClusterArn": "arn:aws:ecs:us-east-1:123456789012:cluster/ferry",
            "TaskDefinitionArn": "arn:aws:ecs:us-east-1:123456789012:task-definition/ferry:1",
            "ContainerName": "worker",
            "Subnets": ["subnet-1"],
            "SecurityGroups": ["sg-1"],
            "AssignPublicIp": "ENABLED",
            "CapacityProvider": "FARGATE_SPOT",
        }
    )
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    machine = sfn.create_state_machine(name="ferry", definition=json.dumps(definition), roleArn=role)[
        "stateMachineArn"
    ]
    return Parent(pipeline, harness, machine)


# -- what every scenario checks ------------------------------------------------------------------

AWKWARD = ["in/with space.txt", "in/ünïcödé-日本.txt", "in/a+b=c.txt", "in/100% done.txt", "in/deep/er/key"]


def put_sources(s3: Any, prefix: str, count: int) -> dict[str, dict[str, Any]]:
    """`count` small objects under `prefix` plus the awkward keys; every 7th with metadata and
    tags. Returns what each source holds."""
    keys = [f"{prefix}{n:03}.txt" for n in range(count)] + [k.replace("in/", prefix, 1) for k in AWKWARD]
    sources = {}
    for n, key in enumerate(keys):
        body = f"{key} #{n}\n".encode() * (n % 5 + 1)
        extra: dict[str, Any] = {}
        if n % 7 == 0:
            extra = {
                "Metadata": {"owner": f"team-{n}", "origin": "ferry-test"},
                "Tagging": f"n={n}&kind=test",
            }
        s3.put_object(Bucket="src", Key=key, Body=body, ContentType="text/plain", **extra)
        sources[key] = {"body": body, "metadata": extra.get("Metadata", {}), "tags": _tags(extra)}
    return sources


def _tags(extra: dict[str, Any]) -> dict[str, str]:
    tagging = extra.get("Tagging")
    return dict(pair.split("=", 1) for pair in tagging.split("&")) if tagging else {}


def assert_copied(s3: Any, sources: dict[str, dict[str, Any]], source_prefix: str, dest_prefix: str) -> None:
    """Every source object at the destination: same bytes, user metadata and tags."""
    listed = {
        o["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket="dst")
        for o in page.get("Contents", [])
    }
    expected = {dest_prefix + key[len(source_prefix) :] for key in sources}
    assert listed == expected, (sorted(expected - listed)[:10], sorted(listed - expected)[:10])
    for key, source in sources.items():
        dest = dest_prefix + key[len(source_prefix) :]
        got = s3.get_object(Bucket="dst", Key=dest)
        assert got["Body"].read() == source["body"], dest
        assert got["Metadata"] == source["metadata"], dest
        tags = {t["Key"]: t["Value"] for t in s3.get_object_tagging(Bucket="dst", Key=dest)["TagSet"]}
        assert tags == source["tags"], dest


def assert_job_succeeded(
    parent: Parent, described: dict[str, Any], job_id: str, objects: int
) -> dict[str, Any]:
    """Execution, Finalize's output and report, and the ledger agree that `objects` were copied."""
    assert described["status"] == "SUCCEEDED", described
    output = json.loads(described["output"])
    nbytes = output["bytes_copied"]
    assert {
        k: output[k] for k in ("job_id", "status", "objects", "copied", "skipped", "failed", "pending")
    } == {
        "job_id": job_id,
        "status": "SUCCEEDED",
        "objects": objects,
        "copied": objects,
        "skipped": 0,
        "failed": 0,
        "pending": 0,
    }
    assert "map_error" not in output, output["map_error"]
    assert output["report"] == f"s3://{PIPELINE_REPORTS}/jobs/{job_id}/summary.json"
    report = parent.report(job_id)
    assert report == {
        k: v for k, v in output.items() if k not in ("report", "failures_report", "report_html")
    }
    job = parent.ledger_job(job_id)
    assert job["status"] == "SUCCEEDED"
    assert (
        job["objects"],
        job["copied"],
        job["skipped"],
        job["failed"],
        job["pending"],
        job["bytes_copied"],
    ) == (
        objects,
        objects,
        0,
        0,
        0,
        nbytes,
    )
    return output


def job_map_run(parent: Parent) -> Any:
    """The job's own (last) Map Run: a batch with large objects starts one of its own
    (CopyLargeObjects, a Distributed Map in the child), which the harness records too."""
    return [r for r in parent.harness.map_runs if not r.state_name.startswith("CopyLargeObjects")][-1]


def assert_map_results(
    parent: Parent, output: dict[str, Any], job_id: str, objects: int
) -> list[dict[str, Any]]:
    """The Map Run's ResultWriter files: one SUCCEEDED record per child, every item in one."""
    details = output["map_run"]["results"]
    run = job_map_run(parent)
    assert output["map_run"]["map_run_arn"] == run.map_run_arn
    run_id = run.map_run_arn.rsplit(":", 1)[-1]
    assert details == {"Bucket": PIPELINE_REPORTS, "Key": f"jobs/.map-runs/{run_id}/manifest.json"}
    manifest, records = parent.result_files(details)
    assert manifest["MapRunArn"] == run.map_run_arn
    assert set(records) <= {"SUCCEEDED"}, {s: len(r) for s, r in records.items()}
    succeeded = records.get("SUCCEEDED", [])
    assert len(succeeded) == math.ceil(objects / MAX_ITEMS_PER_BATCH)
    inputs = [json.loads(r["Input"]) for r in succeeded]
    assert sum(len(i["Items"]) for i in inputs) == objects
    assert all(
        len(i["Items"]) <= MAX_ITEMS_PER_BATCH and i["BatchInput"]["job"]["job_id"] == job_id for i in inputs
    )
    names = {r["Name"] for r in succeeded}
    assert len(names) == len(succeeded), "each child is its own execution"
    assert all(
        r["ExecutionArn"].endswith(":" + r["Name"]) and ":execution:ferry/" in r["ExecutionArn"]
        for r in succeeded
    )
    return succeeded


# -- scenarios -----------------------------------------------------------------------------------


def test_a_prefix_of_small_objects_is_copied_in_batches_and_accounted_for(parent) -> None:
    s3 = parent.pipeline.s3
    sources = put_sources(s3, "in/", 300)
    s3.put_object(Bucket="src", Key="other/not-me.txt", Body=b"outside the prefix")
    spec = {"source": {"bucket": "src", "prefix": "in"}, "destination": {"bucket": "dst", "prefix": "out/"}}

    described = parent.run(spec, "prefix-job")

    objects = len(sources)
    output = assert_job_succeeded(parent, described, "prefix-job", objects)
    assert output["bytes_copied"] == sum(len(s["body"]) for s in sources.values())
    assert_copied(s3, sources, "in/", "out/")
    succeeded = assert_map_results(parent, output, "prefix-job", objects)
    # The children received AWS's listObjectsV2 items as CopyPrefix's ItemSelector renames
    # them (one-letter names, ferry.listed_items), and copied every object from them alone.
    from ferry.listed_items import LISTED_FIELDS

    item = json.loads(succeeded[0]["Input"])["Items"][0]
    assert set(item) == set(LISTED_FIELDS) == {"k", "s", "e", "c", "t"}
    assert item["k"].startswith("in/") and item["c"] == "STANDARD"
    assert (
        isinstance(item["t"], int)
        and item["e"].startswith('"')
        and item["s"] == len(sources[item["k"]]["body"])
    )
    batches = parent.harness.lambdas.called("copy-batch")
    assert len(batches) == math.ceil(objects / MAX_ITEMS_PER_BATCH)
    assert parent.ledger_job("prefix-job")["batches"] == len(batches)


@pytest.mark.parametrize("reads", ["input", "results"])
def test_the_map_runs_record_is_found_whatever_resultwriter_resolves_paths_against(parent, reads) -> None:
    """AWS's documentation does not say whether ResultWriter's Parameters paths are resolved
    against the Map's input (this harness) or its results (moto, LocalStack): the job's
    outcome must not depend on it, neither when every object is copied nor when a child fails."""
    parent.harness.result_writer_reads = reads
    s3 = parent.pipeline.s3
    sources = put_sources(s3, "in/", 30)
    spec = {"source": {"bucket": "src", "prefix": "in"}, "destination": {"bucket": "dst", "prefix": "out/"}}

    described = parent.run(spec, f"reads-{reads}")

    output = assert_job_succeeded(parent, described, f"reads-{reads}", len(sources))
    assert_copied(s3, sources, "in/", "out/")
    manifest, _ = parent.result_files(output["map_run"]["results"])
    assert manifest["MapRunArn"] == job_map_run(parent).map_run_arn


def test_a_scheduled_sync_of_an_empty_prefix_copies_nothing_and_says_so(parent) -> None:
    """A schedule's fire (named `<schedule>_<scheduled time>`, its spec without a job id) may
    find nothing under its prefix tonight: the Map reads no item and the job succeeds. (The
    same job started by hand is refused by Prepare: tests/pipeline/test_scheduled_start.py.)"""
    spec = {"source": {"bucket": "src", "prefix": "nothing/"}, "destination": {"bucket": "dst"}}
    name = "nightly_20261122T020000Z"

    described = parent.run(spec, name)

    output = assert_job_succeeded(parent, described, name, 0)
    assert output["bytes_copied"] == 0 and output["batches"] == 0
    assert parent.pipeline.s3.list_objects_v2(Bucket="dst").get("KeyCount") == 0
    manifest, records = parent.result_files(output["map_run"]["results"])
    assert records == {} and manifest["ResultFiles"] == {"FAILED": [], "PENDING": [], "SUCCEEDED": []}
    assert parent.harness.lambdas.called("copy-batch") == []


def _manifest_scenario(parent: Parent, fmt: str, key: str, body: bytes, name: str, sources: dict) -> None:
    s3 = parent.pipeline.s3
    s3.put_object(Bucket="src", Key=key, Body=body)
    spec = {
        "source": {
            "bucket": "src",
            "prefix": "in/",
            "manifest": {"bucket": "src", "key": key, "format": fmt},
        },
        "destination": {"bucket": "dst", "prefix": f"{fmt}/"},
    }

    described = parent.run(spec, name)

    objects = len(sources)
    output = assert_job_succeeded(parent, described, name, objects)
    assert output["bytes_copied"] == sum(len(s["body"]) for s in sources.values())
    assert_copied(s3, sources, "in/", f"{fmt}/")
    assert_map_results(parent, output, name, objects)


def test_a_csv_manifest_is_copied(parent) -> None:
    sources = put_sources(parent.pipeline.s3, "in/", 90)
    lines = ["key,bucket"] + [f'"{k}",src' for k in sources]
    _manifest_scenario(parent, "csv", "manifests/list.csv", "\n".join(lines).encode(), "csv-job", sources)


def test_a_json_lines_manifest_is_copied(parent) -> None:
    sources = put_sources(parent.pipeline.s3, "in/", 90)
    body = "".join(json.dumps({"key": k}, ensure_ascii=False) + "\n" for k in sources).encode()
    _manifest_scenario(parent, "jsonl", "manifests/list.jsonl", body, "jsonl-job", sources)


def test_an_s3_inventory_with_gzipped_csv_and_url_encoded_keys_is_copied(parent) -> None:
    s3 = parent.pipeline.s3
    sources = put_sources(s3, "in/", 90)
    keys = list(sources)
    files = []
    for part, chunk in enumerate((keys[:50], keys[50:])):
        rows = "".join(
            f'"src","{quote_plus(k, safe="/")}","{len(sources[k]["body"])}","true","false"\n' for k in chunk
        )
        data_key = f"inventory/src/daily/data/part-{part}.csv.gz"
        compressed = gzip.compress(rows.encode())
        s3.put_object(Bucket="src", Key=data_key, Body=compressed)
        files.append({"key": data_key, "size": len(compressed), "MD5checksum": "0"})
    manifest = {
        "sourceBucket": "src",
        "destinationBucket": "arn:aws:s3:::src",
        "version": "2016-11-30",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, IsLatest, IsDeleteMarker",
        "files": files,
    }
    body = json.dumps(manifest).encode()
    _manifest_scenario(
        parent, "inventory", "inventory/src/daily/manifest.json", body, "inventory-job", sources
    )


# -- large objects (Fargate) and failures --------------------------------------------------------

MiB = 1024 * 1024


def _lower_large_object_threshold(parent: Parent, monkeypatch: Any, threshold: int) -> None:
    monkeypatch.setenv("FERRY_LARGE_OBJECT_THRESHOLD", str(threshold))
    parent.pipeline.services.cache_clear()
    parent.harness.fargate.environment["FERRY_LARGE_OBJECT_THRESHOLD"] = str(threshold)


def test_objects_above_the_threshold_are_copied_by_the_fargate_task(parent, monkeypatch) -> None:
    s3 = parent.pipeline.s3
    _lower_large_object_threshold(parent, monkeypatch, MiB)
    sources = put_sources(s3, "in/", 10)
    for n, size in enumerate((3 * MiB, 2 * MiB + 17)):
        key = f"in/large-{n}.bin"
        body = bytes([n + 1]) * size
        s3.put_object(Bucket="src", Key=key, Body=body, Metadata={"large": "yes"}, Tagging="size=large")
        sources[key] = {"body": body, "metadata": {"large": "yes"}, "tags": {"size": "large"}}
    spec = {"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst", "prefix": "big/"}}

    described = parent.run(spec, "large-job")

    output = assert_job_succeeded(parent, described, "large-job", len(sources))
    assert_copied(s3, sources, "in/", "big/")
    assert_map_results(parent, output, "large-job", len(sources))
    tasks = parent.harness.fargate.tasks
    assert sorted(json.loads(t["environment"]["FERRY_ITEM"])["k"] for t in tasks) == [
        "in/large-0.bin",
        "in/large-1.bin",
    ]
    assert all(t["exit_code"] == 0 and t["environment"]["FERRY_JOB_ID"] == "large-job" for t in tasks)
    assert parent.ledger_job("large-job")["batches"] == 3  # one Lambda pass, two Fargate tasks


def test_a_container_that_keeps_failing_is_retried_then_recorded_as_failed(parent, monkeypatch) -> None:
    s3 = parent.pipeline.s3
    _lower_large_object_threshold(parent, monkeypatch, MiB)
    sources = put_sources(s3, "in/", 5)
    s3.put_object(Bucket="src", Key="in/large.bin", Body=b"L" * (2 * MiB))

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("handlers.copy_large.copy_large_object", crash)
    spec = {"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst", "prefix": "f/"}}

    described = parent.run(spec, "crash-job")

    assert described["status"] == "FAILED", described
    assert described["error"] == "FerryJobIncomplete"
    assert "1 of 11 objects failed" in described["cause"]
    tasks = parent.harness.fargate.tasks
    assert [t["exit_code"] for t in tasks] == [1] * 7, "the first run and its 6 retries (States.TaskFailed)"
    assert len(parent.harness.retry_sleeps) >= 6, "the retries' waits were skipped, not slept"
    job = parent.ledger_job("crash-job")
    assert (job["status"], job["objects"], job["copied"], job["failed"]) == ("PARTIAL", 11, 10, 1)
    failures = list(DynamoLedger(parent.pipeline.dynamodb, PIPELINE_TABLE).failures("crash-job"))
    assert [f.key for f in failures] == ["in/large.bin"]
    assert "States.TaskFailed" in failures[0].reason
    report = parent.report("crash-job")
    assert (report["status"], report["objects"], report["failed"]) == ("PARTIAL", 11, 1)
    assert_copied(s3, sources, "in/", "f/")


def _break_batches_holding(parent: Parent, monkeypatch: Any, key: str, *, also_record_failure: bool) -> None:
    """copy-batch (and, if asked, record-failure) raise for the batch that holds `key`."""

    def wrap(handler: Any) -> Any:
        def broken(event: dict[str, Any], context: Any) -> Any:
            if any(i.get("k") == key for i in pass_event(event).get("items") or []):
                raise RuntimeError(f"cannot process the batch holding {key}")
            return handler(event, context)

        return broken

    handlers = parent.harness.lambdas.handlers
    monkeypatch.setitem(handlers, "copy-batch", wrap(copy_batch.handler))
    if also_record_failure:
        monkeypatch.setitem(handlers, "record-failure", wrap(record_failure.handler))


def test_a_batch_whose_lambda_keeps_failing_is_recorded_and_the_job_is_partial(parent, monkeypatch) -> None:
    put_sources(parent.pipeline.s3, "in/", 200)
    _break_batches_holding(parent, monkeypatch, "in/050.txt", also_record_failure=False)
    spec = {"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst"}}

    described = parent.run(spec, "partial-job")

    assert described["status"] == "FAILED", described
    assert described["error"] == "FerryJobIncomplete"
    objects = 205
    assert f"{MAX_ITEMS_PER_BATCH} of {objects} objects failed" in described["cause"]
    job = parent.ledger_job("partial-job")
    assert (job["status"], job["objects"], job["copied"] + job["failed"]) == ("PARTIAL", objects, objects)
    assert job["failed"] == MAX_ITEMS_PER_BATCH
    failures = list(DynamoLedger(parent.pipeline.dynamodb, PIPELINE_TABLE).failures("partial-job"))
    assert len(failures) == MAX_ITEMS_PER_BATCH and "in/050.txt" in {f.key for f in failures}
    assert all("cannot process the batch holding in/050.txt" in f.reason for f in failures)
    report = parent.report("partial-job")
    assert (report["objects"], report["failed"], report["status"]) == (
        objects,
        MAX_ITEMS_PER_BATCH,
        "PARTIAL",
    )
    # The child itself succeeded (RecordFailedBatch caught the error), so the Map Run did too.
    manifest, records = parent.result_files(report["map_run"]["results"])
    assert set(records) == {"SUCCEEDED"} and len(records["SUCCEEDED"]) == math.ceil(
        objects / MAX_ITEMS_PER_BATCH
    )


LISTED = 205  # put_sources(..., 200) plus the awkward keys


def _run_with_a_failing_child(parent: Parent, monkeypatch: Any, name: str) -> dict[str, Any]:
    """The batch holding in/050.txt fails in copy-batch AND in record-failure: its child
    execution fails (40 of 205 items, above the 5 % tolerated)."""
    put_sources(parent.pipeline.s3, "in/", 200)
    _break_batches_holding(parent, monkeypatch, "in/050.txt", also_record_failure=True)
    return parent.run({"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst"}}, name)


def test_a_child_execution_that_fails_above_tolerance_fails_the_map_run(parent, monkeypatch) -> None:
    described = _run_with_a_failing_child(parent, monkeypatch, "tolerance-job")

    assert described["status"] == "FAILED", described
    assert described["error"] == "FerryJobIncomplete"
    assert "the Distributed Map stopped: States.ExceedToleratedFailureThreshold" in described["cause"]
    run = job_map_run(parent)
    statuses = [c.status for c in run.children]
    assert statuses.count("FAILED") == 1, statuses
    report = parent.report("tolerance-job")
    assert report["status"] == "FAILED"
    assert report["map_error"]["error"] == "States.ExceedToleratedFailureThreshold"
    assert parent.ledger_job("tolerance-job")["status"] == "FAILED"
    # The ResultWriter files are written also when the Map Run fails, every child in one of them.
    run_id = run.map_run_arn.rsplit(":", 1)[-1]
    manifest, records = parent.result_files(
        {"Bucket": PIPELINE_REPORTS, "Key": f"jobs/.map-runs/{run_id}/manifest.json"}
    )
    assert len(records["FAILED"]) == 1 and records["FAILED"][0]["Error"] == "RuntimeError"
    assert "cannot process the batch holding in/050.txt" in records["FAILED"][0]["Cause"]
    assert (
        sum(len(r) for r in records.values()) == len(run.children) == math.ceil(LISTED / MAX_ITEMS_PER_BATCH)
    )
    assert {s for s in records} <= {"SUCCEEDED", "FAILED", "PENDING"}


def test_when_the_map_run_fails_every_listed_object_is_still_in_the_report(parent, monkeypatch) -> None:
    described = _run_with_a_failing_child(parent, monkeypatch, "accounting-job")

    assert described["status"] == "FAILED", described
    report = parent.report("accounting-job")
    assert report["status"] == "FAILED"
    assert report["objects"] == LISTED, report
    assert report["copied"] + report["skipped"] + report["failed"] + report["pending"] == LISTED, report
    assert report["failed"] + report["pending"] >= MAX_ITEMS_PER_BATCH, report


def test_a_lost_batch_within_tolerance_is_counted_failed_not_dropped(parent, monkeypatch) -> None:
    """Issue 10, section 2: a child that fails outside its Catch, within the tolerated failure
    percentage, leaves the Map Run SUCCEEDED. Its objects must still be in the job's counts
    and in failures.jsonl (so a retry picks them up), and the job is not SUCCEEDED."""
    monkeypatch.setenv("FERRY_TOLERATED_FAILURE_PERCENTAGE", "50")
    parent.pipeline.services.cache_clear()
    sources = put_sources(parent.pipeline.s3, "in/", 200)
    _break_batches_holding(parent, monkeypatch, "in/050.txt", also_record_failure=True)

    described = parent.run(
        {"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst"}}, "lost"
    )

    assert [c.status for c in job_map_run(parent).children].count("FAILED") == 1
    assert described["status"] == "FAILED" and described["error"] == "FerryJobIncomplete", described
    report = parent.report("lost")
    assert report["status"] == "PARTIAL"
    assert (report["objects"], report["failed"], report["copied"]) == (LISTED, 40, LISTED - 40), report
    assert report["objects_read_by_map"] == LISTED
    assert report["lost_in_unfinished_batches"] == 40
    assert "40 of 205 objects failed" in described["cause"]
    body = parent.pipeline.s3.get_object(Bucket=PIPELINE_REPORTS, Key="jobs/lost/failures.jsonl")["Body"]
    failures = [json.loads(line) for line in body.read().splitlines()]
    assert len(failures) == 40 and "in/050.txt" in {f["key"] for f in failures}
    assert all("cannot process the batch holding in/050.txt" in f["reason"] for f in failures)
    at_destination = {o["Key"] for o in parent.pipeline.s3.list_objects_v2(Bucket="dst")["Contents"]}
    assert len(at_destination) == LISTED - 40 == len(sources) - 40
    assert not at_destination & {f["key"] for f in failures}


ITEM_COUNTS_READINGS = ["items", "batches"]  # what DescribeMapRun's itemCounts may count


def _leave_failed_inputs_out(monkeypatch: Any) -> None:
    """The ResultWriter's FAILED records carry no Input (InputDetails.Included false), so
    Finalize cannot tell which objects a failed child held."""
    import parent_harness

    original = parent_harness._child_entry

    def without_input(run: Any, child: Any) -> dict[str, Any]:
        entry = original(run, child)
        if entry.get("Status") == "FAILED":
            entry.pop("Input")
            entry["InputDetails"] = {"Included": False}
        return entry

    monkeypatch.setattr(parent_harness, "_child_entry", without_input)


@pytest.mark.parametrize("counted", ITEM_COUNTS_READINGS)
def test_every_object_copied_succeeds_whatever_itemcounts_counts(parent, counted) -> None:
    """With an ItemBatcher, AWS's API reference does not settle whether DescribeMapRun's
    itemCounts counts listed objects or batches: a job that copied every object is SUCCEEDED
    under both readings, never FAILED on a count."""
    parent.harness.item_counts_count = counted
    sources = put_sources(parent.pipeline.s3, "in/", 200)

    described = parent.run(
        {"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst"}}, f"all-{counted}"
    )

    assert_job_succeeded(parent, described, f"all-{counted}", len(sources))
    assert_copied(parent.pipeline.s3, sources, "in/", "")
    batches = math.ceil(LISTED / MAX_ITEMS_PER_BATCH)
    report = parent.report(f"all-{counted}")
    assert report["objects_read_by_map"] == LISTED
    assert report["map_run_counts"] == {
        "item_counts_total": LISTED if counted == "items" else batches,
        "execution_counts_total": batches,
        "item_counts_read_as": counted,
        "batches_recorded": batches,
        "objects_given_to_batches": LISTED,
    }


@pytest.mark.parametrize("counted", ITEM_COUNTS_READINGS)
def test_a_batch_that_recorded_nothing_fails_the_job_whatever_itemcounts_counts(
    parent, monkeypatch, counted
) -> None:
    """When the Map Run's record does not say which objects a failed child held (its input
    left out of the result file), the ledger cannot account for them: the job fails, naming
    the child executions the Map Run started and the batches the ledger holds, never a quiet
    SUCCEEDED, whether itemCounts counts objects or batches."""
    parent.harness.item_counts_count = counted
    _leave_failed_inputs_out(monkeypatch)
    monkeypatch.setenv("FERRY_TOLERATED_FAILURE_PERCENTAGE", "50")
    parent.pipeline.services.cache_clear()
    put_sources(parent.pipeline.s3, "in/", 200)
    _break_batches_holding(parent, monkeypatch, "in/050.txt", also_record_failure=True)

    described = parent.run(
        {"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst"}}, f"gap-{counted}"
    )

    batches = math.ceil(LISTED / MAX_ITEMS_PER_BATCH)
    assert described["status"] == "FAILED", described
    assert (
        f"the Map Run started {batches} child executions (DescribeMapRun executionCounts.total) "
        f"but the ledger holds {batches - 1} batches" in described["cause"]
    ), described["cause"]
    report = parent.report(f"gap-{counted}")
    assert report["status"] == "FAILED" and report["objects"] == LISTED - 40
    if counted == "items":  # and the numbers the reading gives, named as such
        assert report["objects_read_by_map"] == LISTED
        assert f"DescribeMapRun itemCounts.total is {LISTED}" in described["cause"]


@pytest.mark.parametrize("counted", ITEM_COUNTS_READINGS)
def test_objects_a_batch_handed_over_and_lost_fail_the_job_whatever_itemcounts_counts(
    parent, monkeypatch, counted
) -> None:
    """The batch holding in/050.txt hands all its objects over at its first pass (recorded),
    then its second pass fails outside its Catch and its input is left out of the result
    file: the batch is in the ledger, 40 of its objects are not. The job fails, naming the
    objects the batches were given and those the ledger accounts for, under both readings."""

    def holds_050(event: dict[str, Any]) -> bool:
        return any(expand(i).get("Key") == "in/050.txt" for i in pass_event(event).get("items") or [])

    def short_then_broken(event: dict[str, Any], context: Any) -> Any:
        if holds_050(event) and pass_event(event).get("pass") == 1:
            return copy_batch.handler(event, FakeLambdaContext(remaining_ms=1_000))
        if holds_050(event):
            raise RuntimeError("the second pass of the batch holding in/050.txt is lost")
        return copy_batch.handler(event, context)

    def broken_for_050(event: dict[str, Any], context: Any) -> Any:
        if holds_050(event):
            raise RuntimeError("cannot record the batch holding in/050.txt")
        return record_failure.handler(event, context)

    parent.harness.item_counts_count = counted
    _leave_failed_inputs_out(monkeypatch)
    monkeypatch.setitem(parent.harness.lambdas.handlers, "copy-batch", short_then_broken)
    monkeypatch.setitem(parent.harness.lambdas.handlers, "record-failure", broken_for_050)
    monkeypatch.setenv("FERRY_TOLERATED_FAILURE_PERCENTAGE", "50")
    parent.pipeline.services.cache_clear()
    put_sources(parent.pipeline.s3, "in/", 200)

    described = parent.run(
        {"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst"}}, f"lost-{counted}"
    )

    assert [c.status for c in job_map_run(parent).children].count("FAILED") == 1
    assert described["status"] == "FAILED", described
    assert (
        f"the ledger's batches were given {LISTED} objects but account for {LISTED - 40}"
        in described["cause"]
    ), described["cause"]
    report = parent.report(f"lost-{counted}")
    assert report["status"] == "FAILED" and report["objects"] == LISTED - 40


def test_a_finalize_that_fails_for_good_leaves_the_job_failed_not_running(parent, monkeypatch) -> None:
    """Issue 10, defect 9: Finalize had no Catch: when it failed after its retries the
    execution failed and the job stayed RUNNING in the ledger forever."""

    def broken(event: dict[str, Any], context: Any) -> Any:
        raise RuntimeError("report bucket unreachable")

    monkeypatch.setitem(parent.harness.lambdas.handlers, "finalize", broken)
    put_sources(parent.pipeline.s3, "in/", 3)

    described = parent.run(
        {"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst"}}, "fin"
    )

    assert described["status"] == "FAILED"
    assert described["error"] == "FerryFinalizeFailed"
    assert "report bucket unreachable" in described["cause"]
    job = parent.ledger_job("fin")
    assert job["status"] == "FAILED"
    assert "report bucket unreachable" in job["finalize_error"]


def test_concurrent_batches_whose_ledger_writes_would_conflict_are_all_counted(
    parent, dynamodb_transaction_conflicts
) -> None:
    """Issue 10, defect 1, end to end: 4 batches at a time under DynamoDB's transaction
    conflict rule; nothing is recorded failed, every object is counted once."""
    sources = put_sources(parent.pipeline.s3, "in/", 200)

    described = parent.run(
        {"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst"}}, "busy"
    )

    assert_job_succeeded(parent, described, "busy", len(sources))
    assert dynamodb_transaction_conflicts == []
    assert_copied(parent.pipeline.s3, sources, "in/", "")


def test_a_batch_is_split_by_max_input_bytes_per_batch(parent, monkeypatch) -> None:
    """Long keys: MaxInputBytesPerBatch, not MaxItemsPerBatch, decides the batches."""
    monkeypatch.setenv("FERRY_MAX_INPUT_BYTES_PER_BATCH", str(8 * 1024))
    parent.pipeline.services.cache_clear()
    sources = put_sources(parent.pipeline.s3, "in/" + "long-name-" * 40 + "/", 60)

    described = parent.run(
        {"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst"}}, "bytes"
    )

    assert_job_succeeded(parent, described, "bytes", len(sources))
    children = job_map_run(parent).children
    assert len(children) > math.ceil(len(sources) / MAX_ITEMS_PER_BATCH), [c.items for c in children]
    assert all(len(json.dumps(c.input, separators=(",", ":")).encode()) <= 8 * 1024 for c in children)
    assert sum(c.items for c in children) == len(sources)
    assert_copied(parent.pipeline.s3, sources, "in/", "")


def test_a_pass_that_hands_over_at_its_deadline_is_finished_by_later_passes(parent, monkeypatch) -> None:
    """The first CopyBatch of every batch starts with less Lambda time left than its deadline
    margin: it copies nothing and hands every object over; the next pass copies them."""
    from conftest import FakeLambdaContext

    calls: dict[str, int] = {}

    def context(name: str, number: int) -> Any:
        calls[name] = calls.get(name, 0) + 1
        short = name == "copy-batch" and calls[name] <= math.ceil(LISTED / MAX_ITEMS_PER_BATCH)
        return FakeLambdaContext(remaining_ms=1_000 if short else 900_000)

    monkeypatch.setattr(parent.harness.lambdas, "context", context)
    sources = put_sources(parent.pipeline.s3, "in/", 200)

    described = parent.run(
        {"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst"}}, "late"
    )

    assert_job_succeeded(parent, described, "late", len(sources))
    passes = [pass_event(event).get("pass") for event in parent.harness.lambdas.called("copy-batch")]
    assert passes.count(2) >= 1, passes
    assert_copied(parent.pipeline.s3, sources, "in/", "")


def test_the_same_job_run_twice_skips_everything_the_second_time(parent) -> None:
    sources = put_sources(parent.pipeline.s3, "in/", 100)
    spec = {"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst", "prefix": "c/"}}
    assert_job_succeeded(parent, parent.run(spec, "first"), "first", len(sources))

    described = parent.run(spec, "second")

    assert described["status"] == "SUCCEEDED", described
    report = parent.report("second")
    assert (report["objects"], report["copied"], report["skipped"], report["failed"]) == (
        len(sources),
        0,
        len(sources),
        0,
    )
    assert_copied(parent.pipeline.s3, sources, "in/", "c/")


def _versioned_pair(s3: Any) -> None:
    for bucket in ("src", "dst"):
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})


def _history(s3: Any, bucket: str, key: str) -> list[str]:
    """A key's versions oldest first (ListObjectVersions lists each key's newest first), then
    "<marker>" if a delete marker is the latest (the only place these scenarios put one)."""
    answer = s3.list_object_versions(Bucket=bucket, Prefix=key)
    versions = [v for v in answer.get("Versions", []) if v["Key"] == key]
    markers = [m for m in answer.get("DeleteMarkers", []) if m["Key"] == key]
    bodies = [
        s3.get_object(Bucket=bucket, Key=key, VersionId=v["VersionId"])["Body"].read().decode()
        for v in reversed(versions)
    ]
    return bodies + ["<marker>" for m in markers if m["IsLatest"]]


def test_an_all_versions_job_is_routed_to_its_own_map_over_the_keys_its_listing_wrote(parent) -> None:
    """The ListVersions loop lists the keys with a history (one whose latest is a delete marker
    too) into JSON Lines parts in the report bucket; CopyVersionHistories reads them through
    the last run's manifest, one item per key."""
    s3 = parent.pipeline.s3
    _versioned_pair(s3)
    for key, body in [
        ("in/a", b"a1"),
        ("in/a", b"a2"),
        ("in/gone", b"g1"),
        ("in/gone", None),
        ("in/a", None),
    ]:
        if body is None:
            s3.delete_object(Bucket="src", Key=key)
        else:
            s3.put_object(Bucket="src", Key=key, Body=body)
        time.sleep(0.01)  # moto orders a key's versions by time
    spec = {
        "source": {"bucket": "src", "prefix": "in/"},
        "destination": {"bucket": "dst", "prefix": "out/"},
        "options": {"all_versions": True},
    }

    described = parent.run(spec, "histories-job")

    assert described["status"] == "SUCCEEDED", described
    output = json.loads(described["output"])
    assert (output["objects"], output["copied"], output["keys"], output["objects_read_by_map"]) == (
        5,
        5,
        2,
        2,
    )
    assert _history(s3, "dst", "out/a") == ["a1", "a2", "<marker>"]
    assert _history(s3, "dst", "out/gone") == ["g1", "<marker>"]
    inputs = [
        json.loads(r["Input"]) for r in parent.result_files(output["map_run"]["results"])[1]["SUCCEEDED"]
    ]
    assert sorted(i["k"] for child in inputs for i in child["Items"]) == ["in/a", "in/gone"]


def test_an_all_versions_job_with_no_history_to_copy_goes_straight_to_finalize(parent) -> None:
    """No empty manifest is handed to the ItemReader (AWS does not say what it does with one)."""
    _versioned_pair(parent.pipeline.s3)
    spec = {
        "source": {"bucket": "src", "prefix": "nothing/"},
        "destination": {"bucket": "dst"},
        "options": {"all_versions": True},
    }

    described = parent.run(spec, "no-histories")

    assert described["status"] == "SUCCEEDED", described
    output = json.loads(described["output"])
    assert (output["objects"], output["keys"], output["batches"]) == (0, 0, 0)
    assert parent.harness.map_runs == [] and parent.harness.lambdas.called("copy-batch") == []


def test_on_an_account_of_ten_lambdas_the_map_runs_eight_children_and_the_report_says_why(
    parent, monkeypatch
) -> None:
    """A new account's reduced Lambda quota (10) under the default max_concurrency (100):
    Prepare lowers the Maps' MaxConcurrency to 8, the Map Run never runs more children at
    once, every object is copied, and the report says why fewer ran than the setting asks."""
    import threading

    parent.pipeline.lambda_quota(10)
    monkeypatch.setenv("FERRY_MAX_CONCURRENCY", "100")
    monkeypatch.setenv("FERRY_MAX_ITEMS_PER_BATCH", "2")
    parent.pipeline.services.cache_clear()
    sources = put_sources(parent.pipeline.s3, "ten/", 20)
    running, most, lock = [0], [0], threading.Lock()
    copy = parent.harness.lambdas.handlers["copy-batch"]

    def counted(event: Any, context: Any) -> Any:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            return copy(event, context)
        finally:
            with lock:
                running[0] -= 1

    parent.harness.lambdas.handlers["copy-batch"] = counted

    described = parent.run(
        {"source": {"bucket": "src", "prefix": "ten/"}, "destination": {"bucket": "dst"}}, "ten"
    )

    output = assert_job_succeeded(parent, described, "ten", len(sources))
    assert_copied(parent.pipeline.s3, sources, "ten/", "")
    run = parent.harness.map_runs[-1]
    assert run.max_concurrency == 8 and len(run.children) == 13
    assert 1 <= most[0] <= 8, most[0]
    concurrency = output["concurrency"]
    assert (concurrency["asked"], concurrency["max_concurrency"]) == (100, 8)
    assert "max_concurrency 100 lowered to 8" in concurrency["note"]
    assert parent.report("ten")["concurrency"] == concurrency
    from ferry.cli.shared.report import report_text

    text = report_text({"summary": output, **output}, "ten", every_failure=False)
    assert f"note: {concurrency['note']}" in text  # `ferry job report`
    page = parent.pipeline.s3.get_object(Bucket=PIPELINE_REPORTS, Key="jobs/ten/report.html")["Body"].read()
    assert b"max_concurrency 100 lowered to 8" in page


def test_an_all_versions_listing_longer_than_one_run_loops_in_the_parent_until_done(
    parent, monkeypatch
) -> None:
    """ListVersions lists one page a run (the virtual clock of listing_support.py): the parent
    sends it round (AllVersionsListed) until the listing is done, a run retried after a Lambda
    service error that came after the function ran included, then reads the parts the last
    run's manifest names. Each key reaches the Map once, whole (p/m's and p/t's versions span
    two runs each), and every history is copied in order."""
    s3 = parent.pipeline.s3
    atomic_moto_s3(monkeypatch)
    clock = install_clock(parent.pipeline, monkeypatch)
    histories = fill_source(s3)
    versions = sum(len(v) for v in histories.values())
    # Prepare and ListVersions get the time of one page (Prepare lists nothing), the others 15 minutes.
    parent.harness.lambdas.context = lambda name, call: (
        pages_context(parent.pipeline) if name in ("prepare", "list-versions") else FakeLambdaContext()
    )
    service_error = type("Lambda.ServiceException", (Exception,), {})
    runs: list[dict[str, Any]] = []

    def answer_lost_once(event: dict[str, Any], context: Any) -> Any:
        job = list_versions.handler(event, context)  # it ran, wrote its part and manifest
        runs.append(job["histories"])
        if len(runs) == 1:
            raise service_error("the answer was lost on its way back")
        return job

    monkeypatch.setitem(parent.harness.lambdas.handlers, "list-versions", answer_lost_once)

    described = parent.run(listing_spec("long-listing"), "long-listing")

    assert described["status"] == "SUCCEEDED", described
    output = json.loads(described["output"])
    assert (output["objects"], output["copied"], output["failed"]) == (versions, versions, 0), output
    assert output["keys"] == output["objects_read_by_map"] == len(histories), output
    # Run 1 twice (its Retry), runs 2 and 3 once each: one page a run, run 1's page twice.
    assert [r["runs"] for r in runs] == [1, 1, 2, 3] and clock.pages == 4, runs
    assert len(parent.harness.retry_sleeps) == 1
    (run,) = parent.harness.map_runs
    items = [i for child in run.children for i in child.input["Items"]]
    assert_items_are_the_histories(items, histories)
    for key, history in histories.items():
        assert dest_history(s3, "q/" + key[2:]) == history, key


def test_an_all_versions_listing_that_fails_fails_the_job_with_its_reason(parent, monkeypatch) -> None:
    """A run that fails for good (here: the source refusing its pages) goes through the Catch
    to Finalize: the job ends FAILED, nothing copied, the listing's error in its cause."""
    s3 = parent.pipeline.s3
    _versioned_pair(s3)
    s3.put_object(Bucket="src", Key="in/a", Body=b"a")
    real = list_versions.handler

    def refused(event: dict[str, Any], context: Any) -> Any:
        client = list_versions.services().s3
        original = client.list_object_versions

        def deny(**params: Any) -> Any:
            if "MaxKeys" not in params:
                error = {"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}
                raise ClientError(error, "ListObjectVersions")
            return original(**params)

        client.list_object_versions = deny
        try:
            return real(event, context)
        finally:
            del client.list_object_versions

    monkeypatch.setitem(parent.harness.lambdas.handlers, "list-versions", refused)
    spec = {
        "source": {"bucket": "src", "prefix": "in/"},
        "destination": {"bucket": "dst"},
        "options": {"all_versions": True},
    }

    described = parent.run(spec, "refused-listing")

    assert (described["status"], described["error"]) == ("FAILED", "FerryJobIncomplete"), described
    assert "listing the source's versions stopped: ConfigError: " in described["cause"], described["cause"]
    assert "s3:ListBucketVersions" in described["cause"], described["cause"]
    job = parent.ledger_job("refused-listing")
    assert (job["status"], job["objects"], job["copied"]) == ("FAILED", 0, 0)
    assert parent.harness.map_runs == [] and parent.harness.lambdas.called("copy-batch") == []
