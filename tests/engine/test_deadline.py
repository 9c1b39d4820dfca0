"""Deadlines: work not started comes back pending; a multipart copy cut short resumes later
from its checkpoint without copying a finished part again."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from conftest import create_ledger_table
from ferry import (
    Checkpoint,
    Copier,
    CopyPolicy,
    FileCheckpointStore,
    MemoryCheckpointStore,
    SourceObject,
    Status,
    Strategy,
    Target,
    deadline_in,
)
from ferry.engine.parts import multipart
from ferry.engine.records.checkpoints import copy_id
from ferry.engine.records.upload_marks import mark_key

MiB = 1024 * 1024
PART = 5 * MiB
PARTS = 4


def put_multipart(client: Any, bucket: str, key: str, data: bytes, part_size: int) -> None:
    upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    parts = []
    for number, offset in enumerate(range(0, len(data), part_size), start=1):
        response = client.upload_part(
            Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=data[offset : offset + part_size]
        )
        parts.append({"PartNumber": number, "ETag": response["ETag"]})
    client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
    )


class PartCounter:
    """Part numbers the destination client was asked to upload (UploadPart or UploadPartCopy)."""

    def __init__(self, copier: Copier, operation: str) -> None:
        self.numbers: list[int] = []
        self._lock = threading.Lock()
        copier.ctx.dest_client.meta.events.register(f"before-call.s3.{operation}", self._count)

    def _count(self, params: dict[str, Any], **_: Any) -> None:
        with self._lock:
            self.numbers.append(int(params["query_string"]["partNumber"]))


def clock_runs_out_after(monkeypatch: pytest.MonkeyPatch, parts: int) -> None:
    """The multipart loop reads the clock twice before starting each part (before and after
    waiting for a slot): let `parts` start in time, then jump an hour ahead, so the deadline
    lands mid-copy on the same part every run."""
    real = time.monotonic
    reads = 0
    lock = threading.Lock()

    def monotonic() -> float:
        nonlocal reads
        with lock:
            reads += 1
            late = reads > 2 * parts
        return real() + (3600 if late else 0)

    def due(deadline: float | None, needed: float = 0.0) -> bool:  # engine.run.deadlines.due on this clock
        return deadline is not None and monotonic() + needed >= deadline

    monkeypatch.setattr(multipart, "due", due)


# Stream: one part's bytes in memory at a time. Server-side: one UploadPartCopy at a time; the
# source is multipart and CRC32C is asked for, so one CopyObject cannot prove it and the engine
# copies its four parts with UploadPartCopy.
MODES = {
    "stream": dict(
        policy=CopyPolicy(mode="stream", part_size=PART, multipart_threshold=PART),
        operation="UploadPart",
        strategy=Strategy.STREAM_MULTIPART,
        source="single",
        verified_by="crc64nvme (full object)",  # resumed parts' CRCs come from the checkpoint
    ),
    "server-side": dict(
        policy=CopyPolicy(mode="server-side", multipart_threshold=PART, checksum_algorithm="CRC32C"),
        operation="UploadPartCopy",
        strategy=Strategy.COPY_MULTIPART,
        source="multipart",
        verified_by="etag",  # the layout is reproduced, so the ETags match
    ),
}


def copier_for(server: Any, mode: str, store: Any) -> Copier:
    return Copier(
        server.endpoint,
        server.endpoint,
        MODES[mode]["policy"],
        part_concurrency=1,
        memory_limit=PART,
        checkpoints=store,
    )


def make_source(server: Any, bucket: str, mode: str) -> bytes:
    data = os.urandom(PARTS * PART)
    if MODES[mode]["source"] == "multipart":
        put_multipart(server.client, bucket, "obj", data, PART)
    else:
        server.client.put_object(Bucket=bucket, Key="obj", Body=data)
    return data


def test_batch_past_its_deadline_starts_nothing(versitygw, vgw_buckets) -> None:
    src, dst = vgw_buckets
    pairs = []
    for n in range(5):
        versitygw.client.put_object(Bucket=src, Key=f"k{n}", Body=b"x" * (n + 1))
        pairs.append((SourceObject(src, f"k{n}"), Target(dst, f"k{n}")))

    with Copier(versitygw.endpoint, versitygw.endpoint) as copier:
        results = copier.copy_batch(pairs, deadline=time.monotonic() - 1)

    assert [r.source_key for r in results] == [f"k{n}" for n in range(5)]
    assert {r.status for r in results} == {Status.PENDING}
    assert all(r.reason.startswith("not started") for r in results)
    assert versitygw.keys(dst) == []


@pytest.mark.parametrize("mode", list(MODES))
def test_copy_cut_by_its_deadline_resumes_without_copying_a_part_twice(
    versitygw, vgw_buckets, monkeypatch, mode
) -> None:
    src, dst = vgw_buckets
    data = make_source(versitygw, src, mode)
    operation = MODES[mode]["operation"]
    store = MemoryCheckpointStore()
    checkpoint_id = copy_id(src, "obj", None, dst, "obj")

    clock_runs_out_after(monkeypatch, 2)
    with copier_for(versitygw, mode, store) as copier:
        first_parts = PartCounter(copier, operation)
        first = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"), deadline=time.monotonic() + 600)

    assert first.status == Status.PENDING, first.reason
    assert first.strategy == MODES[mode]["strategy"]
    assert first.reason == f"deadline: checkpointed 2 of {PARTS} parts"
    assert sorted(first_parts.numbers) == [1, 2]
    checkpoint = store.load(checkpoint_id)
    assert checkpoint is not None
    assert sorted(checkpoint.parts) == [1, 2]
    assert [u["UploadId"] for u in versitygw.open_uploads(dst)] == [checkpoint.upload_id]
    assert versitygw.keys(dst) == [mark_key("obj", checkpoint.upload_id)]  # the open upload's mark only

    monkeypatch.undo()
    with copier_for(versitygw, mode, store) as copier:
        second_parts = PartCounter(copier, operation)
        second = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"))

    assert second.status == Status.COPIED, second.reason
    assert second.parts_resumed == 2
    assert second.verified_by == MODES[mode]["verified_by"]
    assert sorted(second_parts.numbers) == [3, 4]  # the parts finished before the deadline were kept
    assert second.bytes == len(data)
    assert versitygw.client.get_object(Bucket=dst, Key="obj")["Body"].read() == data
    assert store.load(checkpoint_id) is None
    assert len(store) == 0
    assert versitygw.open_uploads(dst) == []
    assert versitygw.keys(dst) == ["obj"]  # the mark went with the upload


def test_deadline_without_a_checkpoint_store_aborts_the_upload(versitygw, vgw_buckets, monkeypatch) -> None:
    src, dst = vgw_buckets
    make_source(versitygw, src, "stream")

    clock_runs_out_after(monkeypatch, 2)
    with copier_for(versitygw, "stream", None) as copier:
        result = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"), deadline=time.monotonic() + 600)

    assert result.status == Status.FAILED  # nothing could resume it, so nothing is kept
    assert "deadline reached" in result.reason
    assert versitygw.open_uploads(dst) == []
    assert versitygw.keys(dst) == []


def test_checkpoint_of_a_source_that_changed_is_discarded(versitygw, vgw_buckets, monkeypatch) -> None:
    src, dst = vgw_buckets
    make_source(versitygw, src, "stream")
    store = MemoryCheckpointStore()

    clock_runs_out_after(monkeypatch, 2)
    with copier_for(versitygw, "stream", store) as copier:
        first = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"), deadline=time.monotonic() + 600)
    assert first.status == Status.PENDING, first.reason
    old_upload = store.load(copy_id(src, "obj", None, dst, "obj")).upload_id

    new_data = os.urandom(PARTS * PART)  # same size, new ETag
    versitygw.client.put_object(Bucket=src, Key="obj", Body=new_data)
    monkeypatch.undo()
    with copier_for(versitygw, "stream", store) as copier:
        parts = PartCounter(copier, "UploadPart")
        second = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"))

    assert second.status == Status.COPIED, second.reason
    assert second.parts_resumed == 0
    assert sorted(parts.numbers) == [1, 2, 3, 4]  # started again from the first part
    assert versitygw.client.get_object(Bucket=dst, Key="obj")["Body"].read() == new_data
    assert old_upload not in [u["UploadId"] for u in versitygw.open_uploads(dst)]
    assert versitygw.open_uploads(dst) == []
    assert len(store) == 0


def test_file_checkpoint_store_round_trips_a_checkpoint(tmp_path) -> None:
    checkpoint = Checkpoint(
        copy_id=copy_id("src", "a/b.bin", "v1", "dst", "a/b.bin"),
        upload_id="upload-1",
        strategy=str(Strategy.STREAM_MULTIPART),
        source_etag="0123456789abcdef0123456789abcdef-3",
        source_size=3 * PART,
        algorithm="CRC32C",
        part_bounds=[(0, PART), (PART, 2 * PART), (2 * PART, 3 * PART)],
        parts={
            1: {"etag": '"e1"', "size": PART, "checksums": {"CRC32C": "AAAAAA=="}, "md5": None},
            3: {"etag": '"e3"', "size": PART, "checksums": {"CRC32C": "BBBBBB=="}, "md5": "00ff"},
        },
    )
    FileCheckpointStore(tmp_path).save(checkpoint)

    reopened = FileCheckpointStore(tmp_path)  # another process, later
    assert reopened.load(checkpoint.copy_id) == checkpoint
    assert [p.name for p in tmp_path.iterdir()] == [f"{checkpoint.copy_id}.json"]  # no temporary file left
    assert reopened.load("another-copy") is None

    reopened.delete(checkpoint.copy_id)
    assert reopened.load(checkpoint.copy_id) is None
    reopened.delete(checkpoint.copy_id)  # deleting twice is fine


def test_copy_resumes_from_a_checkpoint_file_written_by_an_earlier_run(
    versitygw, vgw_buckets, monkeypatch, tmp_path
):
    src, dst = vgw_buckets
    data = make_source(versitygw, src, "stream")

    clock_runs_out_after(monkeypatch, 3)
    with copier_for(versitygw, "stream", FileCheckpointStore(tmp_path)) as copier:
        first = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"), deadline=time.monotonic() + 600)
    assert first.status == Status.PENDING, first.reason
    assert len(list(tmp_path.glob("*.json"))) == 1

    monkeypatch.undo()
    with copier_for(versitygw, "stream", FileCheckpointStore(tmp_path)) as copier:
        parts = PartCounter(copier, "UploadPart")
        second = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"))

    assert second.status == Status.COPIED, second.reason
    assert (second.parts_resumed, parts.numbers) == (3, [4])
    assert versitygw.client.get_object(Bucket=dst, Key="obj")["Body"].read() == data
    assert list(tmp_path.iterdir()) == []
    assert versitygw.open_uploads(dst) == []


def test_object_that_cannot_finish_before_the_deadline_is_not_started(versitygw, vgw_buckets) -> None:
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="k", Body=b"x" * 1024)
    with Copier(versitygw.endpoint, versitygw.endpoint) as copier:
        # Half a second left: less than the cautious estimate of any single request.
        result = copier.copy(SourceObject(src, "k"), Target(dst, "k"), deadline=deadline_in(0.5))
        later = copier.copy(SourceObject(src, "k"), Target(dst, "k"), deadline=deadline_in(60))
    assert (result.status, result.reason) == (
        Status.PENDING,
        "not started: would not finish before the deadline",
    )
    assert later.status == Status.COPIED


def test_a_copy_object_is_budgeted_at_a_cross_region_rate_not_100_mib_per_second(
    versitygw, vgw_buckets
) -> None:
    """One CopyObject of up to 5 GiB cannot be checkpointed, so the deadline gate starts it only
    if it can finish. Across regions a CopyObject can run at tens of MiB/s: with 200 s left, a
    listed 5 GiB object (1 + 5120/100 = 52 s at the old 100 MiB/s) must not be started at the
    default rate, and is started when the caller says its copies run at 1 GiB/s."""
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="k", Body=b"x" * 1024)
    listed = SourceObject(src, "k", size=5 * 1024 * MiB, etag='"0123456789abcdef"', storage_class="STANDARD")
    policy = CopyPolicy(mode="server-side", skip_existing=False, multipart_threshold=5 * 1024 * MiB)

    with Copier(versitygw.endpoint, versitygw.endpoint, policy) as copier:
        gated = copier.copy(listed, Target(dst, "k"), deadline=deadline_in(200))
    assert (gated.status, gated.reason) == (
        Status.PENDING,
        "not started: would not finish before the deadline",
    )
    assert gated.handed_over

    fast = 1024 * MiB
    with Copier(versitygw.endpoint, versitygw.endpoint, policy, single_request_rate=fast) as copier:
        started = copier.copy(listed, Target(dst, "k"), deadline=deadline_in(200))
    assert started.reason != "not started: would not finish before the deadline", started
    assert not started.handed_over


@pytest.mark.parametrize("mode", list(MODES))
def test_a_checkpoint_that_cannot_be_saved_stops_the_copy_and_leaves_no_upload(
    versitygw, vgw_buckets, motoserver, monkeypatch, mode
) -> None:
    """The ledger refuses the checkpoint (here its table is deleted mid-copy, as a deleted
    stack's is): nothing could resume the upload, so the copy fails saying why and the upload
    and its mark go, whatever the strategy."""
    import boto3

    from ferry.pipeline.ledger.dynamodb import DynamoCheckpointStore

    src, dst = vgw_buckets
    make_source(versitygw, src, mode)
    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=motoserver.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    table = f"ledger-{mode}"
    create_ledger_table(dynamodb, table)
    store = DynamoCheckpointStore(dynamodb, table)
    deleted = []

    def delete_the_table(**_: Any) -> None:
        if not deleted:
            deleted.append(dynamodb.delete_table(TableName=table))

    dynamodb.meta.events.register("before-call.dynamodb.PutItem", delete_the_table)
    clock_runs_out_after(monkeypatch, 2)
    with copier_for(versitygw, mode, store) as copier:
        result = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"), deadline=time.monotonic() + 600)

    assert result.status == Status.FAILED, result.reason
    assert result.reason.startswith("the checkpoint of 2 of 4 parts could not be saved"), result.reason
    assert "ResourceNotFoundException" in result.reason
    assert "the upload was aborted" in result.reason
    assert versitygw.open_uploads(dst) == []
    assert versitygw.keys(dst) == []


def test_a_server_side_copy_over_5_gib_starts_when_one_part_fits_before_the_deadline(
    virtual_s3, monkeypatch
) -> None:
    """Above 5 GiB a server-side copy is UploadPartCopy in parts checkpointed as they land: its
    longest request is one part (here 512 MiB, 33 s at the cautious 16 MiB/s), not a 5 GiB
    CopyObject (321 s), so with 90 s left it starts and checkpoints what it finished."""
    src, dst = virtual_s3.bucket("src"), virtual_s3.bucket("dst")
    virtual_s3.make(src, "obj", "seed-6gib", [512 * MiB] * 12)
    clock_runs_out_after(monkeypatch, 3)
    store = MemoryCheckpointStore()
    with Copier(
        virtual_s3.endpoint,
        virtual_s3.endpoint,
        CopyPolicy(mode="server-side"),
        part_concurrency=1,
        checkpoints=store,
    ) as copier:
        result = copier.copy(SourceObject(src, "obj"), Target(dst, "obj"), deadline=time.monotonic() + 90)
    assert result.status == Status.PENDING, result.reason
    assert result.reason == "deadline: checkpointed 3 of 12 parts"
    assert sorted(store.load(copy_id(src, "obj", None, dst, "obj")).parts) == [1, 2, 3]


class CountingStore(MemoryCheckpointStore):
    """A checkpoint store that counts its loads: a DynamoDB checkpoint of 10,000 parts is
    eleven items read, paid at every pass."""

    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    def load(self, copy_id: str) -> Checkpoint | None:
        self.loads += 1
        return super().load(copy_id)


def test_a_server_side_multipart_copy_reads_its_checkpoint_once_a_pass(
    versitygw, vgw_buckets, monkeypatch
) -> None:
    """Without an algorithm asked for, a server-side multipart copy first asks whether a saved
    checkpoint was made without part checksums; the upload then resumes from that same
    checkpoint, not from a second read of it."""
    src, dst = vgw_buckets
    data = os.urandom(PARTS * PART)
    # Parts with SHA-1 checksums: the object's checksum is COMPOSITE, which no CopyObject can
    # prove, so the engine copies it part by part to keep its layout (and its ETag).
    upload = versitygw.client.create_multipart_upload(Bucket=src, Key="obj", ChecksumAlgorithm="SHA1")
    parts = []
    for number, offset in enumerate(range(0, len(data), PART), start=1):
        sent = versitygw.client.upload_part(
            Bucket=src, Key="obj", UploadId=upload["UploadId"], PartNumber=number,
            Body=data[offset : offset + PART], ChecksumAlgorithm="SHA1",
        )  # fmt: skip
        parts.append({"PartNumber": number, "ETag": sent["ETag"], "ChecksumSHA1": sent["ChecksumSHA1"]})
    versitygw.client.complete_multipart_upload(
        Bucket=src, Key="obj", UploadId=upload["UploadId"], MultipartUpload={"Parts": parts}
    )
    store = CountingStore()
    policy = CopyPolicy(mode="server-side", multipart_threshold=PART)

    def copier() -> Copier:
        return Copier(
            versitygw.endpoint,
            versitygw.endpoint,
            policy,
            part_concurrency=1,
            memory_limit=PART,
            checkpoints=store,
        )

    clock_runs_out_after(monkeypatch, 2)
    with copier() as first_copier:
        first = first_copier.copy(
            SourceObject(src, "obj"), Target(dst, "obj"), deadline=time.monotonic() + 600
        )
    assert first.status == Status.PENDING, first.reason
    assert first.strategy == Strategy.COPY_MULTIPART
    assert store.loads == 1

    monkeypatch.undo()
    with copier() as second_copier:
        second = second_copier.copy(SourceObject(src, "obj"), Target(dst, "obj"))
    assert second.status == Status.COPIED, second.reason
    assert second.parts_resumed == 2
    assert store.loads == 2
