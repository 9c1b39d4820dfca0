"""An all_versions job whose source takes longer to list than one Lambda run: the ListVersions
loop (functions/ferry/pipeline/history_keys.py) lists it run after run, each run from where
the last stopped, and every key's history reaches the Map once, whole, whatever page or run
its versions were listed in.

The source holds real numbers of versions (ListObjectVersions pages at 1,000: keys the jobs
exclude fill the pages, and the copied keys' versions straddle the page boundaries), and the
runs' deadlines are on a virtual clock that only the listing's pages advance, so each run
lists exactly the pages a test gives it (listing_support.py). The parent state machine
running the loop is in test_parent_workflow.py.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from listing_support import (
    VirtualClock,
    assert_items_are_the_histories,
    atomic_moto_s3,
    dest_history,
    fill_source,
    install_clock,
    map_items,
    pages_context,
    put_filler,
    run_listing,
    spec,
    versioned_pair,
)

from conftest import PIPELINE_REPORTS, FakeLambdaContext, copy_batch_pass
from ferry.pipeline import history_keys
from ferry.pipeline.history_keys import MAX_LISTING_RUNS, VersionListing, part_keys
from ferry.pipeline.item_reader import batches
from ferry.pipeline.job_reports import JobReports

STATEMACHINE = Path(__file__).resolve().parents[2] / "statemachine"
HISTORY_EVENTS = 25_000  # a STANDARD execution's history holds at most this many events


@pytest.fixture
def clock(pipeline: Any, monkeypatch: pytest.MonkeyPatch) -> VirtualClock:
    atomic_moto_s3(monkeypatch)
    return install_clock(pipeline, monkeypatch)


def prepared(pipeline: Any, job_id: str) -> dict[str, Any]:
    """Prepare, given the time of one listing page as every run here is: it checks the job
    (versioning, access) and leaves the listing to the loop, so it is never short of time."""
    from handlers import prepare

    job = prepare.handler({"spec": spec(job_id), "execution_name": job_id}, pages_context(pipeline))
    assert "rejected" not in job, job
    return job


def test_a_listing_longer_than_one_run_goes_on_run_after_run_and_every_history_is_copied_whole_once(
    pipeline: Any, clock: VirtualClock
) -> None:
    from handlers import finalize

    s3 = pipeline.s3
    histories = fill_source(s3)
    versions = sum(len(v) for v in histories.values())

    job = prepared(pipeline, "long-listing")
    assert VersionListing.from_dict(job["histories"]) == VersionListing()  # Prepare checks; the loop lists
    job, runs = run_listing(job, pages_context(pipeline))

    # 2,006 versions and delete markers: pages of 1,000, 1,000 and 6, one a run.
    assert len(runs) == 3 and clock.pages == 3, runs
    # p/m's versions span pages 1 and 2, p/t's pages 2 and 3: each carried to the next run,
    # counted as it goes, and written once, whole, by the run that lists its last version.
    assert [(r.pending or {}).get("k") for r in runs] == ["p/m", "p/t", None]
    assert (runs[0].pending["n"], runs[1].pending["n"]) == (1, 11)
    assert [r.keys for r in runs] == [2, 3, 6]
    assert (runs[-1].versions, runs[-1].done) == (versions, True)
    items = map_items(s3, job["histories"]["manifest"])
    assert_items_are_the_histories(items, histories)
    assert len(part_keys(JobReports(s3, PIPELINE_REPORTS), job["histories"]["manifest"])) == 3

    batch_input = {"job": {"job_id": "long-listing", "limits": {"large_object_concurrency": 1}}}
    for chunk in batches(items, max_items=4, max_bytes=256 * 1024, batch_input=batch_input):
        result = copy_batch_pass({"Items": chunk, "BatchInput": batch_input}, FakeLambdaContext())
        assert not result["remaining"] and not result["large"], result
    summary = finalize.handler({"job": job}, FakeLambdaContext())

    assert (summary["status"], summary["copied"], summary["objects"]) == ("SUCCEEDED", versions, versions), (
        summary
    )
    assert summary["keys"] == summary["objects_read_by_map"] == len(histories), summary
    for key, history in histories.items():
        assert dest_history(s3, "q/" + key[2:]) == history, key
    assert dest_history(s3, "q/f/0000") == [] and dest_history(s3, "q/s/0977") == []


def test_a_key_whose_versions_span_three_runs_is_one_item_with_every_version(
    pipeline: Any, clock: VirtualClock
) -> None:
    """1,200 versions of p/g after 900 filler keys: 100 on page 1, 1,000 on page 2 (a run
    that ends no key writes no part), 100 on page 3."""
    s3 = pipeline.s3
    versioned_pair(s3)
    put_filler([f"p/f/{n:04}" for n in range(900)])
    put_filler(["p/g"] * 1_200)
    s3.put_object(Bucket="src", Key="p/z/0", Body=b"z")

    job, runs = run_listing(prepared(pipeline, "big-key"), pages_context(pipeline))

    assert len(runs) == 3 and clock.pages == 3, runs
    assert [(r.pending or {}).get("n") for r in runs] == [100, 1_100, None]
    assert map_items(s3, job["histories"]["manifest"]) == [
        {"k": "p/g", "n": 1_200, "s": 1_200},
        {"k": "p/z/0", "n": 1, "s": 1},
    ]
    assert len(part_keys(JobReports(s3, PIPELINE_REPORTS), job["histories"]["manifest"])) == 1


def test_a_retried_run_writes_beside_the_first_attempt_and_only_the_attempt_taken_is_read(
    pipeline: Any, clock: VirtualClock
) -> None:
    """Step Functions retries a run after a Lambda service error, which may come after the
    function ran, or while it still runs: every attempt of a run starts from the same state,
    and whichever attempt's result the state machine takes, the Map reads each key once."""
    from handlers import list_versions

    s3 = pipeline.s3
    histories = fill_source(s3)
    short = pages_context(pipeline)
    event = json.loads(json.dumps({"job": prepared(pipeline, "retried")}))

    # Run 1: an attempt whose answer is lost after it wrote its part and manifest; one that
    # was given three pages' time (it still runs while the retry does) and so lists to the
    # end; then the retry, whose answer the state machine takes.
    lost = list_versions.handler(event, short)["histories"]
    longer = list_versions.handler(event, pages_context(pipeline, 3))["histories"]
    assert lost["manifest"] and (lost["keys"], lost["done"]) == (2, False)
    assert (longer["keys"], longer["done"]) == (len(histories), True)
    taken = list_versions.handler(event, short)
    job, _ = run_listing(taken, short)

    items = map_items(s3, job["histories"]["manifest"])
    assert_items_are_the_histories(items, histories)
    assert [k for k, n in Counter(i["k"] for i in items).items() if n > 1] == []
    # The attempts not taken left their files beside: none of them is read.
    written = s3.list_objects_v2(Bucket=PIPELINE_REPORTS, Prefix="jobs/retried/histories/")["Contents"]
    parts = {o["Key"] for o in written if o["Key"].endswith(".jsonl")}
    read = set(part_keys(JobReports(s3, PIPELINE_REPORTS), job["histories"]["manifest"]))
    assert read < parts and len(parts - read) == 2


def test_a_run_that_fails_while_writing_its_part_is_retried_from_the_same_state(
    pipeline: Any, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that dies mid-way (its part's upload broken off) has moved nothing on: the retry
    of the same input lists the same pages again, and no key is lost or doubled."""
    from handlers import list_versions

    s3 = pipeline.s3
    histories = fill_source(s3)
    short = pages_context(pipeline)
    first = list_versions.handler({"job": prepared(pipeline, "torn")}, short)
    real_put = JobReports.put_jsonl

    def torn(self: JobReports, key: str, values: Any) -> None:
        for n, _ in enumerate(values):
            if n == 2:
                raise ConnectionError("the connection broke mid-part")

    monkeypatch.setattr(JobReports, "put_jsonl", torn)
    with pytest.raises(ConnectionError):
        list_versions.handler({"job": first}, pages_context(pipeline, 3))
    monkeypatch.setattr(JobReports, "put_jsonl", real_put)
    job, _ = run_listing(first, short)

    assert_items_are_the_histories(map_items(s3, job["histories"]["manifest"]), histories)


def test_the_listing_loop_cannot_outgrow_the_executions_history() -> None:
    """ListVersions' runs, each retried as its Retry allows, stay within a STANDARD
    execution's 25,000 history events with room for every other state of the parent."""
    parent = json.loads((STATEMACHINE / "ferry.asl.json").read_text())["States"]
    task, choice = parent["ListVersions"], parent["AllVersionsListed"]
    assert task["Next"] == "AllVersionsListed"
    assert {c["Next"] for c in choice["Choices"]} | {choice["Default"]} == {
        "ListVersions",
        "Finalize",
        "CopyVersionHistories",
    }
    # A Task: entered, scheduled, started, submitted, succeeded, exited; a Choice: entered,
    # exited. Each retried attempt: scheduled, started, submitted, failed.
    attempts = 1 + sum(rule["MaxAttempts"] for rule in task.get("Retry", []))
    worst_run = 6 + 2 + 4 * (attempts - 1)
    # Every other state once, generously: a Task retried to the end, a Map's run events.
    rest = sum(
        5 + 3 * 10 if state["Type"] == "Task" else 10
        for name, state in parent.items()
        if name != "ListVersions"
    )
    assert MAX_LISTING_RUNS * worst_run + rest <= HISTORY_EVENTS, (MAX_LISTING_RUNS, worst_run, rest)


def test_a_listing_that_needs_more_runs_than_the_limit_fails_the_job_with_the_reason(
    pipeline: Any, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from handlers import finalize, list_versions

    fill_source(pipeline.s3)
    monkeypatch.setattr(history_keys, "MAX_LISTING_RUNS", 2)
    short = pages_context(pipeline)
    job = list_versions.handler({"job": prepared(pipeline, "too-long")}, short)
    job = list_versions.handler({"job": job}, short)

    with pytest.raises(history_keys.ListingTooLong) as refused:
        list_versions.handler({"job": job}, short)
    assert "took 2 runs of 15 minutes" in str(refused.value) and "narrower source.prefix" in str(
        refused.value
    )
    error = {"Error": "ListingTooLong", "Cause": json.dumps({"errorMessage": str(refused.value)})}
    summary = finalize.handler({"job": job, "listing_error": error}, FakeLambdaContext())

    assert (summary["status"], summary["objects"], summary["copied"]) == ("FAILED", 0, 0), summary
    assert summary["cause"].startswith(
        "listing the source's versions stopped: ListingTooLong: options.all_versions:"
    )
    assert summary["listing_error"]["error"] == "ListingTooLong"
    assert pipeline.s3.list_object_versions(Bucket="dst").get("Versions", []) == []


def test_ferry_run_lists_in_the_same_runs_and_copies_every_history_whole(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`ferry run` runs the same loop on one machine, each run as long as a pass
    (`pass_seconds`: here half of what a listing page is deemed to take, and time enough for
    the copy passes, which the virtual clock does not advance), and reads the keys through the
    last run's manifest."""
    from ferry.pipeline.ledger.sqlite import SQLiteLedger
    from ferry.pipeline.local_reports import LocalReports
    from ferry.pipeline.local_run import local_settings, run_job
    from ferry.pipeline.services import Services

    atomic_moto_s3(monkeypatch)
    clock = install_clock(pipeline, monkeypatch, page_seconds=600)
    s3 = pipeline.services().s3  # the client the virtual clock watches
    histories = fill_source(s3)
    versions = sum(len(v) for v in histories.values())
    reports = LocalReports(tmp_path / "reports")
    services = Services(
        s3=s3,
        dynamodb=None,
        settings=local_settings(memory_limit=256 * 1024 * 1024),
        ledger_store=SQLiteLedger(tmp_path / "ledger.sqlite"),
        report_store=reports,
        reads_any_region=True,
    )

    summary = run_job(spec("local-listing"), services, pass_seconds=300)

    assert (summary["status"], summary["copied"], summary["objects"]) == ("SUCCEEDED", versions, versions), (
        summary
    )
    assert summary["keys"] == summary["objects_read_by_map"] == len(histories)
    assert clock.pages == 3
    listed = VersionListing.from_dict(json.loads(reports.text("jobs/local-listing/histories/listed.json")))
    assert (listed.runs, listed.keys, listed.done) == (3, len(histories), True)
    assert len(part_keys(reports, listed.manifest)) == 3
    for key, history in histories.items():
        assert dest_history(pipeline.s3, "q/" + key[2:]) == history, key
