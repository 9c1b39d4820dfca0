"""How long a job takes: one worker's seconds for a bin of objects, the pass and start-up times
assumed, how a copy hands over between passes, the CopyBatch passes a job takes and its wall
time, and the limits (S3's per-prefix rates, the Map Run, Lambda's concurrency, the ledger's
partition) that bound how fast one stack copies."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferry.costs.inputs import ONE_VCPU_MB, LambdaQuota, PipelineShape, Rates
from ferry.costs.requests import DESTINATION_WRITES, GET_CLASS
from ferry.quotas.lambda_concurrency import cap_max_concurrency

# Assumed, not measured on AWS: the wall time a pass spends outside its copies' CPU, in sequence
# (the first window's destination listing, the report PUT, the ledger's marker).
PASS_OVERHEAD_SECONDS = 0.5
# Assumed, not measured on AWS: a ResumeHandOver invocation (a consistent GetItem of the pass's
# marker and the handler around it), billed as CopyBatch duration.
RESUME_SECONDS = 0.1
FARGATE_START_SECONDS = 60  # assumed: task start-up (and Fargate's one-minute minimum)
FARGATE_PASS_SECONDS = 90  # batches.copy_large_object: a checkpoint every pass (Spot's SIGTERM)
JOB_EDGES_SECONDS = 30.0  # assumed: Prepare, the Map's start and Finalize, around the copies
# A worker's seconds come in three cases, in this order in a list: slow, fast, expected.
SLOW, FAST, EXPECTED = 0, 1, 2

# What bounds one stack's rate, at the defaults (quotas an account may raise are marked so):
S3_WRITES_PER_PREFIX = 3_500  # PUT/COPY/POST/DELETE per second per partitioned prefix (S3)
S3_READS_PER_PREFIX = 5_500  # GET/HEAD per second per partitioned prefix (S3)
MAP_RUN_MAX_CHILDREN = 10_000  # child executions a Distributed Map runs at once, at most
# Lambda's concurrency is the account's quota (`LambdaQuota`): the default where it is not
# known; new accounts get less, and AWS raises it on request.
# DynamoDB: 1,000 write units per second per partition; a job's markers share its partition
# key (JOB#<id>), so the ledger is counted as one partition (adaptive capacity may split it).
LEDGER_PARTITION_WRU = 1_000


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


def _geomean(pair: tuple[float, float]) -> float:
    return math.sqrt(pair[0] * pair[1])


def worker_seconds(
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


def cpu_share(shape: PipelineShape, on_fargate: bool) -> float:
    """The share of a vCPU one worker has: a Fargate task's whole one; a CopyBatch Lambda's in
    proportion to its memory (Lambda gives one vCPU at ONE_VCPU_MB)."""
    return 1.0 if on_fargate else min(1.0, shape.lambda_memory_mb / ONE_VCPU_MB)


def case_seconds(objects: int, size: int, server_side: bool, rates: Rates, share: float) -> list[float]:
    """One worker's seconds on `objects` objects of `size` bytes in each case (SLOW, FAST,
    EXPECTED), with `share` of a vCPU."""
    return [worker_seconds(objects, size, server_side, rates, which, share) for which in (0, 1, None)]


def save_points(
    size: int, server_side: bool, rates: Rates, on_fargate: bool, shape: PipelineShape
) -> list[float]:
    """The share of a multipart copy's parts done at each of its hand-overs (a checkpoint
    saved at the end of each pass but the last), at the expected rate: a CopyBatch pass ends
    at its usable seconds, a Fargate task checkpoints every FARGATE_PASS_SECONDS."""
    one = worker_seconds(1, size, server_side, rates, None)
    pass_seconds = FARGATE_PASS_SECONDS if on_fargate else shape.usable_pass_seconds
    saves = max(0, math.ceil(one / pass_seconds) - 1)
    return [min(1.0, n * pass_seconds / one) for n in range(1, saves + 1)]


@dataclass(frozen=True)
class Passes:
    """The job's CopyBatch passes: `count` in all; `large_batches`, the batches that hand large
    objects to Fargate; `resumes`, the passes that raised FerryHandOver (each followed by a
    ResumeHandOver)."""

    count: int
    large_batches: int
    resumes: int


def passes_of(batches: int, lambda_seconds: float, large_objects: int, shape: PipelineShape) -> Passes:
    """A batch's Lambda work at the expected rate (`lambda_seconds` for every batch), cut into
    Lambda-sized passes; a batch holding a large object hands over once more, to Fargate."""
    per_batch_seconds = lambda_seconds / batches if batches else 0.0
    per_batch = max(1, math.ceil(per_batch_seconds / shape.usable_pass_seconds)) if batches else 0
    count = batches * per_batch
    large_batches = min(batches, large_objects)
    return Passes(count, large_batches, (count - batches) + large_batches)


def busy_seconds(copy_seconds: float, passes: int) -> float:
    """CopyBatch's seconds: its copies' and each pass's own (PASS_OVERHEAD_SECONDS)."""
    return copy_seconds + passes * PASS_OVERHEAD_SECONDS


def lambda_workers_at_once(shape: PipelineShape, batches: int) -> int:
    """CopyBatch workers at once: the Map's concurrency, at most one per batch."""
    return max(1, min(shape.max_concurrency, batches or 1))


@dataclass(frozen=True)
class FargateTier:
    """How the large objects run: `holding`, the batches with a large object in them (the
    large objects taken as spread evenly over the batches: the estimate knows their sizes, not
    where they fall in the listing); `per_batch`, the tasks one of those runs at once on
    average (at most fargate_max_concurrency: its CopyLargeObjects Map); `at_once`, the tasks
    of all batches together, the Map running at most max_concurrency batches; `rounds`, the
    rounds of tasks of the batch that holds the most."""

    holding: int
    per_batch: float
    at_once: int
    rounds: int


def fargate_tier(shape: PipelineShape, large_objects: int, batches: int) -> FargateTier:
    """A hundred large objects in one batch run two at a time by default, not a hundred."""
    if not large_objects:
        return FargateTier(0, 1.0, 1, 0)
    holding = min(batches or 1, large_objects)
    per_batch = min(large_objects / holding, shape.fargate_max_concurrency)
    at_once = min(large_objects, round(min(holding, shape.max_concurrency) * per_batch))
    most = math.ceil(large_objects / holding)  # the large objects of the batch that holds the most
    return FargateTier(
        holding, per_batch, max(1, at_once), math.ceil(most / min(most, shape.fargate_max_concurrency))
    )


def job_seconds(
    lambda_seconds: list[float],
    fargate_seconds: list[float],
    passes: int,
    workers: int,
    batches: int,
    large_objects: int,
    tier: FargateTier,
) -> tuple[float, float]:
    """The job's wall time, (fast, slow), within JOB_EDGES_SECONDS. A batch runs its CopyBatch
    passes first and its large objects after (WhatIsLeft hands them to CopyLargeObjects once
    nothing else is left), keeping its place among the `workers` batches at once all along:
    its Lambda seconds and its Fargate rounds add up. The job takes the longer of all
    batches' seconds shared by the workers and the batch that holds the most large objects
    (its rounds of tasks one after the other)."""

    def seconds(case: int) -> float:
        busy = busy_seconds(lambda_seconds[case], passes)
        one_task = fargate_seconds[case] / large_objects if large_objects else 0.0
        shared = (busy + fargate_seconds[case] / tier.per_batch) / workers
        one_batch = busy / max(1, batches) + tier.rounds * one_task
        return max(shared, one_batch) + JOB_EDGES_SECONDS

    return seconds(FAST), seconds(SLOW)


def rate_limits_at(
    objects_per_day: int,
    shape: PipelineShape,
    *,
    requests_per_object: Mapping[str, float],
    worker_objects_per_second: float | None,
    ledger_wru_per_object: float,
    lambda_quota: LambdaQuota | None = None,
    large_share: float = 0.0,
    task_objects_per_second: float | None = None,
    tasks_per_batch: float = 1.0,
) -> RateLimits:
    """How many objects a second each limit lets one stack copy, for this job's requests per
    object and one worker's rate (the estimate's expected one), against `objects_per_day`.

    S3's rates are per partitioned prefix: one source and one destination prefix are assumed
    (S3 partitions a busy prefix over time; that is not counted on). A server-side copy is
    counted as a read of its source besides the write (assumed: S3 documents the rates per
    request, not how a copy's source read counts). The Map Run's children and Lambda's
    concurrency bound the workers (the copies take at most what Prepare's cap leaves them of
    the account's quota); the ledger's markers share one partition key. `large_share` of the
    objects run on Fargate, one task copying `task_objects_per_second` of them, each batch
    the Map runs running `tasks_per_batch` tasks on average (its share of the large objects,
    at most fargate_max_concurrency)."""
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
    if large_share and task_objects_per_second:
        tasks = min(shape.max_concurrency, MAP_RUN_MAX_CHILDREN) * tasks_per_batch
        per_task = task_objects_per_second / large_share  # the job's objects, large and small
        add(
            f"Fargate tasks at once ({tasks_per_batch:.3g} a batch, {tasks:,.0f} in all)",
            tasks * per_task,
            "Fargate tasks at once",
            per_task,
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
