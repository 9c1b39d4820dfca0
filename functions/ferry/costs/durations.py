"""How long a job takes: one worker's seconds for a bin of objects, the pass and start-up times
assumed, and the limits (S3's per-prefix rates, the Map Run, Lambda's concurrency, the ledger's
partition) that bound how fast one stack copies."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferry.costs.inputs import LambdaQuota, PipelineShape, Rates
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
