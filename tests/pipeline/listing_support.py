"""Test support for all_versions jobs whose listing takes several ListVersions runs: a source of
real numbers of versions, a virtual clock for the listing's pages, and the histories and Map
items read back without Ferry's code.

Time is a virtual clock: each ListObjectVersions page of the job's listing (Prefix "p/", not
Prepare's one-key probe, not a worker's listing of one key) is deemed to take one second, and
a run given `pages_context(pipeline, n)` has n - 0.5 seconds past the deadline margin, so it
lists exactly n pages (a run always lists at least one) on any machine, however loaded,
without sleeping.
"""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import PIPELINE_REPORTS, FakeLambdaContext
from ferry.engine.run import deadlines
from ferry.pipeline.history_keys import VersionListing

PAGE_SECONDS = 1.0  # what one page of the job's listing is deemed to take
PAGE = 1_000  # ListObjectVersions' page: versions and delete markers together
FILLER = ("f/*", "s/*")  # options.exclude: keys listed (they fill the pages), never copied


class VirtualClock:
    """deadlines' time.monotonic(): only the seconds the listing's pages are deemed to take."""

    def __init__(self, page_seconds: float = PAGE_SECONDS) -> None:
        self.now = 1000.0
        self.pages = 0
        self.page_seconds = page_seconds
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        with self._lock:
            return self.now

    def page(self, params: dict[str, Any], **_: Any) -> None:
        if params.get("Prefix") == "p/" and "MaxKeys" not in params:  # the job's listing, not a probe
            with self._lock:
                self.now += self.page_seconds
                self.pages += 1


def install_clock(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch, page_seconds: float = PAGE_SECONDS
) -> VirtualClock:
    """The deadlines on the virtual clock, advanced by the pages the handlers' S3 client lists."""
    clock = VirtualClock(page_seconds)
    monkeypatch.setattr(deadlines, "time", SimpleNamespace(monotonic=clock.monotonic))
    pipeline.services().s3.meta.events.register("before-parameter-build.s3.ListObjectVersions", clock.page)
    return clock


def pages_context(pipeline: Any, pages: int = 1) -> FakeLambdaContext:
    """Half a second less than `pages` pages past the deadline margin: the run's deadline
    comes with its `pages`th page."""
    seconds = pipeline.settings.deadline_margin_seconds + (pages - 0.5) * PAGE_SECONDS
    return FakeLambdaContext(remaining_ms=int(seconds * 1000))


def versioned_pair(s3: Any) -> None:
    for bucket in ("src", "dst"):
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})


def put_filler(keys: list[str]) -> None:
    """One version each under keys the jobs exclude: written straight into moto's backend
    (a tenth of a millisecond each, not the five of a request), as they are only listed."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for key in keys:
        backend.put_object("src", key, b"-")


def put_history(
    s3: Any, histories: dict[str, list[bytes | None]], key: str, entries: list[bytes | None]
) -> None:
    """A copied key's versions (None: a delete marker), each in its own millisecond: moto
    orders one key's versions by their time to the millisecond."""
    for body in entries:
        if body is None:
            s3.delete_object(Bucket="src", Key=key)
        else:
            s3.put_object(Bucket="src", Key=key, Body=body)
        histories.setdefault(key, []).append(body)
        time.sleep(0.002)


def bodies(key: str, count: int, *, deleted: bool = False) -> list[bytes | None]:
    entries: list[bytes | None] = [f"{key} #{n}".encode() for n in range(count)]
    return [*entries, None] if deleted else entries


def fill_source(s3: Any) -> dict[str, list[bytes | None]]:
    """Three pages of versions, the copied keys' histories oldest first (None: a delete
    marker). In key order: p/a/0 and p/a/1; 992 filler keys; p/m, whose 12 versions are
    the 1,000th to 1,011th entries (the end of page 1, the start of page 2); 978 filler keys;
    p/t, whose 13 entries are the 1,990th to 2,002nd (the end of page 2, the start of page
    3); p/z/0 and p/z/1. 2,006 entries: pages of 1,000, 1,000 and 6."""
    versioned_pair(s3)
    histories: dict[str, list[bytes | None]] = {}
    put_history(s3, histories, "p/a/0", bodies("p/a/0", 3, deleted=True))
    put_history(s3, histories, "p/a/1", bodies("p/a/1", 3))
    put_filler([f"p/f/{n:04}" for n in range(992)])
    put_history(s3, histories, "p/m", bodies("p/m", 12))
    put_filler([f"p/s/{n:04}" for n in range(978)])
    put_history(s3, histories, "p/t", bodies("p/t", 12, deleted=True))
    put_history(s3, histories, "p/z/0", bodies("p/z/0", 2))
    put_history(s3, histories, "p/z/1", bodies("p/z/1", 1, deleted=True))
    return histories


def spec(job_id: str) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "source": {"bucket": "src", "prefix": "p/"},
        "destination": {"bucket": "dst", "prefix": "q/"},
        "options": {"all_versions": True, "exclude": list(FILLER)},
    }


def atomic_moto_s3(monkeypatch: pytest.MonkeyPatch) -> None:
    """S3 lists a bucket's versions while others are written to it; moto's in-process backend
    iterates the bucket's keys without a lock, so a listing that meets a concurrent write
    fails inside moto ("'NoneType' object is not iterable"). One lock around its listing and
    its writes restores the service's behaviour, and leaves the copies running concurrently."""
    from moto.s3.models import S3Backend

    lock = threading.RLock()
    for name in ("list_object_versions", "put_object", "copy_object", "delete_object"):
        original = getattr(S3Backend, name)

        def locked(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            with lock:
                return _original(self, *args, **kwargs)

        monkeypatch.setattr(S3Backend, name, locked)


def run_listing(
    job: dict[str, Any], context: Any, *, limit: int = 50
) -> tuple[dict[str, Any], list[VersionListing]]:
    """The ListVersions loop as AllVersionsListed drives it: the job when done, each run's state."""
    from handlers import list_versions

    runs = []
    while not job["histories"]["done"]:
        job = list_versions.handler(json.loads(json.dumps({"job": job})), context)
        runs.append(VersionListing.from_dict(job["histories"]))
        assert len(runs) <= limit, runs[-1]
    return job, runs


def map_items(s3: Any, manifest: str) -> list[dict[str, Any]]:
    """What CopyVersionHistories' ItemReader reads (ManifestType ATHENA_DATA, InputType JSONL):
    each S3 URI the manifest names, in order, as JSON Lines."""
    items = []
    text = s3.get_object(Bucket=PIPELINE_REPORTS, Key=manifest)["Body"].read().decode()
    for line in text.splitlines():
        assert line.startswith(f"s3://{PIPELINE_REPORTS}/"), line
        key = line.removeprefix(f"s3://{PIPELINE_REPORTS}/")
        body = s3.get_object(Bucket=PIPELINE_REPORTS, Key=key)["Body"].read().decode()
        items += [json.loads(row) for row in body.split("\n") if row]
    return items


def assert_items_are_the_histories(
    items: list[dict[str, Any]], histories: dict[str, list[bytes | None]]
) -> None:
    """Each key once, in key order, with every version it has (n) and their bytes (s)."""
    assert [i["k"] for i in items] == sorted(histories)
    for item in items:
        versions = histories[item["k"]]
        assert item["n"] == len(versions), item
        assert item["s"] == sum(len(v) for v in versions if v is not None), item


def dest_history(s3: Any, key: str) -> list[bytes | None]:
    """A destination key's history oldest first, read back without Ferry's code: its versions
    (listed newest first), then None for a delete marker that is the latest (the only place
    these sources have one)."""
    versions, markers = [], []
    for page in s3.get_paginator("list_object_versions").paginate(Bucket="dst", Prefix=key):
        versions += [v for v in page.get("Versions", []) if v["Key"] == key]
        markers += [m for m in page.get("DeleteMarkers", []) if m["Key"] == key]
    bodies: list[bytes | None] = [
        s3.get_object(Bucket="dst", Key=key, VersionId=v["VersionId"])["Body"].read()
        for v in reversed(versions)
    ]
    return bodies + [None for m in markers if m["IsLatest"]]
