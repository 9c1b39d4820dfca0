"""Finalize's count check on its own numbers: the ledger's batches against DescribeMapRun's
counts, under both readings of `itemCounts` and neither."""

from __future__ import annotations

import pytest

from ferry.pipeline.count_check import (
    BatchesRecorded,
    MapRunCounts,
    batches_recorded,
    check_map_run,
    given_to_batch,
)
from ferry.pipeline.ledger.contract import BatchCounts
from ferry.pipeline.ledger.sqlite import SQLiteLedger

ALL_RECORDED = BatchesRecorded(batches=6, objects_given=205)


@pytest.mark.parametrize("item_counts_total", [205, 6])  # objects, or batches
def test_every_object_accounted_for_passes_under_either_reading(item_counts_total: int) -> None:
    check = check_map_run(205, ALL_RECORDED, MapRunCounts(item_counts_total, 6))

    assert check.problems == []
    assert check.objects_read == 205
    assert check.details and check.details["item_counts_read_as"] == (
        "items" if item_counts_total == 205 else "batches"
    )


def test_an_itemcounts_of_neither_reading_fails_and_names_both() -> None:
    check = check_map_run(205, ALL_RECORDED, MapRunCounts(41, 6))

    assert check.problems == [
        "the counts do not add up: DescribeMapRun itemCounts.total is 41, neither the 205 objects the "
        "ledger accounts for (itemCounts counting objects, as the API reference reads) nor the 6 child "
        "executions (itemCounts counting batches)"
    ]


def test_without_describemaprun_the_ledgers_own_count_still_applies() -> None:
    check = check_map_run(165, ALL_RECORDED, None)

    assert check.problems == [
        "the counts do not add up: the ledger's batches were given 205 objects but account for 165"
    ]


def test_a_batch_is_counted_from_its_first_pass_and_a_lost_one_from_its_loss(tmp_path) -> None:
    ledger = SQLiteLedger(tmp_path / "ledger.db")
    ledger.create_job("j", {})

    def record(key: str, copied: int, **handover: list[int]) -> None:
        ledger.record_batch(
            "j", key, BatchCounts(copied=copied), attempt="a", report_key=None, handover=handover
        )

    record("aaa-p1", 3, remaining=[3, 4], large=[5])  # six objects, three handed on
    record("aaa-p2", 2)
    record("aaa-large-0f", 1)
    record("bbb-p1", 4)
    record("ccc-lost", 7)  # a child that recorded nothing itself

    assert given_to_batch({"counts": {"copied": 3}, "handover": {"remaining": [3, 4], "large": [5]}}) == 6
    assert batches_recorded(ledger, "j") == BatchesRecorded(batches=3, objects_given=6 + 4 + 7)
