"""Resuming from upload marks alone (no checkpoint): which parts are kept, which uploads go.

The first copy stops at its deadline after two of four parts; its checkpoint is then thrown
away (as a killed process loses it), so the second copy has only what the bucket holds.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from engine.test_deadline import (
    MODES,
    PART,
    PARTS,
    PartCounter,
    clock_runs_out_after,
    copier_for,
    make_source,
)
from ferry import Copier, CopyPolicy, SourceObject, Status, Target
from ferry.engine.records.checkpoints import MemoryCheckpointStore
from ferry.engine.records.upload_marks import UploadMark, key_uploads, mark_key, read_mark, write_mark


def _stop_after_two_parts(server: Any, mode: str, src: str, dst: str, monkeypatch: pytest.MonkeyPatch) -> str:
    clock_runs_out_after(monkeypatch, 2)
    with copier_for(server, mode, MemoryCheckpointStore()) as copier:  # the store is then lost
        first = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"), deadline=time.monotonic() + 600)
    monkeypatch.undo()
    assert first.status == Status.PENDING, first.reason
    (upload,) = key_uploads(server.client, dst, "obj")
    return upload.upload_id


@pytest.mark.parametrize("mode", list(MODES))
def test_marked_upload_is_resumed_keeping_only_parts_that_check_out(
    versitygw, vgw_buckets, monkeypatch, mode
):
    src, dst = vgw_buckets
    data = make_source(versitygw, src, mode)
    upload_id = _stop_after_two_parts(versitygw, mode, src, dst, monkeypatch)
    # Part 1 now holds other bytes of the same size (a torn or foreign write): it must not be kept.
    algorithm = read_mark(versitygw.client, dst, "obj", upload_id).algorithm
    versitygw.client.upload_part(
        Bucket=dst, Key="obj", UploadId=upload_id, PartNumber=1, Body=b"x" * PART, ChecksumAlgorithm=algorithm
    )
    theirs = versitygw.client.create_multipart_upload(Bucket=dst, Key="obj")["UploadId"]  # unmarked

    with copier_for(versitygw, mode, MemoryCheckpointStore()) as copier:
        parts = PartCounter(copier, MODES[mode]["operation"])
        second = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"))

    assert second.status == Status.COPIED, second.reason
    assert second.parts_resumed == 1  # part 2; part 1 failed its check
    assert sorted(parts.numbers) == [1, 3, 4]
    assert versitygw.client.get_object(Bucket=dst, Key="obj")["Body"].read() == data
    assert [u["UploadId"] for u in versitygw.open_uploads(dst)] == [theirs]  # someone else's: kept
    assert read_mark(versitygw.client, dst, "obj", upload_id) is None
    assert versitygw.keys(dst) == ["obj"]


def test_marked_uploads_of_another_source_are_aborted_and_unmarked_ones_kept(
    versitygw, vgw_buckets, monkeypatch
):
    src, dst = vgw_buckets
    data = make_source(versitygw, src, "stream")
    old = _stop_after_two_parts(versitygw, "stream", src, dst, monkeypatch)
    versitygw.client.put_object(Bucket=src, Key="obj", Body=data[::-1])  # the source changed since
    theirs = versitygw.client.create_multipart_upload(Bucket=dst, Key="obj")["UploadId"]

    with copier_for(versitygw, "stream", MemoryCheckpointStore()) as copier:
        parts = PartCounter(copier, "UploadPart")
        second = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"))

    assert second.status == Status.COPIED, second.reason
    assert second.parts_resumed == 0
    assert sorted(parts.numbers) == list(range(1, PARTS + 1))
    assert versitygw.client.get_object(Bucket=dst, Key="obj")["Body"].read() == data[::-1]
    assert [u["UploadId"] for u in versitygw.open_uploads(dst)] == [theirs]
    assert read_mark(versitygw.client, dst, "obj", old) is None
    assert versitygw.keys(dst) == ["obj"]


def test_a_mark_that_cannot_be_written_does_not_stop_the_copy(versitygw, vgw_buckets) -> None:
    """Marks under a prefix the destination refuses (here: a key too long for S3) cost the
    resume, not the copy, and the run says so once."""
    src, dst = vgw_buckets
    data = make_source(versitygw, src, "stream")
    policy = replace(MODES["stream"]["policy"], marks_prefix="m" * 1100 + "/")

    with Copier(versitygw.endpoint, versitygw.endpoint, policy, memory_limit=PART) as copier:
        result = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"))
        said = copier.degradations

    assert result.status == Status.COPIED, result.reason
    assert versitygw.client.get_object(Bucket=dst, Key="obj")["Body"].read() == data
    assert any("could not be marked" in s for s in said), said


def test_written_mark_names_the_source_and_plan(versitygw, vgw_buckets, monkeypatch) -> None:
    src, dst = vgw_buckets
    make_source(versitygw, src, "stream")
    before = datetime.now(UTC)
    upload_id = _stop_after_two_parts(versitygw, "stream", src, dst, monkeypatch)
    mark = read_mark(versitygw.client, dst, "obj", upload_id)
    assert isinstance(mark, UploadMark)
    assert (mark.source_bucket, mark.source_key, mark.source_size) == (src, "obj", PARTS * PART)
    assert mark.strategy == "stream-multipart" and mark.job_id is None
    assert mark.part_bounds == tuple((n * PART, (n + 1) * PART) for n in range(PARTS))
    assert mark.created >= before.replace(microsecond=0)
    assert versitygw.keys(dst) == [mark_key("obj", upload_id)]
    # write_mark is the engine's only writer: a mark written again is read back the same.
    write_mark(versitygw.client, dst, mark)
    assert read_mark(versitygw.client, dst, "obj", upload_id) == mark


def _put_sha256_parts(client: Any, bucket: str, data: bytes) -> None:
    """A multipart source whose parts carry SHA256 checksums (a COMPOSITE object checksum)."""
    upload = client.create_multipart_upload(Bucket=bucket, Key="obj", ChecksumAlgorithm="SHA256")["UploadId"]
    parts = []
    for number, offset in enumerate(range(0, len(data), PART), start=1):
        response = client.upload_part(
            Bucket=bucket,
            Key="obj",
            UploadId=upload,
            PartNumber=number,
            Body=data[offset : offset + PART],
            ChecksumAlgorithm="SHA256",
        )
        parts.append(
            {"PartNumber": number, "ETag": response["ETag"], "ChecksumSHA256": response["ChecksumSHA256"]}
        )
    client.complete_multipart_upload(
        Bucket=bucket, Key="obj", UploadId=upload, MultipartUpload={"Parts": parts}
    )


@pytest.mark.parametrize("name", ["minio", "versitygw"])
def test_parts_settled_by_the_sources_own_part_checksums_are_not_read(name, request, monkeypatch):
    """MinIO gives the source's part checksums (GetObjectAttributes and HEAD with PartNumber):
    resumed parts are judged without reading them. versitygw gives neither: they are read."""
    versitygw = request.getfixturevalue(name)  # either server
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    data = os.urandom(PARTS * PART)
    _put_sha256_parts(versitygw.client, src, data)
    policy = CopyPolicy(mode="stream", multipart_threshold=PART, checksum_algorithm="SHA256")

    def copier(store: Any) -> Copier:
        return Copier(
            versitygw.endpoint,
            versitygw.endpoint,
            policy,
            part_concurrency=1,
            memory_limit=PART,
            checkpoints=store,
        )

    clock_runs_out_after(monkeypatch, 2)
    with copier(MemoryCheckpointStore()) as first_copier:
        first = first_copier.copy(
            SourceObject(src, "obj"), Target(dst, "obj"), deadline=time.monotonic() + 600
        )
    monkeypatch.undo()
    assert first.status == Status.PENDING, first.reason
    (upload,) = key_uploads(versitygw.client, dst, "obj")
    assert upload.mark.algorithm == "SHA256"
    versitygw.client.upload_part(  # part 2 now holds other bytes: its checksum differs
        Bucket=dst,
        Key="obj",
        UploadId=upload.upload_id,
        PartNumber=2,
        Body=b"y" * PART,
        ChecksumAlgorithm="SHA256",
    )

    reads: list[str] = []
    with copier(MemoryCheckpointStore()) as second_copier:
        second_copier.ctx.source_client.meta.events.register(
            "before-call.s3.GetObject",
            lambda params, **_: reads.append(params["headers"].get("Range", "all")),
        )
        parts = PartCounter(second_copier, "UploadPart")
        second = second_copier.copy(SourceObject(src, "obj"), Target(dst, "obj"))

    assert second.status == Status.COPIED, second.reason
    assert second.parts_resumed == 1  # part 1, proved by the source's own SHA256 of part 1
    assert sorted(parts.numbers) == [2, 3, 4]
    read = (
        (1, 2, 3) if name == "minio" else (0, 1, 1, 2, 3)
    )  # versitygw: parts 1-2 read to check, 2 again to send
    assert sorted(reads) == sorted(f"bytes={n * PART}-{(n + 1) * PART - 1}" for n in read)
    assert versitygw.client.get_object(Bucket=dst, Key="obj")["Body"].read() == data
