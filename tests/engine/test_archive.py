"""Archived sources are never attempted blindly: skipped, restored on request, copied once readable.

moto's server enforces archive classes (a GET or CopyObject of a GLACIER object fails) and
completes RestoreObject at once, so a second run sees the object restored.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from ferry import Copier, CopyPolicy, SourceObject, Status, Target
from ferry.s3.clients import make_client


class RestoreSpy:
    """A real source client that records RestoreObject calls and can rewrite HEAD's Restore."""

    def __init__(self, client: Any, restore_header: str | None = None) -> None:
        self._client = client
        self._restore_header = restore_header
        self.restores: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def head_object(self, **kwargs: Any) -> dict[str, Any]:
        head = self._client.head_object(**kwargs)
        if self._restore_header is not None:
            head["Restore"] = self._restore_header
        return head

    def restore_object(self, **kwargs: Any) -> dict[str, Any]:
        self.restores.append(kwargs)
        return self._client.restore_object(**kwargs)


def archived_source(server: Any, bucket: str, storage_class: str) -> bytes:
    data = os.urandom(64 * 1024)
    server.client.put_object(Bucket=bucket, Key="cold", Body=data, StorageClass=storage_class)
    with pytest.raises(server.client.exceptions.InvalidObjectState):
        server.client.get_object(Bucket=bucket, Key="cold")  # the server really refuses to read it
    return data


@pytest.mark.parametrize("storage_class", ["GLACIER", "DEEP_ARCHIVE"])
def test_archived_source_is_skipped_as_needing_restore_by_default(
    motoserver, moto_buckets, storage_class
) -> None:
    src, dst = moto_buckets
    archived_source(motoserver, src, storage_class)
    source = RestoreSpy(make_client(motoserver.endpoint))

    with Copier(motoserver.endpoint, motoserver.endpoint, source_client=source) as copier:
        result = copier.copy(SourceObject(src, "cold"), Target(dst, "cold"))

    assert result.status == Status.SKIPPED
    assert result.reason.startswith("needs restore")
    assert storage_class in result.reason
    assert source.restores == []  # restoring costs money: only on request
    assert motoserver.keys(dst) == []


@pytest.mark.parametrize("mode", ["auto", "stream"])
@pytest.mark.parametrize("storage_class", ["GLACIER", "DEEP_ARCHIVE"])
def test_restore_is_requested_then_a_later_run_copies_the_restored_object(
    motoserver, moto_buckets, storage_class, mode
) -> None:
    src, dst = moto_buckets
    data = archived_source(motoserver, src, storage_class)
    policy = CopyPolicy(mode=mode, restore="bulk")

    source = RestoreSpy(make_client(motoserver.endpoint))
    with Copier(motoserver.endpoint, motoserver.endpoint, policy, source_client=source) as copier:
        first = copier.copy(SourceObject(src, "cold"), Target(dst, "cold"))

    assert first.status == Status.PENDING
    assert first.reason.startswith("restoring")
    assert len(source.restores) == 1
    assert source.restores[0]["RestoreRequest"] == {"Days": 7, "GlacierJobParameters": {"Tier": "Bulk"}}
    assert motoserver.keys(dst) == []

    # moto completes the restore at once; this is the run "when it completes".
    assert 'ongoing-request="false"' in motoserver.client.head_object(Bucket=src, Key="cold")["Restore"]
    source = RestoreSpy(make_client(motoserver.endpoint))
    with Copier(motoserver.endpoint, motoserver.endpoint, policy, source_client=source) as copier:
        second = copier.copy(SourceObject(src, "cold"), Target(dst, "cold"))

    assert second.status == Status.COPIED, second.reason
    # moto stores no checksum, so the source's MD5 ETag proves the copy either way.
    assert (second.strategy, second.verified_by) == {
        "auto": ("server-side", "etag"),
        "stream": ("stream", "md5"),
    }[mode]
    assert source.restores == []  # already restored: not requested again
    head = motoserver.client.head_object(Bucket=dst, Key="cold")
    assert head.get("StorageClass") == storage_class  # the copy stays in the archive class
    assert head["ContentLength"] == len(data)
    assert head["ETag"] == motoserver.client.head_object(Bucket=src, Key="cold")["ETag"]


def test_source_whose_restore_is_in_progress_is_pending(motoserver, moto_buckets) -> None:
    src, dst = moto_buckets
    archived_source(motoserver, src, "GLACIER")
    source = RestoreSpy(make_client(motoserver.endpoint), restore_header='ongoing-request="true"')

    with Copier(
        motoserver.endpoint, motoserver.endpoint, CopyPolicy(restore="bulk"), source_client=source
    ) as copier:
        result = copier.copy(SourceObject(src, "cold"), Target(dst, "cold"))

    assert result.status == Status.PENDING
    assert result.reason.startswith("restoring")
    assert "in progress" in result.reason
    assert source.restores == []  # one restore at a time
    assert motoserver.keys(dst) == []


def test_dry_run_with_restore_requests_no_restore(motoserver, moto_buckets) -> None:
    src, dst = moto_buckets
    archived_source(motoserver, src, "GLACIER")
    source = RestoreSpy(make_client(motoserver.endpoint))
    policy = CopyPolicy(restore="bulk", dry_run=True)
    with Copier(motoserver.endpoint, motoserver.endpoint, policy, source_client=source) as copier:
        result = copier.copy(SourceObject(src, "cold"), Target(dst, "cold"))
    assert result.status == Status.PENDING
    assert result.reason.startswith("dry run: would request a bulk restore")
    assert source.restores == []
    assert motoserver.keys(dst) == []
