"""Distributed Map items, in the shapes the readers give them, become the objects to copy.

The listObjectsV2 reader gives each child `{"Etag": "\\"<md5>\\"", "Key": ..., "LastModified":
1668699881, "Size": 34910, "StorageClass": "STANDARD"}`: `Etag` spelled so, with its quotes,
LastModified in epoch seconds (Step Functions developer guide, input-output-itemreader.html).
An S3 Inventory row (MANIFEST reader) has every value a string, `LastModifiedDate` in ISO 8601.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from typing import Any

import pytest

from ferry.jobspec import parse_job_spec
from ferry.pipeline.items import field_name, plan_item

LISTING_SPEC = parse_job_spec(
    {"job_id": "j", "source": {"bucket": "src", "prefix": "data"}, "destination": {"bucket": "dst"}}
)
INVENTORY_SPEC = parse_job_spec(
    {
        "job_id": "j",
        "source": {"manifest": {"bucket": "inv", "key": "x/manifest.json", "format": "inventory"}},
        "destination": {"bucket": "dst"},
    }
)
MOMENT = dt.datetime(2022, 11, 17, 15, 44, 41, tzinfo=dt.UTC)  # 1668699881


def test_a_listing_item_in_aws_shape_keeps_size_etag_and_epoch_seconds() -> None:
    item = {
        "Etag": '"05704fbdccb224cb01c59005bebbad28"',
        "Key": "data/images/n02085620_1073.jpg",
        "LastModified": 1668699881,
        "Size": 34910,
        "StorageClass": "STANDARD",
    }
    obj = plan_item(item, LISTING_SPEC).obj
    assert obj is not None
    assert (obj.size, obj.etag, obj.storage_class) == (34910, "05704fbdccb224cb01c59005bebbad28", "STANDARD")
    assert obj.last_modified == MOMENT


@pytest.mark.parametrize(
    "value",
    [1668699881, 1668699881.0, "1668699881", "2022-11-17T15:44:41.000Z", "2022-11-17T15:44:41+00:00"],
)
def test_last_modified_is_read_from_epoch_seconds_or_iso_text(value) -> None:
    obj = plan_item({"Key": "data/a", "Size": "5", "ETag": "abc", "LastModified": value}, LISTING_SPEC).obj
    assert obj is not None and obj.last_modified == MOMENT


def test_an_iso_time_without_zone_is_utc_so_it_compares_with_s3_times() -> None:
    obj = plan_item({"Key": "data/a", "LastModified": "2022-11-17T15:44:41"}, LISTING_SPEC).obj
    assert obj is not None and obj.last_modified == MOMENT


@pytest.mark.parametrize("value", ["", "yesterday", None, True, [], "12:00"])
def test_an_unreadable_time_is_unknown_not_an_error(value) -> None:
    obj = plan_item({"Key": "data/a", "LastModified": value}, LISTING_SPEC).obj
    assert obj is not None and obj.last_modified is None


def test_an_inventory_row_gives_strings_for_size_and_time() -> None:
    row = {
        "Bucket": "src",
        "Key": "data/a%20b.txt",
        "Size": "3399671",
        "LastModifiedDate": "2022-11-17T15:44:41.000Z",
        "ETag": "05704fbdccb224cb01c59005bebbad28",
        "StorageClass": "STANDARD",
    }
    obj = plan_item(row, INVENTORY_SPEC).obj
    assert obj is not None
    assert (obj.key, obj.size, obj.etag, obj.last_modified) == (
        "data/a b.txt",
        3399671,
        "05704fbdccb224cb01c59005bebbad28",
        MOMENT,
    )


CSV_SPEC = parse_job_spec(
    {
        "job_id": "j",
        "source": {"bucket": "src", "manifest": {"bucket": "lists", "key": "list.csv", "format": "csv"}},
        "destination": {"bucket": "dst"},
        "options": {"exclude": ["*.tmp"]},
    }
)


def _normalisations(plan: Callable[[], object]) -> int:
    """How many times `plan` put a column name into Ferry's form (items.field_name's code ran)."""
    code, calls = field_name.__code__, 0

    def count(frame: Any, event: str, _arg: Any) -> None:
        nonlocal calls
        if event == "call" and frame.f_code is code:
            calls += 1

    sys.setprofile(count)
    try:
        plan()
    finally:
        sys.setprofile(None)
    return calls


def test_each_column_name_of_a_batch_is_put_in_form_at_most_once_per_row() -> None:
    """A CopyBatch pass plans every row of its batch, thousands, and a job of a million rows
    plans a million: the name of each column is matched without case or `_` (field_name), but
    that must not be paid again for every field plan_item looks for. It was: 23 times a row of
    two columns, two thirds of a pass's CPU over a batch of rows skipped by options.exclude
    (tests/pipeline/test_map_million.py)."""
    rows = [{"key": f"data/{n:07d}.tmp", "size": "512"} for n in range(1_000)]

    calls = _normalisations(lambda: [plan_item(row, CSV_SPEC) for row in rows])

    assert calls <= 2 * len(rows), f"{calls} normalisations for {len(rows)} rows of 2 columns"
    planned = plan_item(rows[0], CSV_SPEC)
    assert (planned.key, planned.skip, planned.obj.size if planned.obj else None) == (
        "data/0000000.tmp",
        "excluded by options.include / options.exclude",
        512,
    )


def test_the_first_of_two_columns_with_one_name_is_the_one_read() -> None:
    """`Key` and `key` are one field: a row that gives both is read by its first, as before."""
    planned = plan_item({"Key": "data/first", "key": "data/second", "SIZE": "7", "size": "9"}, CSV_SPEC)
    assert planned.obj is not None and (planned.obj.key, planned.obj.size) == ("data/first", 7)
