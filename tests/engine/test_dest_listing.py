"""Skip-existing from destination listings: one ListObjectsV2 per window, a HEAD only where a
listing cannot decide, and the same decisions as a HEAD per key."""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
from collections import Counter
from typing import Any

import pytest

from ferry import Copier, CopyPolicy, SourceObject, Status, Target
from ferry.engine.compare import dest_listing
from ferry.engine.compare.dest_listing import ABSENT, DestinationIndex, Listed, _just_before
from ferry.engine.compare.skip import settled_by_listing
from ferry.engine.proofs.source import SourceInfo
from ferry.engine.strategies.copier import _WindowReader
from ferry.models import Compare

SIZE = 2048


class RequestCounter:
    """Requests a client sends, by operation."""

    def __init__(self, client: Any) -> None:
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()
        client.meta.events.register("before-call.s3.*", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.calls[model.name] += 1


def arrange(server: Any, src: str, dst: str, others: int = 1) -> dict[str, str]:
    """40 sources; at the destination 10 identical, 5 same size with other bytes, 5 another
    size, 20 absent, and `others` unrelated keys after each. Returns each key's expected fate."""
    fate: dict[str, str] = {}
    for n in range(40):
        key = f"data/{n:03d}.bin"
        body = os.urandom(SIZE)
        server.client.put_object(Bucket=src, Key=key, Body=body)
        if n < 10:
            server.client.put_object(Bucket=dst, Key=key, Body=body)
            fate[key] = "skipped"
        elif n < 15:
            server.client.put_object(Bucket=dst, Key=key, Body=os.urandom(SIZE))
            fate[key] = "copied"
        elif n < 20:
            server.client.put_object(Bucket=dst, Key=key, Body=os.urandom(SIZE + 1))
            fate[key] = "copied"
        else:
            fate[key] = "copied"
        for other in range(others):
            server.client.put_object(Bucket=dst, Key=f"data/{n:03d}.bin.{other}", Body=b"x")
    return fate


def run_batch(server: Any, src: str, dst: str, fate: dict[str, str], **policy: Any) -> tuple[list[Any], Any]:
    with Copier(server.endpoint, server.endpoint, CopyPolicy(**policy), concurrency=4) as copier:
        counter = RequestCounter(copier.ctx.dest_client)
        results = copier.copy_batch([(SourceObject(src, k), Target(dst, k)) for k in sorted(fate)])
    return results, counter


@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_a_window_is_listed_once_and_only_same_size_other_etag_keys_are_headed(
    server_name: str, request: pytest.FixtureRequest
) -> None:
    server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), server.bucket("dst")
    fate = arrange(server, src, dst)
    results, counter = run_batch(server, src, dst, fate)

    assert {r.source_key: str(r.status) for r in results} == fate
    for result in results:
        if result.status == Status.SKIPPED:
            assert result.reason.startswith("identical (ETag ")
    for key, expected in fate.items():
        if expected == "copied":
            assert server.client.get_object(Bucket=dst, Key=key)["Body"].read() == (
                server.client.get_object(Bucket=src, Key=key)["Body"].read()
            )
    assert counter.calls["ListObjectsV2"] == 1
    assert counter.calls["HeadObject"] == 5  # the 5 same-size keys with other bytes


def test_a_crowded_destination_is_listed_a_few_pages_then_headed(
    versitygw: Any, vgw_buckets: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages are capped: keys beyond what the pages covered get their HEAD, decided the same."""
    monkeypatch.setattr(dest_listing, "PAGE_SIZE", 10)
    src, dst = vgw_buckets
    fate = arrange(versitygw, src, dst, others=3)  # 140 keys in the range: more than 9 pages
    results, counter = run_batch(versitygw, src, dst, fate)

    assert {r.source_key: str(r.status) for r in results} == fate
    assert counter.calls["ListObjectsV2"] == 9  # the cap: 2 x 40 targets / 10 a page, + 1
    # Listed: keys 000-022 (the 5 same-size ones among them need a HEAD); beyond: a HEAD each.
    assert 5 < counter.calls["HeadObject"] < 40


def test_size_and_mtime_compare_from_the_listing(versitygw: Any, vgw_buckets: tuple[str, str]) -> None:
    src, dst = vgw_buckets
    fate = arrange(versitygw, src, dst)
    # Same size and written after the source: size-mtime skips the 5 with other bytes too.
    expected = {k: ("skipped" if int(k[5:8]) < 15 else "copied") for k in fate}
    results, counter = run_batch(versitygw, src, dst, fate, compare="size-mtime")

    assert {r.source_key: str(r.status) for r in results} == expected
    assert counter.calls["HeadObject"] == 0


def test_a_refused_listing_falls_back_to_a_head_per_key(
    versitygw: Any, vgw_buckets: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ferry.engine.compare.dest_listing")
    src, dst = vgw_buckets
    fate = arrange(versitygw, src, dst)
    with Copier(versitygw.endpoint, versitygw.endpoint, concurrency=4) as copier:
        copier.ctx.dest_client.meta.events.register("before-call.s3.ListObjectsV2", _deny)
        counter = RequestCounter(copier.ctx.dest_client)
        results = copier.copy_batch([(SourceObject(src, k), Target(dst, k)) for k in sorted(fate)])

    assert {r.source_key: str(r.status) for r in results} == fate
    assert counter.calls["HeadObject"] == 40
    assert "cannot list the destination" in caplog.text


class _Denied:
    status_code = 403
    headers: dict[str, str] = {}


def _deny(**_: Any) -> tuple[Any, dict[str, Any]]:
    return _Denied(), {"Error": {"Code": "AccessDenied", "Message": "denied by the test"}}


def test_no_listing_without_skip_existing(versitygw: Any, vgw_buckets: tuple[str, str]) -> None:
    src, dst = vgw_buckets
    fate = arrange(versitygw, src, dst)
    results, counter = run_batch(versitygw, src, dst, fate, skip_existing=False)
    assert all(r.status == Status.COPIED for r in results)
    assert counter.calls["ListObjectsV2"] == 0 and counter.calls["HeadObject"] == 0


@pytest.mark.parametrize("key", ["a", "data/001.bin", "ü/ключ", "x\x01", "\ue000z", "k\U0001f600"])
def test_just_before_sorts_immediately_before_the_key(key: str) -> None:
    before = _just_before(key)
    assert before is not None
    assert before.encode() < key.encode()  # S3 orders keys by their UTF-8 bytes
    for shorter in (key[:-1], key[:-1] + chr(ord(key[-1]) - 1)):
        assert shorter.encode() <= before.encode()


class PagedClient:
    """A destination that answers ListObjectsV2 with the given pages, in order."""

    def __init__(self, pages: list[list[str]]) -> None:
        self.pages = pages
        self.calls = 0

    def list_objects_v2(self, **_: Any) -> dict[str, Any]:
        page = self.pages[self.calls]
        self.calls += 1
        more = self.calls < len(self.pages)
        response: dict[str, Any] = {"IsTruncated": more, "NextContinuationToken": f"t{self.calls}"}
        response["Contents"] = [{"Key": k, "Size": 1, "ETag": '"e"'} for k in page]
        return response


def targets(n: int) -> list[Target]:
    return [Target("b", f"k/{i:02d}") for i in range(n)]


def test_an_empty_truncated_page_covers_nothing_beyond_what_was_listed() -> None:
    client = PagedClient([[], ["k/00", "k/01"], ["k/02"], ["k/19"]])
    # 20 keys: at most 3 pages (a short first page of 40 keys, then two whole ones)
    known = DestinationIndex(client).window(targets(20))
    assert client.calls == 3
    assert sorted(t.key for t in known) == ["k/00", "k/01", "k/02"]  # not k/03-k/19: never listed
    assert all(isinstance(v, Listed) for v in known.values())


def test_a_listing_out_of_order_is_not_relied_on() -> None:
    client = PagedClient([["k/05", "k/01"]])
    index = DestinationIndex(client)
    assert index.window(targets(10)) == {}
    assert index.window(targets(10)) == {}
    assert client.calls == 1  # that bucket is not listed again


def test_size_and_mtime_needs_a_source_time_to_settle_from_the_listing() -> None:
    listed = Listed(size=5, etag="x", last_modified=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    timed = SourceInfo(
        SourceObject("b", "k"),
        {"LastModified": dt.datetime(2025, 1, 1, tzinfo=dt.UTC)},
        5,
        "y",
        None,
        "STANDARD",
        None,
    )
    untimed = SourceInfo(SourceObject("b", "k"), {}, 5, "y", None, "STANDARD", None)
    assert settled_by_listing(listed, timed, Compare.SIZE_MTIME)
    assert not settled_by_listing(listed, untimed, Compare.SIZE_MTIME)
    assert not settled_by_listing(listed, timed, Compare.CHECKSUM)  # another ETag: the HEAD decides
    assert settled_by_listing(ABSENT, untimed, Compare.CHECKSUM)


def test_no_destination_listing_after_the_deadline() -> None:
    client = PagedClient([["k/00"]])
    pairs = iter([(SourceObject("a", t.key), t) for t in targets(10)])
    window = _WindowReader(pairs, DestinationIndex(client), deadline=time.monotonic() - 1).next_window()
    assert len(window.pairs) == 10 and window.known == {}
    assert client.calls == 0


def test_a_short_first_page_does_not_shorten_how_far_a_crowded_destination_is_listed(
    versitygw: Any, vgw_buckets: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window of 40 targets asks a first page of 80 keys, not a whole page: in a destination
    crowded with other keys, the listing still reads at least the two whole pages it read
    before, so no target it used to cover gets a HEAD instead."""
    monkeypatch.setattr(dest_listing, "PAGE_SIZE", 100)
    src, dst = vgw_buckets
    fate = arrange(versitygw, src, dst, others=5)  # 240 keys in the range of 40 targets
    listed: list[int] = []
    with Copier(versitygw.endpoint, versitygw.endpoint, CopyPolicy(), concurrency=4) as copier:
        events = copier.ctx.dest_client.meta.events
        events.register(
            "after-call.s3.ListObjectsV2", lambda parsed, **_: listed.append(len(parsed["Contents"]))
        )
        results = copier.copy_batch([(SourceObject(src, k), Target(dst, k)) for k in sorted(fate)])

    assert {r.source_key: str(r.status) for r in results} == fate
    assert listed[0] == 2 * 40
    assert sum(listed) >= 2 * 100
