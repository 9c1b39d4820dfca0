"""S3-compatible stores that lack a feature: Ferry sends only what changes S3's defaults, falls
back where it can, and says each degradation once per run, never once per object.

Each test runs on versitygw and MinIO through the QuirkProxy (server_quirks.py), which makes
the real server answer 501 NotImplemented, or drop tags, as stores seen in the field do.
"""

from __future__ import annotations

import io
import os
from typing import Any

import boto3
import pytest
from botocore.config import Config
from test_stream_layout import put_parts

from ferry import Copier, CopyPolicy, Endpoint, SourceObject, Status, Strategy, Target

MiB = 1024 * 1024
SERVERS = ["versitygw", "minio"]
TAGS = {"team": "blue", "tier": "gold"}


def via(proxy: Any) -> Endpoint:
    return Endpoint(endpoint_url=proxy.url, region="us-east-1")


def seed(server: Any, bucket: str, keys: list[str], *, tags: dict[str, str] | None = TAGS) -> None:
    for key in keys:
        extra = {"Tagging": "&".join(f"{k}={v}" for k, v in tags.items())} if tags else {}
        server.client.put_object(
            Bucket=bucket, Key=key, Body=key.encode() * 10, Metadata={"origin": "quirks"}, **extra
        )


def tags_of(server: Any, bucket: str, key: str) -> dict[str, str]:
    tag_set = server.client.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]
    return {t["Key"]: t["Value"] for t in tag_set}


def copy_all(copier: Copier, src: str, dst: str, keys: list[str]) -> list[Any]:
    return copier.copy_batch([(SourceObject(src, k), Target(dst, k)) for k in keys])


@pytest.mark.parametrize("server_name", SERVERS)
def test_copy_object_states_no_directive_that_is_s3s_default(request, server_name, quirks):
    server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), server.bucket("dst")
    seed(server, src, ["a", "b"])
    proxy = quirks(server, "tagging-directive")
    with Copier(via(proxy), via(proxy), CopyPolicy(), concurrency=1) as copier:
        results = copy_all(copier, src, dst, ["a", "b"])
    assert [r.status for r in results] == [Status.COPIED] * 2, [r.reason for r in results]
    assert {r.strategy for r in results} == {Strategy.COPY_OBJECT}
    copies = [s for s in proxy.requests("PUT") if "x-amz-copy-source" in s.headers]
    assert len(copies) == 2 and proxy.refused() == []
    for seen in copies:
        assert "x-amz-tagging-directive" not in seen.headers
        assert "x-amz-metadata-directive" not in seen.headers
    assert tags_of(server, dst, "a") == TAGS
    assert server.client.head_object(Bucket=dst, Key="a")["Metadata"] == {"origin": "quirks"}
    assert copier.degradations == []


@pytest.mark.parametrize("server_name", SERVERS)
def test_not_implemented_copy_object_streams_once_and_says_so_once(request, server_name, quirks):
    """--no-tags needs REPLACE; a server refusing the directive gets streamed copies instead."""
    server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), server.bucket("dst")
    keys = [f"k{i}" for i in range(5)]
    seed(server, src, keys)
    proxy = quirks(server, "tagging-directive")
    with Copier(via(proxy), via(proxy), CopyPolicy(preserve_tags=False), concurrency=1) as copier:
        results = copy_all(copier, src, dst, keys)
    assert [r.status for r in results] == [Status.COPIED] * 5, [r.reason for r in results]
    assert {r.strategy for r in results} == {Strategy.STREAM_PUT}
    assert len(proxy.refused()) == 1  # learned once: no server-side copy asked after it
    assert len(copier.degradations) == 1
    assert "NotImplemented" in copier.degradations[0] and "stream" in copier.degradations[0]
    assert all(copier.degradations[0] not in (r.note or "") for r in results[1:])
    for key in keys:
        assert tags_of(server, dst, key) == {}
        assert server.client.get_object(Bucket=dst, Key=key)["Body"].read() == key.encode() * 10


@pytest.mark.parametrize("server_name", SERVERS)
def test_not_implemented_copy_object_in_server_side_mode_fails_saying_how(request, server_name, quirks):
    server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), server.bucket("dst")
    seed(server, src, ["a"])
    proxy = quirks(server, "tagging-directive")
    policy = CopyPolicy(mode="server-side", preserve_tags=False)
    with Copier(via(proxy), via(proxy), policy, concurrency=1) as copier:
        (result,) = copy_all(copier, src, dst, ["a"])
    assert result.status == Status.FAILED
    assert "NotImplemented" in result.reason and "--mode stream" in result.reason


@pytest.mark.parametrize("mode", ["auto", "stream"])
@pytest.mark.parametrize("server_name", SERVERS)
def test_a_source_without_tagging_copies_everything_and_says_so_once(request, server_name, mode, quirks):
    """Stream and auto modes behave the same: the small objects and the multipart ones copy."""
    server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), server.bucket("dst")
    keys = ["s1", "s2", "s3"]
    seed(server, src, keys, tags=None)
    put_parts(server.client, src, "big", [5 * MiB, 5 * MiB, 1024])
    keys.append("big")
    proxy = quirks(server, "no-tagging")
    with Copier(via(proxy), via(proxy), CopyPolicy(mode=mode), concurrency=1) as copier:
        results = copy_all(copier, src, dst, keys)
    assert [r.status for r in results] == [Status.COPIED] * 4, [r.reason for r in results]
    asked = proxy.requests("GET", "tagging")
    assert len(asked) <= 1  # asked once at most (a server-side CopyObject needs no tag read)
    assert len(copier.degradations) == len(asked)  # said when met, and once
    if mode == "stream":
        assert len(asked) == 1
        assert "tagging" in copier.degradations[0] and "NotImplemented" in copier.degradations[0]


@pytest.mark.parametrize("quirk", ["refuses-write-tags", "drops-tags"])
@pytest.mark.parametrize("server_name", SERVERS)
def test_a_destination_that_cannot_keep_tags_fails_once_with_one_sentence(
    request, server_name, quirk, quirks
):
    """Tags Ferry was asked to keep are never lost silently: the first tagged object finds out
    (a 501, or a read-back that finds no tags), the others fail at once with the same sentence,
    and objects without tags still copy."""
    server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), server.bucket("dst")
    tagged = [f"t{i}" for i in range(4)]
    seed(server, src, tagged)
    seed(server, src, ["plain"], tags=None)
    proxy = quirks(server, quirk)
    with Copier(server.endpoint, via(proxy), CopyPolicy(), concurrency=1) as copier:
        results = copy_all(copier, src, dst, [*tagged, "plain"])
    by_key = {r.source_key: r for r in results}
    assert by_key["plain"].status == Status.COPIED, by_key["plain"].reason
    reasons = {by_key[k].reason for k in tagged}
    assert [by_key[k].status for k in tagged] == [Status.FAILED] * 4
    assert len(reasons) == 1, reasons  # one sentence
    (reason,) = reasons
    assert "tags" in reason and "--no-tags" in reason
    tagged_writes = [s for s in proxy.seen if "x-amz-tagging" in s.headers]
    assert len(tagged_writes) == 1  # only the first tagged object was tried
    assert copier.degradations == [reason]


@pytest.mark.parametrize("server_name", SERVERS)
def test_head_part_number_not_implemented_copy_proved_by_the_etag_a_skip_trusts(request, server_name, quirks):
    """40 MiB in 8 MiB parts (`-5`), layout unlearnable: the uniform 8 MiB stream reproduces it
    by chance, and the destination's ETag then proves the copy; the re-run skips it on the same
    evidence, never on evidence the copy was not verified by. (versitygw stores a CRC64NVME of
    every object: that proves both; MinIO stores none, so the ETag is all there is.)"""
    server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), server.bucket("dst")
    put_parts(server.client, src, "forty", [8 * MiB] * 5)
    proxy = quirks(server, "head-part-number")
    policy = CopyPolicy(mode="stream")
    with Copier(via(proxy), via(proxy), policy) as copier:
        first = copier.copy(SourceObject(src, "forty"), Target(dst, "forty"))
        second = copier.copy(SourceObject(src, "forty"), Target(dst, "forty"))
    assert proxy.requests("HEAD", "partNumber")  # the quirk was met
    assert proxy.refused()
    if server_name == "minio":
        assert first.status == Status.COPIED and first.verified_by == "etag", (first.verified_by, first.note)
        assert second.status == Status.SKIPPED and "ETag" in second.reason
    else:
        assert first.status == Status.COPIED and first.verified_by == "crc64nvme (full object)"
        assert second.status == Status.SKIPPED and "crc64nvme" in second.reason


def test_head_part_number_not_implemented_size_only_copy_is_no_proof_for_a_skip(minio, quirks):
    """42 MiB in 6 MiB parts (`-7`, no common part size), on MinIO (no stored checksum): the
    copy in 8 MiB parts is proved by size alone, and the next run does not claim more: it is
    not skipped as identical."""
    server = minio
    src, dst = server.bucket("src"), server.bucket("dst")
    put_parts(server.client, src, "forty", [6 * MiB] * 7)
    proxy = quirks(server, "head-part-number")
    with Copier(via(proxy), via(proxy), CopyPolicy(mode="stream")) as copier:
        first = copier.copy(SourceObject(src, "forty"), Target(dst, "forty"))
        second = copier.copy(SourceObject(src, "forty"), Target(dst, "forty"))
    assert first.status == Status.COPIED and first.verified_by == "size"
    assert second.status == Status.COPIED, second.reason


def test_the_proxy_forwards_streamed_uploads_and_keeps_alive(versitygw, quirks):
    """Chunked aws-chunked bodies and keep-alive connections pass through with SigV4 intact."""
    proxy = quirks(versitygw)
    bucket = versitygw.bucket("p")
    # botocore's defaults: flexible checksums, so streamed bodies go aws-chunked, chunked framing
    client = boto3.client("s3", endpoint_url=proxy.url, config=Config(s3={"addressing_style": "path"}))
    body = os.urandom(3 * MiB)
    for n in range(3):
        client.put_object(Bucket=bucket, Key=f"o{n}", Body=body)
    client.upload_fileobj(io.BytesIO(body), bucket, "streamed")
    assert versitygw.client.get_object(Bucket=bucket, Key="streamed")["Body"].read() == body
    assert len(proxy.requests("PUT")) == 4 and proxy.refused() == []
