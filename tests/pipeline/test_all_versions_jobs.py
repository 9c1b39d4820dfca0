"""An all_versions job (`"options": {"all_versions": true}`) on real S3 servers (versitygw and
MinIO, versioned buckets): through `ferry run` (the installed executable) and through the
pipeline's own Lambda handlers (Prepare, the ListVersions loop, CopyBatch, Finalize; the ledger in DynamoDB on moto's
server, the report bucket on the S3 server), as the state machine calls them.

Each asserts the destination's history read back from the server without Ferry's code
(contents and delete markers, oldest first), the report's source version -> destination
version mapping, counts that add up (every version in one state; the Map's items are keys),
that a re-run copies only the versions not yet there, and that bad input is refused in one line
before anything is written.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from conftest import FakeLambdaContext, S3Server, copy_batch_pass, create_ledger_table
from ferry.pipeline.history_keys import history_items
from ferry.pipeline.item_reader import batches
from ferry.pipeline.job_reports import JobReports
from ferry.pipeline.ledger.sqlite import SQLiteLedger
from version_histories import MARKER, ferrys_history, history, put_in_parts, versioned, write

FERRY = str(Path(sys.executable).with_name("ferry"))
SERVERS = ("versitygw", "minio")
# p/a: a history with a delete marker inside; p/b: latest is a delete marker (ListObjectsV2,
# the Map's own S3 reader, would not list it at all); p/c: one version; elsewhere: outside.
EVENTS: list[tuple[str, bytes | None]] = [
    ("p/a", b"a1"),
    ("p/b", b"b1"),
    ("p/a", b"a2"),
    ("p/a", None),
    ("p/c", b"c1"),
    ("p/b", None),
    ("p/a", b"a3"),
    ("elsewhere/x", b"x"),
]
EXPECTED = {"q/a": ["a1", "a2", MARKER, "a3"], "q/b": ["b1", MARKER], "q/c": ["c1"]}


def ferry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FERRY, *args], capture_output=True, text=True, timeout=300)


def spec_file(tmp_path: Path, spec: dict[str, Any]) -> str:
    path = tmp_path / f"job-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(spec))
    return str(path)


def job_spec(src: str, dst: str, **options: Any) -> dict[str, Any]:
    return {
        "source": {"bucket": src, "prefix": "p/"},
        "destination": {"bucket": dst, "prefix": "q/"},
        "options": {"all_versions": True, **options},
    }


def version_ids(server: S3Server, bucket: str, prefix: str) -> set[str]:
    answer = server.client.list_object_versions(Bucket=bucket, Prefix=prefix)
    return {v["VersionId"] for v in answer.get("Versions", [])}


def assert_adds_up(summary: dict[str, Any], *, versions: int, keys: int) -> None:
    parts = summary["copied"] + summary["skipped"] + summary["failed"] + summary["pending"]
    assert parts == summary["objects"] == versions, summary
    assert summary["keys"] == summary["objects_read_by_map"] == keys, summary
    assert summary["all_versions"] is True and "count_problems" not in summary, summary


@pytest.mark.parametrize("server_name", SERVERS)
def test_ferry_run_copies_every_history_in_order_and_a_rerun_copies_only_what_is_new(
    request: pytest.FixtureRequest, tmp_path: Path, server_name: str
) -> None:
    server: S3Server = request.getfixturevalue(server_name)
    src, dst = versioned(server, "src"), versioned(server, "dst")
    write(server, src, EVENTS)
    spec = spec_file(tmp_path, job_spec(src, dst))
    ledger, report = tmp_path / "ledger.sqlite", tmp_path / "report.jsonl"
    common = ["--endpoint-url", server.url, "--ledger", str(ledger), "--report-dir", str(tmp_path / "r")]

    first = ferry("run", spec, *common, "--max-items-per-batch", "2", "--report", str(report), "--json")

    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert (summary["status"], summary["copied"], summary["batches"]) == ("SUCCEEDED", 7, 2), summary
    assert_adds_up(summary, versions=7, keys=3)
    assert {key: history(server, dst, key) for key in EXPECTED} == EXPECTED
    assert history(server, dst, "q/x") == [] and history(server, dst, "elsewhere/x") == []
    rows = [json.loads(line) for line in report.read_text().splitlines()[:-1]]
    assert len(rows) == 7 and {r["status"] for r in rows} == {"copied"}
    mapped = {r["source_version_id"]: r["version_id"] for r in rows if r["strategy"] != "delete-marker"}
    assert set(mapped) == version_ids(server, src, "p/")
    assert set(mapped.values()) == version_ids(server, dst, "q/")
    markers = [r for r in rows if r["strategy"] == "delete-marker"]
    assert {(r["key"], r["verified_by"]) for r in markers} == {
        ("p/a", "delete-marker"),
        ("p/b", "delete-marker"),
    }
    assert all(r["version_id"] and r["source_version_id"] for r in markers)
    job = SQLiteLedger(ledger).job(summary["job_id"])
    assert job is not None and (job["status"], job["objects"], job["copied"]) == ("SUCCEEDED", 7, 7)

    write(server, src, [("p/a", b"a4"), ("p/c", None)])
    again = ferry("run", spec, *common, "--json", "--report", str(report))

    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert (summary["copied"], summary["skipped"], summary["failed"]) == (2, 7, 0), summary
    assert_adds_up(summary, versions=9, keys=3)
    rows = [json.loads(line) for line in report.read_text().splitlines()[:-1]]
    skipped = [r for r in rows if r["status"] == "skipped"]
    assert all(o["reason"].startswith("already there as version ") for o in skipped), skipped
    assert history(server, dst, "q/a") == ["a1", "a2", MARKER, "a3", "a4"]
    assert history(server, dst, "q/c") == ["c1", MARKER]


def test_a_history_over_the_lambda_threshold_is_copied_whole_by_the_large_object_entry_point(
    minio: S3Server, tmp_path: Path
) -> None:
    src, dst = versioned(minio, "src"), versioned(minio, "dst")
    write(minio, src, [("p/big", b"x" * 600), ("p/big", b"y" * 700), ("p/big", None), ("p/small", b"s")])
    spec = spec_file(tmp_path, {**job_spec(src, dst), "job_id": "large-histories"})
    ledger = tmp_path / "ledger.sqlite"

    run = ferry(
        "run", spec, "--endpoint-url", minio.url, "--ledger", str(ledger),
        "--report-dir", str(tmp_path / "r"), "--large-object-threshold", "1000", "--json",
    )  # fmt: skip

    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["copied"] == 4
    assert_adds_up(summary, versions=4, keys=2)
    assert history(minio, dst, "q/big") == ["x" * 600, "y" * 700, MARKER]
    assert history(minio, dst, "q/small") == ["s"]
    large = [m for m in SQLiteLedger(ledger).batches("large-histories") if "-large-" in m["sk"]]
    assert len(large) == 1 and large[0]["counts"]["objects"] == 3, large


def test_a_destination_history_another_writer_changed_fails_that_key_alone_with_its_reason(
    minio: S3Server, tmp_path: Path
) -> None:
    src, dst = versioned(minio, "src"), versioned(minio, "dst")
    write(minio, src, [("p/k", b"1"), ("p/k", b"2"), ("p/ok", b"o")])
    write(minio, dst, [("q/k", b"someone else's")])
    spec = spec_file(tmp_path, job_spec(src, dst))

    report = tmp_path / "report.jsonl"
    run = ferry("run", spec, "--endpoint-url", minio.url, "--ledger", str(tmp_path / "l.sqlite"),
                "--report-dir", str(tmp_path / "r"), "--json", "--report", str(report))  # fmt: skip

    assert run.returncode == 2, run.stderr
    summary = json.loads(run.stdout)
    assert (summary["status"], summary["copied"], summary["failed"]) == ("PARTIAL", 1, 2), summary
    assert_adds_up(summary, versions=3, keys=2)
    rows = [json.loads(line) for line in report.read_text().splitlines()[:-1]]
    failed = [r for r in rows if r["status"] == "failed"]
    assert {o["key"] for o in failed} == {"p/k"}
    assert all("does not hold the source's version" in o["reason"] for o in failed), failed
    failures = Path(summary["failures_report"]).read_text().splitlines()
    assert {json.loads(line)["version_id"] for line in failures} == version_ids(minio, src, "p/k")
    assert history(minio, dst, "q/k") == ["someone else's"]


@pytest.mark.parametrize(
    ("case", "field"),
    [
        ("unversioned destination", "destination.bucket: "),
        ("source never versioned", "source.bucket: "),
    ],
)
def test_buckets_that_keep_no_history_are_refused_in_one_line_before_anything_is_written(
    versitygw: S3Server, tmp_path: Path, case: str, field: str
) -> None:
    server = versitygw
    if case == "unversioned destination":
        src, dst = versioned(server, "src"), server.bucket("dst")
    else:
        src, dst = server.bucket("src"), versioned(server, "dst")
    server.client.put_object(Bucket=src, Key="p/k", Body=b"1")
    spec = spec_file(tmp_path, job_spec(src, dst))
    ledger = tmp_path / "ledger.sqlite"

    run = ferry("run", spec, "--endpoint-url", server.url, "--ledger", str(ledger))

    assert run.returncode == 1, (run.stdout, run.stderr)
    assert run.stderr.startswith(f"ferry: error: {field}") and run.stderr.count("\n") == 1, run.stderr
    assert "versions" in run.stderr and "Traceback" not in run.stderr
    assert server.client.list_object_versions(Bucket=dst).get("Versions", []) == []
    assert not ledger.exists() or SQLiteLedger(ledger).job("anything") is None
    assert not list((tmp_path).glob("**/histories/*"))


# -- the pipeline's own handlers, as the state machine calls them --------------------------------


@pytest.fixture
def handlers_on(monkeypatch: pytest.MonkeyPatch, motoserver: S3Server) -> Any:
    """The Lambda handlers' environment as the CDK app sets it, their S3 on a real server and
    their DynamoDB ledger on moto's server; returns a function taking the server."""
    from ferry.pipeline.locations import Location
    from ferry.pipeline.settings import PipelineSettings
    from ferry.quotas.lambda_concurrency import AccountConcurrency
    from handlers import prepare, runtime

    def on(server: S3Server) -> tuple[str, Any]:
        reports = server.bucket("rep")
        dynamodb = boto3.client("dynamodb", endpoint_url=motoserver.url, region_name="us-east-1")
        table = f"ledger-{uuid.uuid4().hex[:8]}"
        create_ledger_table(dynamodb, table)
        settings = PipelineSettings(sources=(Location("src"),), destinations=(Location("dst"),))
        env = {
            **settings.worker_environment(),
            "FERRY_TABLE": table,
            "FERRY_REPORT_BUCKET": reports,
            "POWERTOOLS_SERVICE_NAME": "ferry",
            "POWERTOOLS_METRICS_NAMESPACE": "Ferry",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "AWS_XRAY_SDK_ENABLED": "false",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_S3": server.url,
            "AWS_ENDPOINT_URL_DYNAMODB": motoserver.url,
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        runtime.services.cache_clear()
        # No Lambda serves these tests: Prepare's read of the account's concurrency answers as
        # most accounts' would, rather than waiting out botocore's retries to an unreachable
        # endpoint before it falls back.
        monkeypatch.setattr(prepare, "account_concurrency", lambda: AccountConcurrency(1_000, 1_000))
        return reports, settings

    yield on
    runtime.services.cache_clear()


def listed_job(server: S3Server, reports: str, spec: dict[str, Any], name: str) -> tuple[dict, list]:
    """Prepare, then the ListVersions loop until the listing is done: (the job, as the Map
    gets it; the keys, as the Map reads them through the last run's manifest)."""
    from handlers import list_versions, prepare

    job = prepare.handler({"spec": spec, "execution_name": name}, FakeLambdaContext())
    assert "rejected" not in job, job
    assert job["reader"] == "versions"
    while not job["histories"]["done"]:
        job = list_versions.handler({"job": job}, FakeLambdaContext())
    manifest = job["histories"]["manifest"]
    items = list(history_items(JobReports(server.client, reports), manifest)) if manifest else []
    return job, items


def run_handlers(server: S3Server, reports: str, spec: dict[str, Any], name: str) -> tuple[dict, dict]:
    """Prepare, the ListVersions loop, then the Map's reading of the keys it listed (JSON
    Lines, two keys a batch), each batch's CopyBatch passes, then Finalize: (the job the Map
    got, Finalize's summary)."""
    from handlers import finalize

    job, keys = listed_job(server, reports, spec, name)
    batch_input = {"job": {"job_id": job["job_id"], "limits": {"large_object_concurrency": 1}}}
    for items in batches(keys, max_items=2, max_bytes=256 * 1024, batch_input=batch_input):
        result = copy_batch_pass({"Items": items, "BatchInput": batch_input}, FakeLambdaContext())
        assert not result["remaining"] and not result["large"], result
    return job, finalize.handler({"job": job}, FakeLambdaContext())


@pytest.mark.parametrize("server_name", SERVERS)
def test_the_pipeline_handlers_copy_every_history_from_prepares_manifest_and_a_rerun_only_the_new(
    request: pytest.FixtureRequest, handlers_on: Any, server_name: str
) -> None:
    server: S3Server = request.getfixturevalue(server_name)
    reports, _ = handlers_on(server)
    src, dst = versioned(server, "src"), versioned(server, "dst")
    write(server, src, EVENTS)

    job, summary = run_handlers(server, reports, job_spec(src, dst), "versions-1")

    # The ListVersions loop listed the keys with a history (p/b too, whose latest is a delete
    # marker) into JSON Lines the Map reads through a manifest, one item per key.
    listed = job["histories"]
    assert (listed["keys"], listed["versions"], listed["bytes"], listed["done"]) == (3, 7, 10, True)
    manifest = server.client.get_object(Bucket=reports, Key=listed["manifest"])["Body"].read().decode()
    (part,) = manifest.splitlines()  # an Athena data manifest: one S3 URI a line
    assert part.startswith(f"s3://{reports}/jobs/versions-1/histories/") and part.endswith(".jsonl")
    body = server.client.get_object(Bucket=reports, Key=part.split("/", 3)[3])["Body"].read().decode()
    assert [json.loads(line) for line in body.splitlines()] == [
        {"k": "p/a", "n": 4, "s": 6},
        {"k": "p/b", "n": 2, "s": 2},
        {"k": "p/c", "n": 1, "s": 2},
    ]
    assert (summary["status"], summary["copied"], summary["batches"]) == ("SUCCEEDED", 7, 2), summary
    assert_adds_up(summary, versions=7, keys=3)
    assert {key: history(server, dst, key) for key in EXPECTED} == EXPECTED
    rows = []
    for obj in server.client.list_objects_v2(Bucket=reports, Prefix="jobs/versions-1/objects/")["Contents"]:
        body = server.client.get_object(Bucket=reports, Key=obj["Key"])["Body"].read().decode()
        rows += [json.loads(line) for line in body.splitlines()]
    mapped = {r["source_version_id"]: r["version_id"] for r in rows if r["strategy"] != "delete-marker"}
    assert set(mapped) == version_ids(server, src, "p/") and set(mapped.values()) == version_ids(
        server, dst, "q/"
    )

    write(server, src, [("p/b", b"b2")])
    _, summary = run_handlers(server, reports, job_spec(src, dst), "versions-2")

    assert (summary["status"], summary["copied"], summary["skipped"]) == ("SUCCEEDED", 1, 7), summary
    assert_adds_up(summary, versions=8, keys=3)
    assert history(server, dst, "q/b") == ["b1", MARKER, "b2"]


def test_prepare_refuses_an_unversioned_destination_and_writes_no_manifest(
    minio: S3Server, handlers_on: Any
) -> None:
    from handlers import prepare

    reports, _ = handlers_on(minio)
    src, dst = versioned(minio, "src"), minio.bucket("dst")
    minio.client.put_object(Bucket=src, Key="p/k", Body=b"1")

    answer = prepare.handler({"spec": job_spec(src, dst), "execution_name": "refused"}, FakeLambdaContext())

    assert answer["rejected"].startswith(f"destination.bucket: bucket {dst!r} does not keep versions")
    assert minio.keys(reports) == [] and minio.keys(dst) == []


def test_a_retried_prepare_starts_the_same_listing_and_another_execution_is_refused(
    minio: S3Server, handlers_on: Any
) -> None:
    from handlers import prepare

    handlers_on(minio)
    src, dst = versioned(minio, "src"), versioned(minio, "dst")
    write(minio, src, [("p/a", b"1"), ("p/a", b"2")])
    event = {"spec": {**job_spec(src, dst), "job_id": "h"}, "execution_name": "h", "execution_arn": "arn:x:h"}

    first = prepare.handler(event, FakeLambdaContext())
    retried = prepare.handler(event, FakeLambdaContext())  # a Lambda service error, retried
    assert "rejected" not in retried and retried == first, retried
    assert (first["histories"]["runs"], first["histories"]["done"]) == (0, False)  # the loop lists
    other = prepare.handler({**event, "execution_arn": "arn:x:other"}, FakeLambdaContext())
    assert other["rejected"].startswith("job_id: a job 'h' already exists"), other


def test_keys_a_pass_hands_over_at_its_deadline_are_copied_whole_by_the_next_and_counted_once(
    minio: S3Server, handlers_on: Any
) -> None:
    """A first pass whose deadline has already come (less time left than the deadline margin)
    starts no key: it hands every key over, the child's next pass copies them, and the keys
    and versions add up once."""
    from ferry.pipeline.batches import HAND_OVER_FIELD, FerryHandOver
    from handlers import copy_batch, finalize

    reports, settings = handlers_on(minio)
    src, dst = versioned(minio, "src"), versioned(minio, "dst")
    write(minio, src, [("p/a", b"a1"), ("p/a", b"a2"), ("p/b", b"b1"), ("p/b", None)])
    job, items = listed_job(minio, reports, job_spec(src, dst), "handed")
    batch_input = {"job": {"job_id": "handed", "limits": {"large_object_concurrency": 1}}}
    short = FakeLambdaContext(remaining_ms=(settings.deadline_margin_seconds - 5) * 1000)

    with pytest.raises(FerryHandOver) as handed:  # the child's Catch takes it to ResumeHandOver
        copy_batch.handler({"Items": items, "BatchInput": batch_input}, short)
    error = {"Error": "FerryHandOver", "Cause": str(handed.value)}
    first = copy_batch.handler(
        {"Items": items, "BatchInput": batch_input, HAND_OVER_FIELD: error}, FakeLambdaContext()
    )
    assert first["remaining"] == items and first["counts"]["objects"] == 0
    assert history(minio, dst, "q/a") == []
    second = copy_batch_pass(
        {
            "job": first["job"],
            "items": first["remaining"],
            "pass": first["next_pass"],
            "batch_id": first["batch_id"],
            "counts": first["counts"],
        },
        FakeLambdaContext(),
    )
    assert not second["remaining"] and second["counts"]["copied"] == 4
    summary = finalize.handler({"job": job}, FakeLambdaContext())

    assert (summary["status"], summary["copied"]) == ("SUCCEEDED", 4), summary
    assert_adds_up(summary, versions=4, keys=2)
    assert history(minio, dst, "q/a") == ["a1", "a2"] and history(minio, dst, "q/b") == ["b1", MARKER]


def test_a_lost_batch_of_histories_records_each_key_no_pass_settled_as_one_failed_object(
    tmp_path: Path,
) -> None:
    """Finalize's record of a child that ended without recording its items: a key is settled
    by one pass with all its versions, or not at all, so the keys with any recorded version are
    left alone and each other key is one failed object (its versions were never read); the
    count check then adds up, in keys."""
    from ferry.jobspec import parse_job_spec
    from ferry.models import CopyResult, Status
    from ferry.pipeline.count_check import batches_recorded, check_map_run
    from ferry.pipeline.local_reports import LocalReports
    from ferry.pipeline.recording import batch_id_for, record, record_lost_batch
    from ferry.pipeline.services import Services

    spec = parse_job_spec({**job_spec("src", "dst"), "job_id": "lost-histories"})
    ledger = SQLiteLedger(tmp_path / "ledger.sqlite")
    ledger.create_job(spec.job_id, spec.to_dict())
    services = Services(
        s3=None, dynamodb=None, settings=None, ledger_store=ledger, report_store=LocalReports(tmp_path)
    )  # type: ignore[arg-type]
    items = [{"k": "p/a", "n": 2, "s": 4}, {"k": "p/b", "n": 1, "s": 2}]
    batch = batch_id_for(spec.job_id, items)
    versions = [
        CopyResult("p/a", "q/a", Status.COPIED, source_bucket="src", source_version_id=v, version_id=f"d{v}")
        for v in ("v1", "v2")
    ]
    record(services, spec.job_id, f"{batch}-p1", versions, handover={"remaining": [1]}, items=1)

    lost = record_lost_batch(services, spec, items, "the batch's child execution failed")

    assert lost is not None and (lost.counts.objects, lost.counts.failed) == (1, 1)
    assert [f.key for f in ledger.failures(spec.job_id)] == ["p/b"]
    assert record_lost_batch(services, spec, items, "again") is None  # idempotent
    tally = ledger.tally(spec.job_id)
    assert (tally.counts.objects, tally.items) == (3, 2)
    assert check_map_run(tally.items, batches_recorded(ledger, spec.job_id), None, noun="key").problems == []


@pytest.mark.parametrize("server_name", SERVERS)
def test_ferry_run_copies_versions_in_parts_and_leaves_only_the_sources_keys(
    request: pytest.FixtureRequest, tmp_path: Path, server_name: str
) -> None:
    """Versions copied in parts are marked while they upload: the marks go by their version
    ids, so the destination's history holds the source's keys and nothing under the marks
    prefix (each plain delete of a mark used to leave its version and a delete marker)."""
    server: S3Server = request.getfixturevalue(server_name)
    src, dst = versioned(server, "src"), versioned(server, "dst")
    part = 5 * 1024 * 1024
    for n in range(2):
        put_in_parts(server.client, src, "p/big", bytes([n]) * (2 * part + n + 1), part)
    write(server, src, [("p/small", b"s")])
    options = {"mode": "stream", "part_size": "5MiB", "multipart_threshold": "5MiB"}
    spec = spec_file(tmp_path, job_spec(src, dst, **options))
    common = [
        "--endpoint-url",
        server.url,
        "--ledger",
        str(tmp_path / "l.sqlite"),
        "--report-dir",
        str(tmp_path),
    ]

    run = ferry("run", spec, *common, "--json")

    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert (summary["status"], summary["copied"]) == ("SUCCEEDED", 3), summary
    answer = server.client.list_object_versions(Bucket=dst)
    assert sorted(v["Key"] for v in answer.get("Versions", [])) == ["q/big", "q/big", "q/small"]
    assert answer.get("DeleteMarkers", []) == []
    assert ferrys_history(server, dst) == []
