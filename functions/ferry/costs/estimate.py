"""What a pipeline job will cost and how long it will take, before it runs.

The model follows what the pipeline does, request by request (functions/ferry/engine/ and
functions/ferry/pipeline/batches.py), for a source listed with ListObjectsV2:

- Batches: the Distributed Map's ItemBatcher takes up to `max_items_per_batch` items and at
  most `max_input_bytes_per_batch` of item JSON; one CopyBatch pass per batch, more passes
  when the copy outlasts a Lambda (15 minutes less the deadline margin).
- Per object, as the engine copies it (see `object_requests`): a listed single-part object in a
  class that is never archived is copied from the listing's evidence (one CopyObject, or one
  GET and one PutObject); a multipart source gets a HEAD, two HEADs that learn its part layout
  and one request per part in that layout, unless a full-object CRC proves a single request;
  tags are read with GetObjectTagging where the HEAD or GET cannot say there are none (S3
  sends a tag count only "if any": GetObjectOutput.TagCount).
- Skip-existing: one ListObjectsV2 of the destination per batch (the batch's key range), a
  HEAD per key for a batch under 8 objects and for each large object.
- Per batch pass: a report PutObject and a ledger marker (PutItem); the job item is read once
  per worker process;
  per multipart copy: a checkpoint read and delete, and per hand-over a save and a resume
  (HEADs, tags, ListParts); a large object on Fargate hands over every 90 seconds.
- Step Functions: the transitions of the normal path of both state machines (the numbers
  below are tied to statemachine/*.asl.json by tests/test_estimate.py).

Assumptions, stated in the output: the destination holds none of the objects (everything is
copied); sources above `source_multipart_threshold` were uploaded in parts of
`source_part_size` (the AWS CLI's and boto3's 8 MiB) and carry MD5 ETags, no stored checksum
(objects written before S3's default CRC64NVME), where a listing does not say; throughput per worker for small objects copied server-side
from the CPU one worker was measured to spend per object (`make bench-worker-cost`), the rest
assumed; nothing measured on AWS (`Rates`).

This module is vocabulary (imported by the CLI): it does not import the pipeline.
`PipelineShape`'s defaults equal `PipelineSettings`' (a test keeps them equal).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ferry.costs import prices
from ferry.counts import plural
from ferry.errors import ConfigError
from ferry.limits import (
    DEFAULT_MULTIPART_THRESHOLD,
    DEFAULT_OBJECTS_PER_DAY,
    DEFAULT_STREAM_PART_SIZE,
    MAX_SINGLE_COPY,
    GiB,
    KiB,
    MiB,
    choose_part_size,
    parse_size,
)
from ferry.listed_items import select
from ferry.models import ARCHIVE_CLASSES
from ferry.quotas.lambda_concurrency import (
    DEFAULT_ACCOUNT_CONCURRENCY,
    AccountConcurrency,
    cap_max_concurrency,
    reservations_refused,
)

# Storage classes whose objects the engine copies from the listing's evidence (engine/proofs/source.py
# NEVER_ARCHIVED; a test keeps the two equal). Others get a HEAD first.
LISTING_CLASSES = frozenset(
    {"STANDARD", "STANDARD_IA", "ONEZONE_IA", "REDUCED_REDUNDANCY", "GLACIER_IR", "EXPRESS_ONEZONE"}
)
GB = 1000**3  # AWS bills data in GB (of 2^30 bytes on the bill; the difference is ignored here)

# Step Functions state transitions, from statemachine/*.asl.json (tests/test_estimate.py derives
# each from the ASL and compares): the parent's normal path (Prepare, HowToList, CopyPrefix,
# Finalize, DidEveryObjectSucceed, JobSucceeded); the child's normal path, a batch settled in one
# pass (CopyBatch, which takes the Map's input as it comes and ends the child), plus the one
# transition the Distributed Map is charged per child it starts. A pass that leaves work raises
# FerryHandOver, whose Catch costs: per further pass (ResumeHandOver, WhatIsLeft, NextPass,
# CopyBatch); per batch with large objects (ResumeHandOver, WhatIsLeft, CopyLargeObjects,
# BatchDone); per large object (its own child execution, which CopyLargeObjects, a Distributed
# Map, starts, then its CopyLargeObject). Each such hand-over is also one more invocation of
# the CopyBatch function (ResumeHandOver), see RESUME_SECONDS.
PARENT_TRANSITIONS = 6
CHILD_START_TRANSITIONS = 1
CHILD_TRANSITIONS = 1
EXTRA_PASS_TRANSITIONS = 4
LARGE_BATCH_TRANSITIONS = 4
LARGE_OBJECT_TRANSITIONS = 2

LAMBDA_TIMEOUT_SECONDS = 900  # CopyBatch (cdk/ferry_cdk/stack.py: 15 minutes)
# Assumed, not measured on AWS: the wall time a pass spends outside its copies' CPU, in sequence
# (the first window's destination listing, the report PUT, the ledger's marker).
PASS_OVERHEAD_SECONDS = 0.5
# Assumed, not measured on AWS: a ResumeHandOver invocation (a consistent GetItem of the pass's
# marker and the handler around it), billed as CopyBatch duration.
RESUME_SECONDS = 0.1
# CPU seconds one CopyBatch worker spends per small object copied server-side, whole passes
# included (listing, copies, report, ledger): measured by `make bench-worker-cost` on versitygw
# and MinIO (bench/results/worker_cost.md; the worse of the two). A worker whose threads hide
# S3's latency is CPU-bound; one Python process uses at most one vCPU (the GIL), which Lambda
# gives at ONE_VCPU_MB and proportionally less below.
MEASURED_CPU_PER_SMALL_OBJECT = 0.00038
ONE_VCPU_MB = 1769
FARGATE_START_SECONDS = 60  # assumed: task start-up (and Fargate's one-minute minimum)
FARGATE_PASS_SECONDS = 90  # batches.copy_large_object: a checkpoint every pass (Spot's SIGTERM)
REPORT_LINE_BYTES = 400  # assumed: one object's line in a batch report
CHECKPOINT_PART_BYTES = 150  # a part's entry in a saved checkpoint (upload id, etag, checksum)
MARKER_BYTES = 600  # a batch marker item (counts, hand-over, attempt, report key)
DEST_LISTING_MIN_WINDOW = 8  # engine/compare/dest_listing.MIN_WINDOW (a test keeps them equal)

# What bounds one stack's rate, at the defaults (quotas an account may raise are marked so):
S3_WRITES_PER_PREFIX = 3_500  # PUT/COPY/POST/DELETE per second per partitioned prefix (S3)
S3_READS_PER_PREFIX = 5_500  # GET/HEAD per second per partitioned prefix (S3)
MAP_RUN_MAX_CHILDREN = 10_000  # child executions a Distributed Map runs at once, at most
# Lambda's concurrency is the account's quota (`LambdaQuota`): the default where it is not
# known; new accounts get less, and AWS raises it on request.
# DynamoDB: 1,000 write units per second per partition; a job's markers share its partition
# key (JOB#<id>), so the ledger is counted as one partition (adaptive capacity may split it).
LEDGER_PARTITION_WRU = 1_000

PUT_CLASS = frozenset(
    {
        "CopyObject",
        "PutObject",
        "CreateMultipartUpload",
        "UploadPartCopy",
        "UploadPart",
        "CompleteMultipartUpload",
        "ListObjectsV2",
        "ListParts",
        "ListMultipartUploads",
    }
)
GET_CLASS = frozenset({"GetObject", "HeadObject", "GetObjectTagging"})
DESTINATION_WRITES = frozenset(
    {
        "CopyObject",
        "PutObject",
        "CreateMultipartUpload",
        "UploadPartCopy",
        "UploadPart",
        "CompleteMultipartUpload",
    }
)


@dataclass(frozen=True)
class PipelineShape:
    """The deployed pipeline's settings the cost depends on (the `ferry` context of cdk.json)."""

    max_items_per_batch: int = 10_000
    max_input_bytes_per_batch: int = 150 * KiB
    max_concurrency: int = 100
    copy_reserved_concurrency: int = 0
    record_failure_reserved_concurrency: int = 0
    lambda_memory_mb: int = 1769
    lambda_architecture: str = "arm64"
    large_object_threshold: int = 10 * GiB
    deadline_margin_seconds: int = 90
    fargate_cpu: int = 2048
    fargate_memory_mb: int = 4096
    fargate_spot: bool = True
    fargate_max_concurrency: int = 2

    @classmethod
    def from_context(cls, data: Mapping[str, Any]) -> PipelineShape:
        """The fields above from a `ferry` context (sizes may be written `10GiB`); other keys
        are the pipeline's business and are ignored here (`cdk synth` checks them)."""
        values: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            if name not in data:
                continue
            value = data[name]
            if name in ("max_input_bytes_per_batch", "large_object_threshold") and isinstance(value, str):
                value = parse_size(value)
            values[name] = value
        return cls(**values)

    @classmethod
    def from_cdk_json(cls, path: str) -> PipelineShape:
        try:
            with open(path, encoding="utf-8") as file:
                context = json.load(file)["context"]["ferry"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ConfigError(
                f"cannot read the 'ferry' context of {path!r} ({error}): name a cdk.json with --settings"
            ) from error
        return cls.from_context(context)

    @property
    def usable_pass_seconds(self) -> float:
        return LAMBDA_TIMEOUT_SECONDS - self.deadline_margin_seconds


@dataclass(frozen=True)
class LambdaQuota:
    """The account's Lambda concurrency the estimate is made for, and where it comes from:
    read from the account (GetAccountSettings), given by the user, or the default assumed
    (`why_not` says why the account's could not be read)."""

    account: AccountConcurrency = AccountConcurrency(DEFAULT_ACCOUNT_CONCURRENCY, DEFAULT_ACCOUNT_CONCURRENCY)
    source: str = "default"  # "account", "given" or "default"
    where: str = ""  # the region it was read in
    why_not: str | None = None

    @property
    def label(self) -> str:
        said = {"account": "the account's quota", "given": "as given"}.get(self.source, "the account default")
        return f"{self.account.limit:,}, {said}"

    @property
    def note(self) -> str:
        limit, unreserved = self.account.limit, self.account.unreserved
        if self.source == "account":
            where = f" in {self.where}" if self.where else ""
            return (
                f"Lambda concurrency: the account's quota{where}, {limit:,} ({unreserved:,} unreserved), "
                "read with Lambda GetAccountSettings"
            )
        if self.source == "given":
            return f"Lambda concurrency: {limit:,}, as given (--lambda-concurrency)"
        why = (
            f"the account's could not be read ({self.why_not})"
            if self.why_not
            else "the account's was not read"
        )
        return (
            f"Lambda concurrency: the default quota, {limit:,}, assumed: {why}; new accounts get as little "
            "as 10 (give --lambda-concurrency N)"
        )


@dataclass(frozen=True)
class Rates:
    """Objects and bytes per second one worker with a whole vCPU copies: (slow, fast). Small
    objects copied server-side are bound by the worker's CPU: fast is the rate the CPU measured
    locally allows (MEASURED_CPU_PER_SMALL_OBJECT), slow half of it for what was not measured
    (S3's latency on AWS, TLS). Streamed objects and bytes per second are assumed, not measured.
    The expected case is their geometric mean."""

    server_side_objects: tuple[float, float] = (
        0.5 / MEASURED_CPU_PER_SMALL_OBJECT,
        1.0 / MEASURED_CPU_PER_SMALL_OBJECT,
    )
    stream_objects: tuple[float, float] = (15.0, 50.0)
    server_side_bytes: tuple[float, float] = (100.0 * MiB, 400.0 * MiB)
    stream_bytes: tuple[float, float] = (40.0 * MiB, 120.0 * MiB)
    measured: bool = False


@dataclass(frozen=True)
class Assumptions:
    """How the job copies and what the source looks like."""

    mode: str = "auto"  # auto copies server-side on one endpoint (within AWS: always)
    cross_region: bool = False
    storage_class: str | None = None  # destination class asked for (--storage-class)
    restore: str | None = None  # bulk | standard | expedited: archived objects restored first
    preserve_tags: bool = True
    skip_existing: bool = True
    source_part_size: int = 8 * MiB
    source_multipart_threshold: int = 8 * MiB
    # Objects written since S3's default checksums (CRC64NVME, FULL_OBJECT) carry one; older
    # ones only an MD5 ETag. A multipart source with a full-object CRC is copied in one
    # CopyObject (up to 5 GiB) or one GET and PUT (streamed, up to the multipart threshold).
    source_full_checksum: bool = False
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD  # the engine's, for streaming
    memory_limit: int = 1769 * MiB // 3  # a CopyBatch Lambda's (PipelineSettings.lambda_memory_limit)
    # On AWS every object is encrypted (SSE-S3 at least) and CopyObject's answer proves a copy
    # made from the listing. S3-compatible servers that report no encryption get a HEAD after.
    head_after_listed_copy: bool = False

    @property
    def server_side(self) -> bool:
        return self.mode in ("auto", "server-side")


def _parts(size: int, part_size: int) -> int:
    return max(1, math.ceil(size / part_size))


def object_requests(
    size: int,
    storage_class: str,
    a: Assumptions,
    source_parts: int | None = None,
    full_checksum: bool | None = None,
) -> Counter[str]:
    """The S3 requests the engine sends to copy one object, by operation name.

    `source_parts`: the source's part count where the listing's ETag tells it (1 for a plain
    ETag); None to assume it from `a` (source_multipart_threshold, source_part_size). Follows
    engine/strategies/copier.py (_evidence, _decide), server_side.py and streaming.py for a source from a
    listing, a destination without the object, and no deadline hand-over. `full_checksum`:
    whether the source stores a full-object CRC (the listing's ChecksumType), None to assume.
    """
    crc = a.source_full_checksum if full_checksum is None else full_checksum
    if source_parts is None:
        multipart = size > a.source_multipart_threshold
        source_parts = _parts(size, choose_part_size(size, a.source_part_size)) if multipart else 1
    c: Counter[str] = Counter()
    if storage_class in ARCHIVE_CLASSES:
        c["HeadObject"] += 1  # never copied from the listing: the HEAD says whether it is restored
        if a.restore is None:
            return c  # skipped: needs restore
        c["RestoreObject"] += 1  # this run requests the restore; a later run copies it
        c["HeadObject"] += 1
        c.update(_copy_requests(size, a, source_parts, crc, listed=False))
        return c
    listed = storage_class in LISTING_CLASSES
    c.update(_copy_requests(size, a, source_parts, crc, listed=listed))
    if c["CreateMultipartUpload"]:
        c.update(mark_requests(a))
    return c


def mark_requests(a: Assumptions) -> Counter[str]:
    """What a multipart copy adds to resume after a crash (engine/records/upload_marks.py): one
    ListMultipartUploads of its key (two server-side: one asks whether a crashed run's upload
    was made without part checksums), its mark written (PutObject) and deleted at the end (by
    its version id: the same one DeleteObject). Reading a destination bucket's Object Lock
    configuration, once per bucket and run, is not a per-object cost."""
    return Counter({"ListMultipartUploads": 2 if a.server_side else 1, "PutObject": 1, "DeleteObject": 1})


def _copy_requests(size: int, a: Assumptions, parts: int, crc: bool, *, listed: bool) -> Counter[str]:
    c: Counter[str] = Counter()
    tags = 1 if a.preserve_tags else 0
    if parts > 1 and crc:
        # A full-object CRC proves a copy made in any parts: one request where one can do it
        # (server_side._single_request_is_verifiable, streaming._layout_proves).
        if a.server_side and size <= MAX_SINGLE_COPY:
            c.update({"HeadObject": 1, "CopyObject": 1})
            return c
        if not a.server_side and size <= a.multipart_threshold:
            c.update({"HeadObject": 1, "GetObject": 1, "PutObject": 1, "GetObjectTagging": tags})
            return c
    if parts <= 1:
        if a.server_side:
            if not listed:
                c["HeadObject"] += 1
            c["CopyObject"] += 1
            if listed and a.head_after_listed_copy:
                c["HeadObject"] += 1
            return c
        if not listed or size > a.multipart_threshold:
            c["HeadObject"] += 1
        # streaming.single_put_limit: a source proved only by its MD5 ETag goes in one PutObject
        # up to the memory limit, so that its copy keeps that ETag.
        single_put = max(a.multipart_threshold, min(a.memory_limit, MAX_SINGLE_COPY)) if not crc else 0
        if size <= max(a.multipart_threshold, single_put):
            c.update({"GetObject": 1, "PutObject": 1, "GetObjectTagging": tags})
            return c
        uniform = _parts(size, choose_part_size(size, DEFAULT_STREAM_PART_SIZE))  # uniform parts
        c.update({"CreateMultipartUpload": 1, "GetObject": uniform, "UploadPart": uniform})
        c.update({"CompleteMultipartUpload": 1, "GetObjectTagging": tags})
        return c
    # A multipart source: HEAD, then its layout (HEAD of part 1 and of the last part), then one
    # request per part in that layout, so the copy's ETag proves it.
    c.update(
        {"HeadObject": 3, "CreateMultipartUpload": 1, "CompleteMultipartUpload": 1, "GetObjectTagging": tags}
    )
    if a.server_side:
        c["UploadPartCopy"] += parts
    else:
        c.update({"GetObject": parts, "UploadPart": parts})
    return c


def resume_requests(per_object: Counter[str], a: Assumptions) -> Counter[str]:
    """What each later pass of a handed-over multipart copy sends again before its next part:
    the source's HEAD and layout, its tags, a HEAD of the destination (skip-existing, a single
    object) and ListParts of the checkpointed upload (multipart.Upload._adopt)."""
    parts = per_object["UploadPartCopy"] + per_object["UploadPart"]
    c: Counter[str] = Counter({"HeadObject": 3, "ListParts": math.ceil(parts / 1000)})
    if a.preserve_tags:
        c["GetObjectTagging"] += 1
    if a.skip_existing:
        c["HeadObject"] += 1
    return c


def item_json_bytes(key: str | int, size: int, storage_class: str) -> int:
    """Bytes of one item as the ItemBatcher measures it: the `s3:listObjectsV2` reader's item
    (input-output-itemreader.html: `Etag` with its quotes, LastModified in epoch seconds) as
    CopyPrefix's ItemSelector renames it (ferry.listed_items), compact UTF-8 JSON."""
    key_text = key if isinstance(key, str) else "k" * key
    item = {
        "Etag": '"' + "0" * 32 + '"',
        "Key": key_text,
        "LastModified": 1668699881,
        "Size": size,
        "StorageClass": storage_class,
    }
    return _json_bytes(select(item))


def _json_bytes(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


# The child's input around its items: `{"Items":[...],"BatchInput":{"job":{...}}}` as the
# ItemBatcher builds it from the ASL's BatchInput, for a job id of ASSUMED_JOB_ID_LENGTH
# characters (the execution's name: a UUID unless one is given).
ASSUMED_JOB_ID_LENGTH = 36
BATCH_WRAPPER_BYTES = _json_bytes(
    {
        "Items": [],
        "BatchInput": {
            "job": {"job_id": "0" * ASSUMED_JOB_ID_LENGTH, "limits": {"large_object_concurrency": 2}}
        },
    }
)


# -- the workload: a bounded histogram, never a list of objects ---------------------------------

BINS_PER_DOUBLING = 8


def _bin(size: int) -> int:
    return -1 if size <= 0 else int(math.log2(size) * BINS_PER_DOUBLING)


@dataclass
class Bin:
    objects: int = 0
    bytes: int = 0
    item_bytes: int = 0
    parts: int = 0  # source parts, summed, where the listing's ETags tell them

    @property
    def mean_parts(self) -> int:
        return max(1, round(self.parts / self.objects)) if self.objects else 1

    @property
    def mean_size(self) -> int:
        return round(self.bytes / self.objects) if self.objects else 0


@dataclass
class Workload:
    """Objects by (storage class, size bin, layout): eight bins per doubling of size, so memory
    is bounded by the classes times ~700 bins whatever the number of objects. Layout is
    "single" or "multipart" where a listing's ETag says (`-N`), "assumed" otherwise."""

    bins: dict[tuple[str, int, str], Bin] = field(default_factory=dict)

    def add(
        self,
        size: int,
        storage_class: str | None = None,
        key: str | int = 60,
        count: int = 1,
        etag: str | None = None,
        full_checksum: bool | None = None,
    ) -> None:
        cls = storage_class or "STANDARD"
        parts = _etag_parts(etag)
        layout = (
            "assumed" if parts is None else ("multipart" if parts > 1 or "-" in (etag or "") else "single")
        )
        if full_checksum is not None:
            layout += "+crc" if full_checksum else "+md5"
        entry = self.bins.setdefault((cls, _bin(size), layout), Bin())
        entry.objects += count
        entry.bytes += size * count
        entry.item_bytes += item_json_bytes(key, size, cls) * count
        entry.parts += (parts or 0) * count

    def add_listed(self, item: Mapping[str, Any]) -> None:
        """One ListObjectsV2 `Contents` entry: size, class, key, ETag (its `-N` part count) and,
        where the endpoint lists it, the checksum type (FULL_OBJECT: a full-object CRC)."""
        checksum_type = item.get("ChecksumType")
        full = None if checksum_type is None else checksum_type == "FULL_OBJECT"
        self.add(
            int(item.get("Size") or 0),
            item.get("StorageClass"),
            str(item["Key"]),
            etag=item.get("ETag"),
            full_checksum=full,
        )

    @classmethod
    def uniform(
        cls, objects: int, size: int, storage_class: str = "STANDARD", key_length: int = 60
    ) -> Workload:
        work = cls()
        if objects:
            work.add(size, storage_class, key_length, count=objects)
        return work

    @property
    def objects(self) -> int:
        return sum(b.objects for b in self.bins.values())

    @property
    def bytes(self) -> int:
        return sum(b.bytes for b in self.bins.values())

    def by_class(self) -> dict[str, tuple[int, int]]:
        out: dict[str, list[int]] = {}
        for (cls, _, _), b in self.bins.items():
            entry = out.setdefault(cls, [0, 0])
            entry[0] += b.objects
            entry[1] += b.bytes
        return {k: (v[0], v[1]) for k, v in sorted(out.items())}


# -- the estimate -------------------------------------------------------------------------------


@dataclass
class Line:
    service: str
    what: str
    quantity: float
    unit: str
    usd: float
    orchestration: bool = False  # the pipeline's own cost, beyond the engine's S3 requests


@dataclass(frozen=True)
class Limit:
    """One limit on how fast one stack copies objects of this job's shape."""

    what: str
    objects_per_second: float  # what the limit allows
    needs: str  # what the rate asked for takes, in the limit's own unit


@dataclass(frozen=True)
class RateLimits:
    """Each limit against `objects_per_day` on one stack; the lowest binds."""

    objects_per_day: int
    limits: tuple[Limit, ...]

    @property
    def objects_per_second(self) -> float:
        return self.objects_per_day / 86_400

    @property
    def binding(self) -> Limit:
        return min(self.limits, key=lambda x: x.objects_per_second)

    def to_dict(self) -> dict[str, Any]:
        return {
            "objects_per_day": self.objects_per_day,
            "objects_per_second": round(self.objects_per_second, 1),
            "binding": self.binding.what,
            "limits": [
                {"what": x.what, "objects_per_second": round(x.objects_per_second, 1), "needs": x.needs}
                for x in self.limits
            ],
        }


@dataclass
class Estimate:
    objects: int
    bytes: int
    batches: int
    items_per_batch: int
    passes: int
    large_objects: int
    skipped_archived: int
    requests: dict[str, int]
    lines: list[Line]
    alternatives: dict[str, list[Line]]
    duration_seconds: tuple[float, float]
    assumptions: list[str]
    rate_limits: RateLimits | None = None
    # The account's Lambda concurrency, where it came from, and the Map's concurrency under it.
    lambda_concurrency: dict[str, Any] | None = None

    @property
    def total(self) -> float:
        return sum(line.usd for line in self.lines)

    @property
    def orchestration(self) -> float:
        """What the pipeline adds to the engine's own S3 requests: Lambda, Step Functions,
        DynamoDB, Fargate and the pipeline's listings and reports."""
        return sum(line.usd for line in self.lines if line.orchestration)

    @property
    def orchestration_per_million(self) -> float:
        return self.orchestration / self.objects * 1_000_000 if self.objects else 0.0

    def by_service(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for line in self.lines:
            out[line.service] = out.get(line.service, 0.0) + line.usd
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "objects": self.objects,
            "bytes": self.bytes,
            "batches": self.batches,
            "items_per_batch": self.items_per_batch,
            "copy_batch_passes": self.passes,
            "large_objects": self.large_objects,
            "skipped_needs_restore": self.skipped_archived,
            "s3_requests": dict(sorted(self.requests.items())),
            "lines": [asdict(line) for line in self.lines],
            "by_service_usd": {k: round(v, 6) for k, v in self.by_service().items()},
            "total_usd": round(self.total, 6),
            "orchestration_usd": round(self.orchestration, 6),
            "orchestration_usd_per_million_objects": round(self.orchestration_per_million, 6),
            "rate_limits": self.rate_limits.to_dict() if self.rate_limits else None,
            "lambda_concurrency": self.lambda_concurrency,
            "alternatives": {
                name: {"lines": [asdict(x) for x in lines], "total_usd": round(sum(x.usd for x in lines), 6)}
                for name, lines in self.alternatives.items()
            },
            "duration_seconds": {
                "fast": round(self.duration_seconds[0]),
                "slow": round(self.duration_seconds[1]),
            },
            "prices": {"date": prices.PRICES_DATE, "region": prices.REGION},
            "assumptions": self.assumptions,
        }


def items_per_batch(shape: PipelineShape, mean_item_bytes: float) -> int:
    """The ItemBatcher's batch: the item cap, or fewer where the bytes cap binds first. The
    bytes are the child's whole input: the wrapper and BatchInput once, each item and its comma."""
    room = shape.max_input_bytes_per_batch - BATCH_WRAPPER_BYTES + 1  # the first item has no comma
    by_bytes = int(room // (max(1.0, mean_item_bytes) + 1))
    return max(1, min(shape.max_items_per_batch, by_bytes))


def _geomean(pair: tuple[float, float]) -> float:
    return math.sqrt(pair[0] * pair[1])


def _worker_seconds(
    objects: int, size: int, server_side: bool, rates: Rates, which: int | None, cpu_share: float = 1.0
) -> float:
    """Seconds one worker spends on `objects` objects of `size` bytes (which: 0 slow, 1 fast,
    None expected): the slower of the request-bound and the bandwidth-bound time. The
    request-bound rate is CPU's: a worker with `cpu_share` of a vCPU copies that share of it."""
    per_obj = rates.server_side_objects if server_side else rates.stream_objects
    per_byte = rates.server_side_bytes if server_side else rates.stream_bytes
    o = (per_obj[which] if which is not None else _geomean(per_obj)) * cpu_share
    b = per_byte[which] if which is not None else _geomean(per_byte)
    return max(objects / o, objects * size / b)


def estimate(
    work: Workload,
    shape: PipelineShape | None = None,
    a: Assumptions | None = None,
    rates: Rates | None = None,
    objects_per_day: int = DEFAULT_OBJECTS_PER_DAY,
    lambda_quota: LambdaQuota | None = None,
) -> Estimate:
    """What `work` costs and how long it takes on a pipeline of `shape`, in an account whose
    Lambda concurrency is `lambda_quota` (the default quota if not known): Prepare lowers the
    Map's concurrency to what that quota allows, and so does the estimate."""
    a = a or Assumptions()
    rates = rates or Rates()
    quota = lambda_quota or LambdaQuota()
    asked = shape or PipelineShape()
    cap = cap_max_concurrency(
        asked.max_concurrency, quota.account, copy_reserved=asked.copy_reserved_concurrency
    )
    shape = replace(asked, max_concurrency=cap.max_concurrency)
    requests: Counter[str] = Counter()
    large_objects = skipped = 0
    lambda_seconds = [0.0, 0.0, 0.0]  # slow, fast, expected
    fargate_seconds = [0.0, 0.0, 0.0]
    copied_bytes = restore_requests = 0.0
    multipart_copies = 0  # each reads its checkpoint once and deletes it at the end
    checkpoint_saves = 0  # hand-overs: a save, and a read when the next pass resumes
    checkpoint_saves_wru = 0
    item_bytes = 0
    for (cls, _, layout), b in work.bins.items():
        size = b.mean_size
        item_bytes += b.item_bytes
        large = size > shape.large_object_threshold
        memory = shape.fargate_memory_mb * MiB // 2 if large else shape.lambda_memory_mb * MiB // 3
        per_object = object_requests(size, cls, replace(a, memory_limit=memory), *bin_layout(layout, b))
        for op, n in per_object.items():
            requests[op] += n * b.objects
        if cls in ARCHIVE_CLASSES and a.restore is None:
            skipped += b.objects
            continue
        if cls in ARCHIVE_CLASSES:
            restore_requests += b.objects
        copied_bytes += b.bytes
        share = 1.0 if large else min(1.0, shape.lambda_memory_mb / ONE_VCPU_MB)
        times = [_worker_seconds(b.objects, size, a.server_side, rates, w, share) for w in (0, 1, None)]
        one = _worker_seconds(1, size, a.server_side, rates, None)
        if large:
            large_objects += b.objects
            for i in range(3):
                fargate_seconds[i] += times[i] + FARGATE_START_SECONDS * b.objects
            if a.skip_existing:
                requests["HeadObject"] += b.objects  # one object: a HEAD of the destination, no listing
        else:
            for i in range(3):
                lambda_seconds[i] += times[i]
        if per_object["CreateMultipartUpload"]:
            multipart_copies += b.objects
            pass_seconds = FARGATE_PASS_SECONDS if large else shape.usable_pass_seconds
            saves = max(0, math.ceil(one / pass_seconds) - 1)
            parts = per_object["UploadPartCopy"] + per_object["UploadPart"]
            checkpoint_saves += b.objects * saves
            checkpoint_saves_wru += (
                b.objects * saves * math.ceil((300 + CHECKPOINT_PART_BYTES * parts) / 1024)
            )
            if saves:
                for op, n in resume_requests(per_object, a).items():
                    requests[op] += n * saves * b.objects

    objects = work.objects
    mean_item = item_bytes / objects if objects else 1.0
    per_batch = items_per_batch(shape, mean_item)
    batches = math.ceil(objects / per_batch) if objects else 0
    # Passes: a batch's Lambda work at the expected rate, cut into Lambda-sized passes.
    per_batch_seconds = lambda_seconds[2] / batches if batches else 0.0
    passes_per_batch = max(1, math.ceil(per_batch_seconds / shape.usable_pass_seconds)) if batches else 0
    passes = batches * passes_per_batch
    large_batches = min(batches, large_objects)
    resumes = (passes - batches) + large_batches  # passes that raised FerryHandOver

    # S3 requests the pipeline adds to the engine's: the Map's listing, the destination listing
    # per batch (skip-existing), a report per pass, the job report and the Map's result files.
    pipeline_requests: Counter[str] = Counter()
    pipeline_requests["ListObjectsV2"] += math.ceil(objects / 1000)
    if a.skip_existing and batches:
        # engine/compare/dest_listing.py: a batch of fewer than MIN_WINDOW targets HEADs each instead.
        # Only the objects copied in Lambda are in a batch's window (large ones go to Fargate).
        in_lambda = (objects - large_objects) / objects
        full, rest = divmod(objects, per_batch)
        for count, size in ((full, per_batch), (1 if rest else 0, rest)):
            n = round(size * in_lambda)
            if n < DEST_LISTING_MIN_WINDOW:
                requests["HeadObject"] += count * n
            else:
                pipeline_requests["ListObjectsV2"] += count * math.ceil(n / 1000)
    pipeline_requests["PutObject"] += passes + large_objects + 3
    all_requests = requests + pipeline_requests

    lines: list[Line] = []
    put_into = prices.put_price(a.storage_class)  # a write is billed at the class it writes
    for op, n in sorted(requests.items()):
        if op == "RestoreObject":
            continue  # priced with the retrieval below
        if op in DESTINATION_WRITES:
            unit = put_into
        else:
            unit = prices.price("s3_put_copy_post_list") if op in PUT_CLASS else prices.price("s3_get_head")
        lines.append(Line("S3 requests", op, n, "requests", n * unit))
    listing = pipeline_requests["ListObjectsV2"]
    lines.append(
        Line(
            "S3 requests",
            "ListObjectsV2 (Map's listing; skip-existing)",
            listing,
            "requests",
            listing * prices.price("s3_put_copy_post_list"),
            orchestration=True,
        )
    )
    reports = pipeline_requests["PutObject"]
    lines.append(
        Line(
            "S3 requests",
            "PutObject (reports)",
            reports,
            "requests",
            reports * prices.price("s3_put_copy_post_list"),
            orchestration=True,
        )
    )
    if restore_requests:
        tier = a.restore or "standard"
        for cls, (n, size_bytes) in work.by_class().items():
            if cls not in ARCHIVE_CLASSES:
                continue
            family = "glacier" if cls == "GLACIER" else "deep_archive"
            tier_name = "standard" if (family == "deep_archive" and tier == "expedited") else tier
            req = prices.PRICES.get(f"restore_{family}_{tier_name}_request")
            per_gb = prices.PRICES.get(f"restore_{family}_{tier_name}_gb")
            if req and per_gb:
                lines.append(
                    Line("S3 restore", f"{cls} {tier_name} retrieval requests", n, "requests", n * req.usd)
                )
                lines.append(
                    Line(
                        "S3 restore",
                        f"{cls} {tier_name} retrieval",
                        size_bytes / GB,
                        "GB",
                        size_bytes / GB * per_gb.usd,
                    )
                )

    # Lambda: CopyBatch passes (expected rate), plus Prepare and Finalize.
    memory_gb = shape.lambda_memory_mb / 1024
    gb_seconds = memory_gb * (lambda_seconds[2] + passes * PASS_OVERHEAD_SECONDS + resumes * RESUME_SECONDS)
    arch = "arm64" if shape.lambda_architecture == "arm64" else "x86_64"
    lines.append(
        Line(
            "Lambda",
            f"CopyBatch duration ({arch}, {shape.lambda_memory_mb} MB)",
            gb_seconds,
            "GB-seconds",
            gb_seconds * prices.price(f"lambda_{arch}_gb_second"),
        )
    )
    invocations = passes + resumes + 2
    lines.append(
        Line("Lambda", "invocations", invocations, "requests", invocations * prices.price("lambda_request"))
    )

    transitions = (
        PARENT_TRANSITIONS
        + batches * (CHILD_START_TRANSITIONS + CHILD_TRANSITIONS)
        + (passes - batches) * EXTRA_PASS_TRANSITIONS
        + large_batches * LARGE_BATCH_TRANSITIONS
        + large_objects * LARGE_OBJECT_TRANSITIONS
    )
    lines.append(
        Line(
            "Step Functions",
            "STANDARD state transitions",
            transitions,
            "transitions",
            transitions * prices.price("sfn_standard_transition"),
        )
    )

    # DynamoDB: per pass a marker (PutItem); per worker process a strongly consistent read of the
    # job item; per multipart copy a checkpoint read and delete; per job the job item and Finalize's tally.
    marker_wru = math.ceil(MARKER_BYTES / 1024)
    wru = passes * marker_wru + multipart_copies + checkpoint_saves_wru + large_objects * marker_wru + 3
    tally_rru = math.ceil((passes + large_objects) * MARKER_BYTES / 4096)
    # The job's spec is read once per worker process (passes.job_spec keeps it): about one read
    # per Lambda container, max_concurrency of them at most; one per Fargate task.
    job_reads = min(passes, shape.max_concurrency)
    # A ResumeHandOver reads the marker of the pass that handed over (strongly consistent).
    rru = job_reads + multipart_copies + checkpoint_saves + large_objects + resumes + tally_rru + 2
    lines.append(
        Line(
            "DynamoDB",
            "write request units (markers, checkpoints)",
            wru,
            "WRU",
            wru * prices.price("dynamodb_write_request_unit"),
        )
    )
    lines.append(
        Line(
            "DynamoDB",
            "read request units (job, checkpoints, tally)",
            rru,
            "RRU",
            rru * prices.price("dynamodb_read_request_unit"),
        )
    )

    if large_objects:
        hours = fargate_seconds[2] / 3600
        farch = "arm64" if shape.lambda_architecture == "arm64" else "x86_64"
        discount = 1 - prices.price("fargate_spot_discount") if shape.fargate_spot else 1.0
        vcpu_h = shape.fargate_cpu / 1024 * hours
        gb_h = shape.fargate_memory_mb / 1024 * hours
        spot = " Spot" if shape.fargate_spot else ""
        lines.append(
            Line(
                "Fargate",
                f"vCPU-hours ({farch}{spot})",
                vcpu_h,
                "vCPU-hours",
                vcpu_h * prices.price(f"fargate_{farch}_vcpu_hour") * discount,
            )
        )
        lines.append(
            Line(
                "Fargate",
                f"GB-hours ({farch}{spot})",
                gb_h,
                "GB-hours",
                gb_h * prices.price(f"fargate_{farch}_gb_hour") * discount,
            )
        )

    if a.cross_region:
        gb = copied_bytes / GB
        lines.append(
            Line("Data transfer", "between regions", gb, "GB", gb * prices.price("transfer_inter_region_gb"))
        )

    # Duration: workers at once = the Map's concurrency (at most one per batch); large objects
    # on Fargate, up to fargate_max_concurrency per batch, alongside.
    workers = max(1, min(shape.max_concurrency, batches or 1))
    fargate_workers = max(1, min(large_objects or 1, shape.max_concurrency * shape.fargate_max_concurrency))
    duration = []
    for i in (1, 0):  # fast, slow
        lam = (lambda_seconds[i] + passes * PASS_OVERHEAD_SECONDS) / workers
        far = fargate_seconds[i] / fargate_workers
        duration.append(max(lam, far) + 30.0)  # + Prepare, Map start and Finalize
    alternatives = _alternatives(work, a, copied_bytes, objects - skipped)

    rate_word = (
        "measured"
        if rates.measured
        else "server-side from CPU measured locally, not on AWS; streamed assumed"
    )
    notes = [
        f"prices: {prices.REGION} list prices of {prices.PRICES_DATE} (functions/ferry/costs/prices.py; unverified ones are marked there)",
        "the destination holds none of the objects: everything is copied (a re-run skips what is there)",
        f"sources above {_mib(a.source_multipart_threshold)} were uploaded in {_mib(a.source_part_size)} parts, "
        + ("with full-object CRCs" if a.source_full_checksum else "with MD5 ETags and no stored checksum")
        + " (where a listing does not say)",
        f"throughput per worker {rate_word}: server-side {_pair(rates.server_side_objects)} objects/s or {_pair(rates.server_side_bytes, MiB)} MiB/s, streamed {_pair(rates.stream_objects)} objects/s or {_pair(rates.stream_bytes, MiB)} MiB/s; {workers} Lambda workers at once",
        f"batches of {plural(per_batch, 'object')} (max_items_per_batch {shape.max_items_per_batch}, max_input_bytes_per_batch {shape.max_input_bytes_per_batch} over items of ~{round(mean_item)} bytes as CopyPrefix's ItemSelector makes them; AWS does not document whether the ItemBatcher measures the selected or the listed item: if the listed one, batches are smaller, never larger)",
    ]
    used = {"s3_get_head", "s3_put_copy_post_list", "batch_operations_object", "datasync_gb"}
    used.add(prices.PUT_BY_CLASS.get(a.storage_class or "STANDARD", "s3_put_copy_post_list"))
    if large_objects and shape.fargate_spot:
        used.add("fargate_spot_discount")
    if restore_requests:
        used.update(name for name in prices.PRICES if name.startswith("restore_"))
    unverified = sorted(name for name in used if not prices.PRICES[name].verified)
    notes.append(
        f"prices not verified offline (check them on the AWS pricing pages): {', '.join(unverified)}"
    )
    if skipped:
        notes.append(
            f"{plural(skipped, 'archived object')} (GLACIER, DEEP_ARCHIVE) would be skipped: needs restore (--restore TIER)"
        )
    notes.append(quota.note)
    if cap.note:
        notes.append(cap.note)
    reserved = shape.copy_reserved_concurrency + shape.record_failure_reserved_concurrency
    refused = reservations_refused(reserved, quota.account.limit) if quota.source != "default" else None
    if refused:
        notes.append(f"the settings cannot deploy in this account: {refused}")
    for entry in lines:
        if entry.service in ORCHESTRATION_SERVICES:
            entry.orchestration = True
    in_lambda = objects - large_objects - skipped
    lambda_busy = lambda_seconds[2] + passes * PASS_OVERHEAD_SECONDS
    rate_limits = rate_limits_at(
        objects_per_day,
        shape,
        lambda_quota=quota,
        requests_per_object={op: n / objects for op, n in requests.items()} if objects else {},
        worker_objects_per_second=in_lambda / lambda_busy if lambda_busy and in_lambda > 0 else None,
        ledger_wru_per_object=wru / objects if objects else 0.0,
    )
    return Estimate(
        rate_limits=rate_limits,
        lambda_concurrency={
            **quota.account.to_dict(),
            "source": quota.source,
            "max_concurrency": cap.max_concurrency,
            "asked": cap.asked,
        },
        objects=objects,
        bytes=work.bytes,
        batches=batches,
        items_per_batch=per_batch,
        passes=passes,
        large_objects=large_objects,
        skipped_archived=skipped,
        requests=dict(all_requests),
        lines=lines,
        alternatives=alternatives,
        duration_seconds=(duration[0], duration[1]),
        assumptions=notes,
    )


ORCHESTRATION_SERVICES = frozenset({"Lambda", "Step Functions", "DynamoDB", "Fargate"})


def rate_limits_at(
    objects_per_day: int,
    shape: PipelineShape,
    *,
    requests_per_object: Mapping[str, float],
    worker_objects_per_second: float | None,
    ledger_wru_per_object: float,
    lambda_quota: LambdaQuota | None = None,
) -> RateLimits:
    """How many objects a second each limit lets one stack copy, for this job's requests per
    object and one worker's rate (the estimate's expected one), against `objects_per_day`.

    S3's rates are per partitioned prefix: one source and one destination prefix are assumed
    (S3 partitions a busy prefix over time; that is not counted on). A server-side copy is
    counted as a read of its source besides the write (assumed: S3 documents the rates per
    request, not how a copy's source read counts). The Map Run's children and Lambda's
    concurrency bound the workers (the copies take at most what Prepare's cap leaves them of
    the account's quota); the ledger's markers share one partition key."""
    quota = lambda_quota or LambdaQuota()
    rate = objects_per_day / 86_400
    writes = sum(n for op, n in requests_per_object.items() if op in DESTINATION_WRITES)
    reads = sum(n for op, n in requests_per_object.items() if op in GET_CLASS)
    reads += requests_per_object.get("CopyObject", 0.0) + requests_per_object.get("UploadPartCopy", 0.0)
    limits: list[Limit] = []

    def add(what: str, allows: float, unit: str, per_unit: float) -> None:
        needed = math.ceil(rate / per_unit) if per_unit > 0 else 0
        limits.append(Limit(what, allows, f"{needed:,} {unit}"))

    if writes:
        per_prefix = S3_WRITES_PER_PREFIX / writes
        add(
            f"S3 writes to one destination prefix ({S3_WRITES_PER_PREFIX:,}/s)",
            per_prefix,
            "partitioned prefixes",
            per_prefix,
        )
    if reads:
        per_prefix = S3_READS_PER_PREFIX / reads
        add(
            f"S3 reads of one source prefix ({S3_READS_PER_PREFIX:,}/s)",
            per_prefix,
            "partitioned prefixes",
            per_prefix,
        )
    if worker_objects_per_second:
        children = min(shape.max_concurrency, MAP_RUN_MAX_CHILDREN)
        add(
            f"Map Run children at once (max_concurrency {shape.max_concurrency:,}; at most {MAP_RUN_MAX_CHILDREN:,})",
            children * worker_objects_per_second,
            f"children at {worker_objects_per_second:,.0f} objects/s each",
            worker_objects_per_second,
        )
        copies = cap_max_concurrency(
            MAP_RUN_MAX_CHILDREN, quota.account, copy_reserved=shape.copy_reserved_concurrency
        ).max_concurrency
        add(
            f"Lambda concurrency ({quota.label}; {copies:,} for the copies)",
            copies * worker_objects_per_second,
            "concurrent CopyBatch workers",
            worker_objects_per_second,
        )
    if ledger_wru_per_object:
        per_partition = LEDGER_PARTITION_WRU / ledger_wru_per_object
        add(
            f"ledger writes ({LEDGER_PARTITION_WRU:,} WRU/s on a job's partition)",
            per_partition,
            "partitions",
            per_partition,
        )
    return RateLimits(objects_per_day, tuple(limits))


def _alternatives(work: Workload, a: Assumptions, copied_bytes: float, objects: int) -> dict[str, list[Line]]:
    """The same objects copied by AWS's managed services, at their list prices."""
    put_into = prices.put_price(a.storage_class)
    gb = copied_bytes / GB
    transfer = (
        [Line("Data transfer", "between regions", gb, "GB", gb * prices.price("transfer_inter_region_gb"))]
        if a.cross_region
        else []
    )
    too_big = sum(b.objects for b in work.bins.values() if b.mean_size > MAX_SINGLE_COPY)
    batch_ops = [
        Line("S3 Batch Operations", "job", 1, "jobs", prices.price("batch_operations_job")),
        Line(
            "S3 Batch Operations",
            "objects",
            objects,
            "objects",
            objects * prices.price("batch_operations_object"),
        ),
        Line("S3 requests", "CopyObject", objects - too_big, "requests", (objects - too_big) * put_into),
        *transfer,
    ]
    if too_big:
        batch_ops.append(
            Line(
                "S3 Batch Operations",
                f"{plural(too_big, 'object')} over 5 GB cannot be copied",
                0,
                "objects",
                0.0,
            )
        )
    # DataSync (S3 to S3), approximately: it lists both sides, HEADs and GETs each source
    # object, HEADs and PUTs each destination object (verification reads it back: not counted).
    datasync = [
        Line("DataSync", "data copied", gb, "GB", gb * prices.price("datasync_gb")),
        Line(
            "S3 requests",
            "LIST (both sides)",
            2 * math.ceil(objects / 1000),
            "requests",
            2 * math.ceil(objects / 1000) * prices.price("s3_put_copy_post_list"),
        ),
        Line(
            "S3 requests",
            "HEAD and GET (approximate)",
            3 * objects,
            "requests",
            3 * objects * prices.price("s3_get_head"),
        ),
        Line("S3 requests", "PUT", objects, "requests", objects * put_into),
        *transfer,
    ]
    replication = [
        Line("S3 Batch Operations", "job", 1, "jobs", prices.price("batch_operations_job")),
        Line(
            "S3 Batch Operations",
            "objects",
            objects,
            "objects",
            objects * prices.price("batch_operations_object"),
        ),
        Line("S3 requests", "replication PUT", objects, "requests", objects * put_into),
        *transfer,
    ]
    return {
        "S3 Batch Operations (Copy)": batch_ops,
        "DataSync": datasync,
        "S3 Batch Replication": replication,
    }


def _mib(n: int) -> str:
    return f"{n / MiB:g} MiB"


def _pair(pair: tuple[float, float], scale: float = 1.0) -> str:
    return f"{pair[0] / scale:.3g}-{pair[1] / scale:.3g}"


def bin_layout(layout: str, b: Bin) -> tuple[int | None, bool | None]:
    """(source parts, full-object checksum) for `object_requests`, from a bin's layout key."""
    shape, _, checksum = layout.partition("+")
    parts = None if shape == "assumed" else b.mean_parts
    return parts, (None if not checksum else checksum == "crc")


def _etag_parts(etag: str | None) -> int | None:
    """A listed ETag's part count: `-N` for a multipart upload, 1 for a plain MD5; None unknown."""
    if not etag:
        return None
    _, dash, count = etag.strip('"').rpartition("-")
    if dash and count.isdigit():
        return int(count)
    return 1
