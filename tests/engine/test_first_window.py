"""A copy starts after a short first listing page, not after S3's full page of 1,000 keys:
listing 1,000 keys and reading them took 28 ms against MinIO here (100 keys: 4 ms), and on S3
a full page takes longer still, every copy of a prefix waiting it out before its first byte."""

from __future__ import annotations

import hashlib
import io
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from ferry import Copier, CopyPolicy, SourceObject, Status, Target
from ferry.cli.commands import copy_command, local_copy
from ferry.cli.main import main
from ferry.engine.strategies.copier import FIRST_WINDOW, default_concurrency
from ferry.filters import Filters
from ferry.models import CopyResult
from ferry.s3.clients import make_client
from ferry.s3.listing import FIRST_PAGE, S3Url, admitted_under


class ListingRecorder:
    """A client whose ListObjectsV2 calls are recorded (their MaxKeys), then sent as they are."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.max_keys: list[int | None] = []

    def list_objects_v2(self, **params: Any) -> dict[str, Any]:
        self.max_keys.append(params.get("MaxKeys"))
        return self._client.list_objects_v2(**params)


def test_a_copys_listing_asks_a_short_first_page_then_full_pages(versitygw: Any) -> None:
    bucket = versitygw.bucket("first-page")
    keys = [f"p/{n:04d}" for n in range(FIRST_PAGE + 150)]
    for key in keys:
        versitygw.client.put_object(Bucket=bucket, Key=key, Body=b"x")
    recorder = ListingRecorder(versitygw.client)

    listed = [obj.key for obj, _ in admitted_under(recorder, S3Url(bucket, "p/"), Filters(), ())]

    assert listed == keys
    assert recorder.max_keys == [FIRST_PAGE, None]  # then S3's own page size, 1,000


def test_a_batch_starts_copying_once_it_has_the_first_pages_keys(versitygw: Any) -> None:
    """The pairs stop after the first page's keys until an object is being copied: a batch
    that waited for a whole window of 1,000 before its first copy would never get there."""
    bucket = versitygw.bucket("first-window")
    first_copy = threading.Event()
    read_on_after_a_copy: list[bool] = []

    def pairs() -> Iterator[tuple[SourceObject, Target]]:
        for n in range(2 * 1000):
            if n == FIRST_PAGE:
                read_on_after_a_copy.append(first_copy.wait(timeout=10))
            yield SourceObject(bucket, f"k{n}", size=1), Target(bucket, f"d{n}")

    def copy(obj: SourceObject, target: Target, *_: Any, **__: Any) -> CopyResult:
        first_copy.set()
        return CopyResult(obj.key, target.key, Status.COPIED, source_bucket=obj.bucket)

    with Copier(
        versitygw.endpoint, versitygw.endpoint, CopyPolicy(skip_existing=False), concurrency=8
    ) as copier:
        copier.copy = copy  # type: ignore[method-assign]
        results = copier.copy_batch(pairs(), first_window=FIRST_WINDOW)

    assert read_on_after_a_copy == [True]
    assert len(results) == 2 * 1000 and {r.status for r in results} == {Status.COPIED}


def test_a_batch_runs_as_many_objects_at_once_as_asked_beyond_its_first_window(versitygw: Any) -> None:
    """A first window of 100 pairs does not bound the threads to 100 when more pairs follow:
    each of the first `at_once` copies waits until all of them are in flight together."""
    bucket = versitygw.bucket("first-window-threads")
    at_once = FIRST_PAGE + 28
    together = threading.Barrier(at_once, timeout=10)
    entered, met = [0], []
    count = threading.Lock()

    def copy(obj: SourceObject, target: Target, *_: Any, **__: Any) -> CopyResult:
        with count:
            entered[0] += 1
            waits = entered[0] <= at_once
        if waits:
            try:
                together.wait()
                met.append(True)
            except threading.BrokenBarrierError:
                met.append(False)
        return CopyResult(obj.key, target.key, Status.COPIED, source_bucket=obj.bucket)

    pairs = [(SourceObject(bucket, f"k{n}", size=1), Target(bucket, f"d{n}")) for n in range(1000)]
    with Copier(
        versitygw.endpoint, versitygw.endpoint, CopyPolicy(skip_existing=False), concurrency=at_once
    ) as copier:
        copier.copy = copy  # type: ignore[method-assign]
        results = copier.copy_batch(pairs, first_window=FIRST_WINDOW)

    assert met == [True] * at_once
    assert len(results) == 1000


@pytest.mark.parametrize("to", ["bucket", "folder", "sync"])
def test_a_copy_of_a_prefix_starts_on_the_listings_first_page(
    versitygw: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, to: str
) -> None:
    """`ferry copy` of a prefix copies its first object once FIRST_PAGE keys are listed; the
    listing's second page waits for that copy, so the count is exact."""
    src, dst = versitygw.bucket("first-src"), versitygw.bucket("first-dst")
    for n in range(FIRST_PAGE + 150):
        versitygw.client.put_object(Bucket=src, Key=f"p/{n:04d}", Body=b"x")
    listed, at_first_copy, waited = [0], [], []
    copied = threading.Event()

    def count_listed(parsed: dict[str, Any], **_: Any) -> None:
        listed[0] += len(parsed.get("Contents") or [])

    def hold_second_page(params: dict[str, Any], **_: Any) -> None:
        if params.get("Bucket") == src and params.get("ContinuationToken"):
            waited.append(copied.wait(timeout=10))

    first = threading.Lock()

    def first_copy(**_: Any) -> None:
        with first:
            if not copied.is_set():
                at_first_copy.append(listed[0])
                copied.set()

    def watched(*args: Any, **kwargs: Any) -> Any:
        client = make_client(*args, **kwargs)
        client.meta.events.register("after-call.s3.ListObjectsV2", count_listed)
        client.meta.events.register("before-parameter-build.s3.ListObjectsV2", hold_second_page)
        for operation in ("CopyObject", "GetObject"):
            client.meta.events.register(f"before-call.s3.{operation}", first_copy)
        return client

    monkeypatch.setattr(copy_command, "make_client", watched)
    monkeypatch.setattr(local_copy, "make_client", watched)
    dst_url = str(tmp_path / "out") if to == "folder" else f"s3://{dst}/"
    out, err = io.StringIO(), io.StringIO()
    command = "sync" if to == "sync" else "copy"
    code = main([command, f"s3://{src}/p/", dst_url, "--endpoint-url", versitygw.url], out, err)

    assert code == 0, err.getvalue()
    assert at_first_copy == [FIRST_PAGE] and waited == [True]
    assert "250 copied" in out.getvalue()


def test_a_first_window_of_large_objects_is_read_on_to_a_whole_window_before_the_default_is_chosen(
    versitygw: Any,
) -> None:
    """The default concurrency is judged on a whole window when the first 100 objects alone
    would choose the large objects' few threads: here 100 of 16 MiB, then 900 small ones,
    whose default (as a whole window of 1,000 judges it) is the small objects' many."""
    bucket = versitygw.bucket("first-window-sizes")
    sizes = [16 * 1024 * 1024] * FIRST_PAGE + [1024] * (1000 - FIRST_PAGE)
    at_once = default_concurrency(sizes)
    assert at_once > default_concurrency(sizes[:FIRST_PAGE])
    together = threading.Barrier(at_once, timeout=10)
    entered, met = [0], []
    count = threading.Lock()

    def copy(obj: SourceObject, target: Target, *_: Any, **__: Any) -> CopyResult:
        with count:
            entered[0] += 1
            waits = entered[0] <= at_once
        if waits:
            try:
                together.wait()
                met.append(True)
            except threading.BrokenBarrierError:
                met.append(False)
        return CopyResult(obj.key, target.key, Status.COPIED, source_bucket=obj.bucket)

    pairs = [
        (SourceObject(bucket, f"k{n}", size=size), Target(bucket, f"d{n}")) for n, size in enumerate(sizes)
    ]
    with Copier(versitygw.endpoint, versitygw.endpoint, CopyPolicy(skip_existing=False)) as copier:
        copier.copy = copy  # type: ignore[method-assign]
        results = copier.copy_batch(pairs, first_window=FIRST_WINDOW)

    assert met == [True] * at_once
    assert len(results) == 1000


def test_a_rerun_lists_the_destination_for_its_first_window_not_a_whole_page_beyond(versitygw: Any) -> None:
    """A second run into a destination that holds everything lists, for its first window of
    100 targets, a page sized to those targets, not S3's 1,000: the keys past them are the next
    window's, which lists them again. Every object is still skipped from the listings alone."""
    src, dst = versitygw.bucket("rerun-src"), versitygw.bucket("rerun-dst")
    keys = sorted(f"p/{hashlib.md5(str(n).encode()).hexdigest()}" for n in range(FIRST_PAGE + 150))
    for key in keys:  # names that share no prefix past "p/", as most keys do
        for bucket in (src, dst):
            versitygw.client.put_object(Bucket=bucket, Key=key, Body=b"x")
    pairs = [(SourceObject(src, k, size=1, etag=etag(versitygw, src, k)), Target(dst, k)) for k in keys]
    listed: list[int] = []
    heads: list[str] = []

    with Copier(versitygw.endpoint, versitygw.endpoint, CopyPolicy(skip_existing=True)) as copier:
        events = copier.ctx.dest_client.meta.events
        events.register(
            "after-call.s3.ListObjectsV2", lambda parsed, **_: listed.append(len(parsed["Contents"]))
        )
        events.register("before-call.s3.HeadObject", lambda params, **_: heads.append(params["Key"]))
        results = copier.copy_batch(pairs, first_window=FIRST_WINDOW)

    assert {r.status for r in results} == {Status.SKIPPED} and len(results) == len(keys)
    assert heads == []
    assert listed[0] <= 2 * FIRST_PAGE  # the first window's own keys and as many again, at most
    assert sum(listed) <= len(keys) + FIRST_PAGE


def etag(server: Any, bucket: str, key: str) -> str:
    return str(server.client.head_object(Bucket=bucket, Key=key)["ETag"]).strip('"')
