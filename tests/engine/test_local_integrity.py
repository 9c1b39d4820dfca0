"""An upload is kept only when S3 stored the checksum of the bytes read, and only when the file did
not change while it was read; anything else is deleted and fails with the reason.

The destination is a real server (versitygw) behind a client whose answers a test rewrites, as
a faulty store would answer: what stays in the bucket is what the test checks.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import S3Server
from ferry.engine.files.uploads import Uploader
from ferry.local.files import one_file
from ferry.models import CopyPolicy, Status, Target
from ferry.s3.clients import make_client

MiB = 1024 * 1024
PARTS_OF_5MIB = CopyPolicy(part_size=5 * MiB, multipart_threshold=5 * MiB)


class RewritingClient:
    """A real client; `rewrite[method](kwargs, response)` may change what a call answers, and
    `before[method](kwargs)` runs first."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.rewrite: dict[str, Callable[[dict[str, Any], dict[str, Any]], None]] = {}
        self.before: dict[str, Callable[[dict[str, Any]], None]] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if name not in self.rewrite and name not in self.before:
            return method

        def call(**kwargs: Any) -> Any:
            if name in self.before:
                self.before[name](kwargs)
            response = method(**kwargs)
            if name in self.rewrite:
                self.rewrite[name](kwargs, response)
            return response

        return call


def upload(server: S3Server, client: RewritingClient, path: Path, bucket: str, policy: CopyPolicy) -> Any:
    with Uploader(server.endpoint, policy, dest_client=client) as uploader:
        return uploader.copy(one_file(str(path), path.name), Target(bucket, path.name))


def a_false_checksum(kwargs: dict[str, Any], response: dict[str, Any]) -> None:
    response["ChecksumCRC32C"] = "AAAAAA=="


@pytest.mark.parametrize(("size", "method"), [(1000, "put_object"), (11 * MiB, "complete_multipart_upload")])
def test_a_stored_checksum_unlike_the_files_is_deleted_and_fails(
    versitygw: S3Server, tmp_path: Path, size: int, method: str
) -> None:
    bucket = versitygw.bucket("integrity")
    path = tmp_path / "file.bin"
    path.write_bytes(os.urandom(size))
    client = RewritingClient(make_client(versitygw.endpoint))
    client.rewrite[method] = a_false_checksum

    result = upload(versitygw, client, path, bucket, PARTS_OF_5MIB)

    assert result.status == Status.FAILED
    assert "verification failed: the destination stored CRC32C AAAAAA==" in result.reason
    assert versitygw.keys(bucket) == [] and versitygw.open_uploads(bucket) == []


def test_a_store_that_keeps_no_checksum_proves_a_single_put_by_its_md5_etag(
    versitygw: S3Server, tmp_path: Path
) -> None:
    bucket = versitygw.bucket("integrity")
    path = tmp_path / "file.bin"
    path.write_bytes(os.urandom(1000))
    client = RewritingClient(make_client(versitygw.endpoint))

    def no_checksum(kwargs: dict[str, Any], response: dict[str, Any]) -> None:
        for name in [k for k in response if k.startswith("Checksum")]:
            del response[name]

    client.rewrite["put_object"] = no_checksum
    client.rewrite["head_object"] = no_checksum

    result = upload(versitygw, client, path, bucket, CopyPolicy())

    assert result.status == Status.COPIED, result.reason
    assert result.verified_by == "md5"

    def another_etag(kwargs: dict[str, Any], response: dict[str, Any]) -> None:
        no_checksum(kwargs, response)
        response["ETag"] = '"' + "0" * 32 + '"'

    client.rewrite["put_object"] = another_etag
    again = upload(versitygw, client, path, bucket, CopyPolicy(skip_existing=False))
    assert again.status == Status.FAILED
    assert "verification failed: the destination's ETag" in again.reason
    assert versitygw.keys(bucket) == []


def test_a_file_that_changes_while_it_is_uploaded_is_not_kept(versitygw: S3Server, tmp_path: Path) -> None:
    bucket = versitygw.bucket("integrity")
    path = tmp_path / "growing.log"
    path.write_bytes(os.urandom(11 * MiB))
    client = RewritingClient(make_client(versitygw.endpoint))
    once = threading.Lock()

    def append_once(kwargs: dict[str, Any]) -> None:
        if once.acquire(blocking=False):
            with open(path, "ab") as log:
                log.write(b"one more line\n")

    client.before["upload_part"] = append_once

    result = upload(versitygw, client, path, bucket, PARTS_OF_5MIB)

    assert result.status == Status.FAILED
    assert result.reason.startswith("the file changed while it was read")
    assert versitygw.keys(bucket) == [] and versitygw.open_uploads(bucket) == []
