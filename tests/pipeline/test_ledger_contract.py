"""The ledger's contract (ferry.pipeline.ledger.contract.Ledger), run over both implementations: the
DynamoDB table (moto in-process) and the SQLite file `ferry run` keeps by default. Whatever
keeps it, a job id is used once, a batch pass counts once however many attempts record it,
the tally is the sum of what counted, a failed object is one item, and checkpoints survive."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from conftest import create_ledger_table
from ferry.engine.records.checkpoints import Checkpoint
from ferry.pipeline.ledger.contract import BatchCounts, Failure, JobExists, Ledger
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from ferry.pipeline.ledger.sqlite import SQLiteLedger

SPEC = {"source": {"bucket": "src", "prefix": "a/"}, "destination": {"bucket": "dst", "prefix": ""}}


@pytest.fixture(params=["sqlite", "dynamodb"])
def ledger(
    request: pytest.FixtureRequest, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Ledger]:
    if request.param == "sqlite":
        store = SQLiteLedger(tmp_path / "ledger.sqlite")
        yield store
        store.close()
        return
    from moto import mock_aws

    from conftest import _atomic_moto_dynamodb

    _atomic_moto_dynamodb(monkeypatch)  # DynamoDB's conditional writes are atomic; moto's need a lock
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_ledger_table(client, "ledger")
        yield DynamoLedger(client, "ledger")


def counts(
    copied: int = 0, skipped: int = 0, failed: int = 0, pending: int = 0, size: int = 0
) -> BatchCounts:
    return BatchCounts(copied=copied, skipped=skipped, failed=failed, pending=pending, bytes_copied=size)


def test_a_job_id_is_used_once_and_reads_back_its_spec(ledger: Ledger) -> None:
    ledger.create_job("j1", SPEC)
    with pytest.raises(JobExists, match="j1"):
        ledger.create_job("j1", SPEC)
    job = ledger.job("j1")
    assert job is not None
    assert job["status"] == "RUNNING" and job["spec"] == SPEC and job["started_at"]
    assert ledger.job("other") is None


def test_the_execution_that_created_a_job_may_create_it_again_and_no_other_may(ledger: Ledger) -> None:
    """Step Functions retries Prepare after a Lambda service error, which may come after the
    function ran: the job it created is that execution's own, not a job id taken twice."""
    arn = "arn:aws:states:us-east-1:111122223333:execution:Ferry:j1"
    ledger.create_job("j1", SPEC, execution_arn=arn)
    started = ledger.job("j1")["started_at"]  # type: ignore[index]
    ledger.create_job("j1", SPEC, execution_arn=arn)  # the retry
    assert ledger.job("j1")["started_at"] == started  # type: ignore[index]
    with pytest.raises(JobExists, match="j1"):
        ledger.create_job("j1", SPEC, execution_arn=arn + "-other")
    with pytest.raises(JobExists, match="j1"):
        ledger.create_job("j1", SPEC)  # no execution: never the same one


def test_a_batch_pass_counts_once_and_later_attempts_get_the_first_ones_hand_over(ledger: Ledger) -> None:
    ledger.create_job("j1", SPEC)
    first = ledger.record_batch(
        "j1",
        "b1-p1",
        counts(copied=2, size=10),
        attempt="a",
        report_key="r/a",
        handover={"remaining": [3, 4]},
    )
    again = ledger.record_batch(
        "j1", "b1-p1", counts(copied=5, size=99), attempt="b", report_key="r/b", handover={"remaining": [0]}
    )
    assert first.first and not again.first
    assert again.counts.to_dict() == counts(copied=2, size=10).to_dict()
    assert again.report_key == "r/a" and again.handover == {"remaining": [3, 4]}
    marker = ledger.batch("j1", "b1-p1")
    assert marker is not None and marker["attempt"] == "a" and marker["report_key"] == "r/a"


def test_a_markers_stats_for_the_html_report_are_kept_once_with_it(ledger: Ledger) -> None:
    ledger.create_job("j1", SPEC)
    stats = {"sizes": {"10": 2}, "strategies": {"server-side": 2}}
    ledger.record_batch("j1", "b1-p1", counts(copied=2), attempt="a", report_key=None, stats=stats)
    ledger.record_batch(
        "j1", "b1-p1", counts(copied=2), attempt="b", report_key=None, stats={"sizes": {"99": 1}}
    )
    ledger.record_batch("j1", "b2-p1", counts(skipped=1), attempt="a", report_key=None)
    markers = {m["sk"]: m for m in ledger.batches("j1")}
    assert markers["BATCH#b1-p1"]["batch_stats"] == stats
    assert "batch_stats" not in markers["BATCH#b2-p1"]
    assert markers["BATCH#b1-p1"]["recorded_at"]


def test_the_tally_sums_the_markers_and_batches_filter_by_prefix_in_key_order(ledger: Ledger) -> None:
    ledger.create_job("j1", SPEC)
    ledger.record_batch("j1", "b2-p1", counts(copied=1, size=7), attempt="a", report_key=None)
    ledger.record_batch("j1", "b1-p2", counts(skipped=3), attempt="a", report_key=None)
    ledger.record_batch("j1", "b1-p1", counts(failed=1, pending=2), attempt="a", report_key=None)
    ledger.create_job("j2", SPEC)
    ledger.record_batch("j2", "b1-p1", counts(copied=100), attempt="a", report_key=None)
    tally = ledger.tally("j1")
    assert tally.batches == 3
    assert tally.to_dict() == {
        "objects": 7,
        "copied": 1,
        "skipped": 3,
        "failed": 1,
        "pending": 2,
        "bytes_copied": 7,
        "batches": 3,
    }
    assert [m["attempt"] for m in ledger.batches("j1", "b1-")] == ["a", "a"]
    assert [m["counts"]["skipped"] for m in ledger.batches("j1", "b1-")] == [0, 3]  # p1 before p2


def test_items_settled_apart_from_objects_are_kept_and_summed_and_default_to_the_objects(
    ledger: Ledger,
) -> None:
    """An all_versions pass settles keys (the Map's items) holding several versions (objects):
    the marker keeps both, and the tally sums the items, one per object where none is given."""
    ledger.create_job("j1", SPEC)
    histories = counts(copied=5, skipped=2)
    histories.items = 3
    first = ledger.record_batch("j1", "b1-p1", histories, attempt="a", report_key=None)
    again = ledger.record_batch("j1", "b1-p1", counts(copied=1), attempt="b", report_key=None)
    ledger.record_batch("j1", "b2-p1", counts(failed=2), attempt="a", report_key=None)
    assert first.counts.items == again.counts.items == 3 and again.counts.objects == 7
    tally = ledger.tally("j1")
    assert (tally.counts.objects, tally.items) == (9, 5)
    assert "items" not in tally.to_dict()  # the job's totals stay its objects' counts


def test_failures_are_one_item_per_object_and_the_marker_says_when_they_are_written(ledger: Ledger) -> None:
    ledger.create_job("j1", SPEC)
    ledger.record_batch("j1", "b1-p1", counts(failed=2), attempt="a", report_key=None)
    assert ledger.batch("j1", "b1-p1")["failures_recorded"] is False  # type: ignore[index]
    failures = [
        Failure("src", "a/x", "x", "AccessDenied on s3:GetObject", batch="b1-p1"),
        Failure("src", "a/y", "y", "NoSuchKey", version_id="v1", batch="b1-p1"),
    ]
    ledger.put_failures("j1", failures)
    ledger.put_failures("j1", failures[:1])  # a retried write changes nothing
    ledger.failures_recorded("j1", "b1-p1")
    assert ledger.batch("j1", "b1-p1")["failures_recorded"] is True  # type: ignore[index]
    assert sorted(f.to_dict()["key"] for f in ledger.failures("j1")) == ["a/x", "a/y"]
    assert {f.key: f.reason for f in ledger.failures("j1")} == {
        "a/x": "AccessDenied on s3:GetObject",
        "a/y": "NoSuchKey",
    }
    assert list(ledger.failures("other")) == []


def test_failures_of_one_object_handed_over_together_are_one_item_the_last_kept(ledger: Ledger) -> None:
    """A manifest naming a key twice hands over two failures of one object in one call (and
    DynamoDB's BatchWriteItem refuses one item twice in a call): 26 of one key, across the
    25-request chunks, and two of another with different reasons. Each object is one item."""
    same = [Failure("src", "a/x", "x", "NoSuchKey", batch="b1") for _ in range(26)]
    other = [Failure("src", "a/y", "y", "first reason"), Failure("src", "a/y", "y", "last reason")]

    ledger.put_failures("job-1", [*same, *other])

    recorded = sorted(ledger.failures("job-1"), key=lambda f: f.key)
    assert [(f.key, f.reason) for f in recorded] == [("a/x", "NoSuchKey"), ("a/y", "last reason")]


def test_finish_job_stores_status_report_and_totals(ledger: Ledger) -> None:
    ledger.create_job("j1", SPEC)
    ledger.record_batch("j1", "b1-p1", counts(copied=2, failed=1, size=5), attempt="a", report_key=None)
    ledger.finish_job("j1", "PARTIAL", {"status": "PARTIAL"}, ledger.tally("j1"))
    job = ledger.job("j1")
    assert job is not None
    assert job["status"] == "PARTIAL" and job["finished_at"]
    assert (job["objects"], job["copied"], job["failed"], job["bytes_copied"], job["batches"]) == (
        3,
        2,
        1,
        5,
        1,
    )


def test_an_unfinished_job_is_marked_interrupted_and_running_again_but_a_finished_one_never(
    ledger: Ledger,
) -> None:
    ledger.create_job("j1", SPEC)
    assert ledger.mark_job("j1", "INTERRUPTED") is True
    assert ledger.job("j1")["status"] == "INTERRUPTED"  # type: ignore[index]
    assert ledger.mark_job("j1", "RUNNING") is True
    ledger.finish_job("j1", "SUCCEEDED", {"status": "SUCCEEDED"}, ledger.tally("j1"))
    assert ledger.mark_job("j1", "INTERRUPTED") is False
    assert ledger.job("j1")["status"] == "SUCCEEDED"  # type: ignore[index]
    assert ledger.mark_job("missing", "INTERRUPTED") is False
    assert ledger.job("missing") is None


def test_checkpoints_are_saved_loaded_replaced_and_deleted(ledger: Ledger) -> None:
    store = ledger.checkpoints(ttl_days=1)
    checkpoint = Checkpoint("c1", "upload-1", "stream", "etag", 100, "CRC32C", [(0, 50), (50, 100)])
    assert store.load("c1") is None
    store.save(checkpoint)
    checkpoint.parts[1] = {"ETag": "p1", "ChecksumCRC32C": "AAAA"}
    store.save(checkpoint)
    loaded = store.load("c1")
    assert loaded is not None and loaded.parts == {1: {"ETag": "p1", "ChecksumCRC32C": "AAAA"}}
    assert loaded.part_bounds == [(0, 50), (50, 100)]
    store.delete("c1")
    assert store.load("c1") is None


def test_racing_attempts_of_one_pass_record_it_exactly_once(ledger: Ledger) -> None:
    ledger.create_job("j1", SPEC)
    results = []
    start = threading.Barrier(8)

    def attempt(n: int) -> None:
        start.wait()
        results.append(
            ledger.record_batch("j1", "b1-p1", counts(copied=n + 1), attempt=str(n), report_key=None)
        )

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(r.first for r in results) == 1
    winner = next(r for r in results if r.first)
    assert all(r.counts.copied == winner.counts.copied for r in results)
    assert ledger.tally("j1").counts.copied == winner.counts.copied


# -- checkpoints at S3's limits: 10,000 parts (a 5 TiB object needs parts of at least 525 MiB) --

MAX_PARTS = 10_000


def _full_checkpoint(copy_id: str, upload_id: str, sizes: list[int], algorithm: str = "SHA256") -> Checkpoint:
    """A checkpoint of every part done, each with the longest record a part can have: an ETag,
    an MD5 apart from it (an SSE-KMS destination's ETag is not one) and a SHA-256 checksum."""
    bounds, start = [], 0
    for size in sizes:
        bounds.append((start, start + size))
        start += size
    parts = {
        n: {
            "etag": f'"{n:032x}"',
            "size": size,
            "checksums": {algorithm: "x" * 43 + "="},
            "md5": f"{n + 7:032x}",
        }
        for n, size in enumerate(sizes, start=1)
    }
    return Checkpoint(copy_id, upload_id, "stream", "e" * 32 + "-10000", start, algorithm, bounds, parts)


def test_a_checkpoint_of_10000_parts_is_saved_and_loaded_whole(ledger: Ledger) -> None:
    """A 5 TiB object in S3's 10,000 parts: DynamoDB refuses an item over 400 KB (moto too),
    and 10,000 part records take about 2 MB."""
    part = 549_755_814  # 5 TiB / 10,000, rounded up
    sizes = [part] * (MAX_PARTS - 1) + [5 * 1024**4 - part * (MAX_PARTS - 1)]
    store = ledger.checkpoints(ttl_days=1)
    checkpoint = _full_checkpoint("c-5tib", "upload-1", sizes)
    store.save(checkpoint)
    loaded = store.load("c-5tib")
    assert loaded == checkpoint
    store.delete("c-5tib")
    assert store.load("c-5tib") is None


def test_a_checkpoint_of_10000_parts_of_10000_sizes_is_saved(ledger: Ledger) -> None:
    """A reproduced source layout may have a different size for every part."""
    sizes = [5 * 1024**2 + 7 * n for n in range(MAX_PARTS)]
    store = ledger.checkpoints(ttl_days=1)
    checkpoint = _full_checkpoint("c-sizes", "upload-1", sizes)
    store.save(checkpoint)
    assert store.load("c-sizes") == checkpoint


def test_a_checkpoint_grows_pass_by_pass_and_a_new_upload_never_inherits_old_parts(ledger: Ledger) -> None:
    """Parts are saved as they land over many passes; a checkpoint of another upload of the
    same copy (the first was discarded) holds only its own parts, never the old upload's."""
    sizes = [5 * 1024**2] * MAX_PARTS
    store = ledger.checkpoints(ttl_days=1)
    full = _full_checkpoint("c-grow", "upload-1", sizes)
    growing = Checkpoint(**{**full.__dict__, "parts": {}})
    for done in (1, 999, 1000, 1001, 4321, MAX_PARTS):
        growing.parts = {n: full.parts[n] for n in range(1, done + 1)}
        store.save(growing)
        assert store.load("c-grow") == growing
    fresh = Checkpoint(**{**full.__dict__, "upload_id": "upload-2", "parts": {1: full.parts[1]}})
    store.save(fresh)
    assert store.load("c-grow") == fresh


def test_a_checkpoint_saved_whole_before_checkpoints_were_split_still_resumes(monkeypatch) -> None:
    """A copy checkpointed by the previous release (one item, `data`) and resumed by this one:
    the checkpoint loads as it was saved, and its next save is in the split form."""
    import json

    from moto import mock_aws

    from ferry.pipeline.ledger.dynamodb_checkpoints import DynamoCheckpointStore

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_ledger_table(client, "ledger")
        old = _full_checkpoint("c-old", "upload-1", [5 * 1024**2] * 3)
        client.put_item(
            TableName="ledger",
            Item={"pk": {"S": "CKPT#c-old"}, "sk": {"S": "CKPT"}, "data": {"S": json.dumps(old.to_dict())}},
        )
        store = DynamoCheckpointStore(client, "ledger")
        assert store.load("c-old") == old
        store.save(old)
        head = client.get_item(TableName="ledger", Key={"pk": {"S": "CKPT#c-old"}, "sk": {"S": "CKPT"}})[
            "Item"
        ]
        assert "data" not in head and "head" in head
        assert store.load("c-old") == old
