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

The model's parts, one module each: `inputs` (what an estimate is made for), `workload` (the
objects as a histogram, and the Map's batches of them), `requests` (the engine's S3 requests per
object, and what they and the restores cost), `durations` (a worker's time, the passes and the
job's wall time, and the limits on a stack's rate), `peers` (AWS's managed services on the same
objects) and `prices` (the dated table, and the transfer between regions). This module walks the
objects' bins through those parts, adds what the pipeline itself costs (its Lambda, Step
Functions, DynamoDB and Fargate, its listings and reports) and puts the estimate together:
`estimate` is that list of steps.

The model is vocabulary (imported by the CLI): it does not import the pipeline.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ferry.costs import prices
from ferry.costs.durations import (
    EXPECTED,
    FARGATE_START_SECONDS,
    RESUME_SECONDS,
    Passes,
    RateLimits,
    busy_seconds,
    case_seconds,
    cpu_share,
    fargate_tier,
    job_seconds,
    lambda_workers_at_once,
    passes_of,
    rate_limits_at,
    save_points,
)
from ferry.costs.inputs import Assumptions, LambdaQuota, PipelineShape, Rates
from ferry.costs.peers import peer_costs
from ferry.costs.prices import Line
from ferry.costs.requests import object_requests, request_lines, restore_lines, resume_requests
from ferry.costs.workload import Batches, Bin, Workload, batches_of, bin_layout
from ferry.counts import plural
from ferry.limits import (
    DEFAULT_OBJECTS_PER_DAY,
    MiB,
)
from ferry.models import ARCHIVE_CLASSES
from ferry.quotas.lambda_concurrency import (
    ConcurrencyCap,
    cap_max_concurrency,
    reservations_refused,
)

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

CHECKPOINT_PART_BYTES = 150  # a part's entry in a saved checkpoint (upload id, etag, checksum)
CHECKPOINT_HEAD_BYTES = 300  # a checkpoint's head item (upload, source, algorithm, part sizes)
CHECKPOINT_ITEM_BYTES = 100  # a part item's own keys and fields, beside its parts
CHECKPOINT_PARTS_PER_ITEM = 1_000  # ledger/dynamodb_checkpoints.PARTS_PER_ITEM (a test keeps them equal)
MARKER_BYTES = 600  # a batch marker item (counts, hand-over, attempt, report key)
DEST_LISTING_MIN_WINDOW = 8  # engine/compare/dest_listing.MIN_WINDOW (a test keeps them equal)


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
    copies = _engine_copies(work, shape, a, rates)
    batches = batches_of(work, shape)
    passes = passes_of(batches.count, copies.lambda_seconds[EXPECTED], copies.large_objects, shape)
    pipeline = _pipeline_requests(work.objects, batches, passes, copies, a)
    ledger = _ledger_units(passes, copies, shape)
    lines = [
        *request_lines(copies.requests, a.storage_class),
        *_pipeline_request_lines(pipeline),
        *(restore_lines(work, a.restore) if copies.restores else []),
        *_lambda_lines(shape, copies, passes),
        _step_functions_line(batches, passes, copies.large_objects),
        *_dynamodb_lines(ledger),
        *_fargate_lines(shape, copies),
        *prices.transfer_lines(copies.copied_bytes, a.cross_region),
    ]
    workers = lambda_workers_at_once(shape, batches.count)
    tier = fargate_tier(shape, copies.large_objects, batches.count)
    notes = [
        *_model_notes(a, rates, workers, batches, shape),
        *_fargate_notes(copies.large_objects, tier.at_once, shape),
        _unverified_prices_note(a, shape, copies),
        *_account_notes(copies, quota, cap, shape),
    ]
    return Estimate(
        work.objects,
        work.bytes,
        batches.count,
        batches.size,
        passes.count,
        copies.large_objects,
        copies.skipped,
        requests=dict(copies.requests + pipeline),
        lines=lines,
        alternatives=peer_costs(work, a, copies.copied_bytes, work.objects - copies.skipped),
        duration_seconds=job_seconds(
            copies.lambda_seconds,
            copies.fargate_seconds,
            passes.count,
            workers,
            batches.count,
            copies.large_objects,
            tier,
        ),
        assumptions=notes,
        rate_limits=_stack_rate_limits(
            objects_per_day, work.objects, shape, quota, copies, passes, ledger, batches.size
        ),
        lambda_concurrency=_lambda_concurrency(quota, cap),
    )


def _lambda_concurrency(quota: LambdaQuota, cap: ConcurrencyCap) -> dict[str, Any]:
    """The account's Lambda concurrency, where it came from, and the Map's concurrency under it
    (as asked for, and as Prepare lowers it)."""
    return {
        **quota.account.to_dict(),
        "source": quota.source,
        "max_concurrency": cap.max_concurrency,
        "asked": cap.asked,
    }


# -- the engine's copies ------------------------------------------------------------------------


@dataclass
class _Copies:
    """What the engine does to copy the objects, summed bin by bin: its S3 requests, its
    workers' seconds on Lambda and on Fargate (SLOW, FAST, EXPECTED), and what its multipart
    copies keep in the ledger to be resumed."""

    requests: Counter[str] = field(default_factory=Counter)
    lambda_seconds: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    fargate_seconds: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    copied_bytes: float = 0.0
    restores: float = 0.0  # archived objects restored by this run
    large_objects: int = 0  # copied on Fargate
    skipped: int = 0  # archived, and no restore asked for
    checkpoint_wru: int = 0  # saves and deletes: on each copy's own partition key
    checkpoint_rru: int = 0  # each pass's read, and the delete's listing

    def add_requests(self, per_object: Counter[str], times: int) -> None:
        """One object's requests, `times` over (an operation it sends none of is kept, at 0)."""
        for op, n in per_object.items():
            self.requests[op] += n * times


def _engine_copies(work: Workload, shape: PipelineShape, a: Assumptions, rates: Rates) -> _Copies:
    """The engine's copies of every bin of `work`, as the pipeline of `shape` runs them."""
    copies = _Copies()
    for (cls, _, layout), b in work.bins.items():
        _copy_bin(copies, cls, layout, b, shape, a, rates)
    return copies


def _copy_bin(
    copies: _Copies, cls: str, layout: str, b: Bin, shape: PipelineShape, a: Assumptions, rates: Rates
) -> None:
    """One bin's objects into `copies`: each object's requests, then, unless it is archived and
    not restored (a HEAD, then skipped), its worker's seconds and its hand-overs. An object
    above the large-object threshold goes to Fargate."""
    size = b.mean_size
    large = size > shape.large_object_threshold
    worker = replace(a, memory_limit=shape.memory_limit(large))
    per_object = object_requests(size, cls, worker, *bin_layout(layout, b))
    copies.add_requests(per_object, b.objects)
    if cls in ARCHIVE_CLASSES and a.restore is None:
        copies.skipped += b.objects
        return
    if cls in ARCHIVE_CLASSES:
        copies.restores += b.objects
    copies.copied_bytes += b.bytes
    times = case_seconds(b.objects, size, a.server_side, rates, cpu_share(shape, large))
    if large:
        _add_fargate(copies, b.objects, times, a)
    else:
        for i in range(3):
            copies.lambda_seconds[i] += times[i]
    if per_object["CreateMultipartUpload"]:
        _add_checkpoints(
            copies, per_object, b.objects, save_points(size, a.server_side, rates, large, shape), a
        )


def _add_fargate(copies: _Copies, objects: int, times: list[float], a: Assumptions) -> None:
    """Large objects, each a Fargate task of its own (its start-up too) and, skipping existing
    objects, a HEAD of its destination (one object: no listing)."""
    copies.large_objects += objects
    for i in range(3):
        copies.fargate_seconds[i] += times[i] + FARGATE_START_SECONDS * objects
    if a.skip_existing:
        copies.requests["HeadObject"] += objects


def _add_checkpoints(
    copies: _Copies, per_object: Counter[str], objects: int, points: list[float], a: Assumptions
) -> None:
    """Multipart copies: a checkpoint each, saved at each of its hand-overs (`points`: the share
    of its parts done at each), and what each later pass sends again to resume it."""
    units = _checkpoint_units(per_object["UploadPartCopy"] + per_object["UploadPart"], points)
    copies.checkpoint_wru += objects * units.wru
    copies.checkpoint_rru += objects * units.rru
    if points:
        for op, n in resume_requests(per_object, a).items():
            copies.requests[op] += n * len(points) * objects


# -- what the pipeline adds -----------------------------------------------------------------------


def _pipeline_requests(
    objects: int, batches: Batches, passes: Passes, copies: _Copies, a: Assumptions
) -> Counter[str]:
    """The S3 requests the pipeline adds to the engine's: the Map's listing, the destination
    listing per batch (skip-existing), a report per pass and per large object, the job report
    and the Map's result files. A batch too small to list HEADs its keys instead: the engine's
    requests (`copies`) take those HEADs."""
    pipeline: Counter[str] = Counter()
    pipeline["ListObjectsV2"] += math.ceil(objects / 1000)
    if a.skip_existing and batches.count:
        _destination_checks(objects, batches.size, copies, pipeline)
    pipeline["PutObject"] += passes.count + copies.large_objects + 3
    return pipeline


def _destination_checks(objects: int, per_batch: int, copies: _Copies, pipeline: Counter[str]) -> None:
    """Skip-existing per batch, as engine/compare/dest_listing.py does it: a batch of fewer than
    MIN_WINDOW targets HEADs each, a larger one lists the destination. Only the objects copied
    in Lambda are in a batch's window (large ones go to Fargate)."""
    in_lambda = (objects - copies.large_objects) / objects
    full, rest = divmod(objects, per_batch)
    for count, size in ((full, per_batch), (1 if rest else 0, rest)):
        n = round(size * in_lambda)
        if n < DEST_LISTING_MIN_WINDOW:
            copies.requests["HeadObject"] += count * n
        else:
            pipeline["ListObjectsV2"] += count * math.ceil(n / 1000)


def _pipeline_request_lines(pipeline: Counter[str]) -> list[Line]:
    """The pipeline's listings and its reports, at the PUT/COPY/POST/LIST rate."""
    listings, reports = pipeline["ListObjectsV2"], pipeline["PutObject"]
    listing = "ListObjectsV2 (Map's listing; skip-existing)"
    return [
        _own("S3 requests", listing, listings, "requests", "s3_put_copy_post_list"),
        _own("S3 requests", "PutObject (reports)", reports, "requests", "s3_put_copy_post_list"),
    ]


def _own(service: str, what: str, quantity: float, unit: str, price: str, paid: float = 1.0) -> Line:
    """A line of what the pipeline itself costs: `quantity` at the list price named `price`,
    of which the share `paid` (Fargate Spot's discount leaves less)."""
    return Line(service, what, quantity, unit, quantity * prices.price(price) * paid, orchestration=True)


def _lambda_lines(shape: PipelineShape, copies: _Copies, passes: Passes) -> list[Line]:
    """CopyBatch's passes at the expected rate, and its hand-overs' ResumeHandOver; the
    invocations of every pass, every resume, Prepare and Finalize."""
    memory_gb = shape.lambda_memory_mb / 1024
    busy = busy_seconds(copies.lambda_seconds[EXPECTED], passes.count)
    gb_seconds = memory_gb * (busy + passes.resumes * RESUME_SECONDS)
    arch = _architecture(shape)
    invocations = passes.count + passes.resumes + 2
    duration = f"CopyBatch duration ({arch}, {shape.lambda_memory_mb} MB)"
    return [
        _own("Lambda", duration, gb_seconds, "GB-seconds", f"lambda_{arch}_gb_second"),
        _own("Lambda", "invocations", invocations, "requests", "lambda_request"),
    ]


def _architecture(shape: PipelineShape) -> str:
    """The Lambda functions' architecture, which the Fargate task shares: its prices' name."""
    return "arm64" if shape.lambda_architecture == "arm64" else "x86_64"


def _step_functions_line(batches: Batches, passes: Passes, large_objects: int) -> Line:
    """The STANDARD state transitions of both state machines' normal paths (see the constants
    above, tied to the ASL by tests)."""
    transitions = (
        PARENT_TRANSITIONS
        + batches.count * (CHILD_START_TRANSITIONS + CHILD_TRANSITIONS)
        + (passes.count - batches.count) * EXTRA_PASS_TRANSITIONS
        + passes.large_batches * LARGE_BATCH_TRANSITIONS
        + large_objects * LARGE_OBJECT_TRANSITIONS
    )
    return _own(
        "Step Functions", "STANDARD state transitions", transitions, "transitions", "sfn_standard_transition"
    )


@dataclass(frozen=True)
class _LedgerUnits:
    """The ledger's on-demand request units over the job; `job_wru`, those on the job's own
    partition key (its markers), which one partition's rate bounds."""

    wru: int
    rru: int
    job_wru: int


def _ledger_units(passes: Passes, copies: _Copies, shape: PipelineShape) -> _LedgerUnits:
    """DynamoDB: per pass a marker (PutItem); per worker process a strongly consistent read of
    the job item; per multipart copy its checkpoint's saves, reads and delete
    (`_checkpoint_units`); per job the job item and Finalize's tally."""
    marker_wru = math.ceil(MARKER_BYTES / 1024)
    job_wru = passes.count * marker_wru + copies.large_objects * marker_wru + 3
    tally_rru = math.ceil((passes.count + copies.large_objects) * MARKER_BYTES / 4096)
    # The job's spec is read once per worker process (passes.job_spec keeps it): about one read
    # per Lambda container, max_concurrency of them at most; one per Fargate task.
    job_reads = min(passes.count, shape.max_concurrency)
    # A ResumeHandOver reads the marker of the pass that handed over (strongly consistent).
    rru = job_reads + copies.checkpoint_rru + copies.large_objects + passes.resumes + tally_rru + 2
    return _LedgerUnits(job_wru + copies.checkpoint_wru, rru, job_wru)


@dataclass(frozen=True)
class _CheckpointUnits:
    wru: int
    rru: int


def _checkpoint_units(parts: int, points: list[float]) -> _CheckpointUnits:
    """One multipart copy's checkpoint in request units, its saves at `points` (the share of its
    parts done at each). The ledger keeps a checkpoint in a head item and items of
    CHECKPOINT_PARTS_PER_ITEM parts. A save writes the items whose parts changed since the
    last save (a resumed copy starts from what it loaded), the head only the first time: a
    5 TiB copy's 291 saves on Fargate each rewrite one item or two, not its whole 1.5 MB.
    Every pass reads the checkpoint whole (a strongly consistent Query, a unit per 4 KB; the
    first finds nothing, one unit); at the end the store lists its items (the same read) and
    deletes each, a DeleteItem billed by the item's size."""
    wru, done = 0, 0
    sizes: dict[int, int] = {}  # part item -> its bytes as last saved
    rru = 1
    for point in points:
        now = min(parts, int(parts * point))
        if not sizes:
            sizes[-1] = CHECKPOINT_HEAD_BYTES
            wru += math.ceil(CHECKPOINT_HEAD_BYTES / 1024)
        if now > done:
            for item in range(done // CHECKPOINT_PARTS_PER_ITEM, (now - 1) // CHECKPOINT_PARTS_PER_ITEM + 1):
                filled = min(now, (item + 1) * CHECKPOINT_PARTS_PER_ITEM) - item * CHECKPOINT_PARTS_PER_ITEM
                sizes[item] = CHECKPOINT_ITEM_BYTES + CHECKPOINT_PART_BYTES * filled
                wru += math.ceil(sizes[item] / 1024)
            done = now
        rru += math.ceil(sum(sizes.values()) / 4096)
    rru += max(1, math.ceil(sum(sizes.values()) / 4096))
    wru += sum(math.ceil(size / 1024) for size in sizes.values())
    return _CheckpointUnits(wru, rru)


def _dynamodb_lines(ledger: _LedgerUnits) -> list[Line]:
    """The ledger's request units, on demand."""
    writes, reads = (
        "write request units (markers, checkpoints)",
        "read request units (job, checkpoints, tally)",
    )
    return [
        _own("DynamoDB", writes, ledger.wru, "WRU", "dynamodb_write_request_unit"),
        _own("DynamoDB", reads, ledger.rru, "RRU", "dynamodb_read_request_unit"),
    ]


def _fargate_lines(shape: PipelineShape, copies: _Copies) -> list[Line]:
    """The large objects' tasks at the expected rate, in vCPU-hours and GB-hours (Spot's
    discount where the pipeline runs on Spot); none without large objects."""
    if not copies.large_objects:
        return []
    hours = copies.fargate_seconds[EXPECTED] / 3600
    arch = _architecture(shape)
    paid = 1 - prices.price("fargate_spot_discount") if shape.fargate_spot else 1.0
    vcpu_h = shape.fargate_cpu / 1024 * hours
    gb_h = shape.fargate_memory_mb / 1024 * hours
    spot = " Spot" if shape.fargate_spot else ""
    return [
        _own(
            "Fargate", f"vCPU-hours ({arch}{spot})", vcpu_h, "vCPU-hours", f"fargate_{arch}_vcpu_hour", paid
        ),
        _own("Fargate", f"GB-hours ({arch}{spot})", gb_h, "GB-hours", f"fargate_{arch}_gb_hour", paid),
    ]


# -- the estimate's limits and what it assumes ---------------------------------------------------


def _stack_rate_limits(
    objects_per_day: int,
    objects: int,
    shape: PipelineShape,
    quota: LambdaQuota,
    copies: _Copies,
    passes: Passes,
    ledger: _LedgerUnits,
    batch_size: int,
) -> RateLimits | None:
    """The limits on one stack's rate, for this job's requests and ledger writes per object and
    one CopyBatch worker's rate on its objects (the expected one, passes included); None for a
    job of no objects, which no limit on objects per second can bind."""
    if not objects:
        return None
    in_lambda = objects - copies.large_objects - copies.skipped
    lambda_busy = busy_seconds(copies.lambda_seconds[EXPECTED], passes.count)
    return rate_limits_at(
        objects_per_day,
        shape,
        lambda_quota=quota,
        requests_per_object={op: n / objects for op, n in copies.requests.items()},
        worker_objects_per_second=in_lambda / lambda_busy if lambda_busy and in_lambda > 0 else None,
        ledger_wru_per_object=ledger.job_wru / objects,
        large_share=copies.large_objects / objects,
        tasks_per_batch=min(shape.fargate_max_concurrency, copies.large_objects * batch_size / objects),
        task_objects_per_second=(
            copies.large_objects / copies.fargate_seconds[EXPECTED]
            if copies.fargate_seconds[EXPECTED]
            else None
        ),
    )


def _model_notes(
    a: Assumptions, rates: Rates, workers: int, batches: Batches, shape: PipelineShape
) -> list[str]:
    """What the model assumes: the prices, an empty destination, the sources' layout, the
    workers' rates and the batches."""
    rate_word = (
        "measured"
        if rates.measured
        else "server-side from CPU measured locally, not on AWS; streamed assumed"
    )
    return [
        f"prices: {prices.REGION} list prices of {prices.PRICES_DATE} (functions/ferry/costs/prices.py; unverified ones are marked there)",
        "the destination holds none of the objects: everything is copied (a re-run skips what is there)",
        f"sources above {_mib(a.source_multipart_threshold)} were uploaded in {_mib(a.source_part_size)} parts, "
        + ("with full-object CRCs" if a.source_full_checksum else "with MD5 ETags and no stored checksum")
        + " (where a listing does not say)",
        f"throughput per worker {rate_word}: server-side {_pair(rates.server_side_objects)} objects/s or {_pair(rates.server_side_bytes, MiB)} MiB/s, streamed {_pair(rates.stream_objects)} objects/s or {_pair(rates.stream_bytes, MiB)} MiB/s; {workers} Lambda workers at once",
        f"batches of {plural(batches.size, 'object')} (max_items_per_batch {shape.max_items_per_batch}, max_input_bytes_per_batch {shape.max_input_bytes_per_batch} over items of ~{round(batches.mean_item_bytes)} bytes as CopyPrefix's ItemSelector makes them; AWS does not document whether the ItemBatcher measures the selected or the listed item: if the listed one, batches are smaller, never larger)",
    ]


def _fargate_notes(large_objects: int, tasks: int, shape: PipelineShape) -> list[str]:
    """How many Fargate tasks run at once, and what raises it: the duration of a job of large
    objects hangs on it more than on anything else."""
    if not large_objects:
        return []
    vcpus = tasks * shape.fargate_cpu / 1024
    return [
        f"{plural(tasks, 'Fargate task')} at once ({vcpus:,.0f} vCPUs of the account's Fargate "
        f"{'Spot' if shape.fargate_spot else 'On-Demand'} quota): a batch runs at most fargate_max_concurrency "
        f"({shape.fargate_max_concurrency}) of its large objects at a time, the large objects taken as spread "
        "evenly over the batches; raise fargate_max_concurrency, or lower max_items_per_batch, to run more"
    ]


def _unverified_prices_note(a: Assumptions, shape: PipelineShape, copies: _Copies) -> str:
    """The prices this estimate leans on that could not be read on a page, to check."""
    used = {"s3_get_head", "s3_put_copy_post_list", "batch_operations_object", "datasync_gb"}
    used.add(prices.PUT_BY_CLASS.get(a.storage_class or "STANDARD", "s3_put_copy_post_list"))
    if copies.large_objects and shape.fargate_spot:
        used.add("fargate_spot_discount")
    if copies.restores:
        used.update(name for name in prices.PRICES if name.startswith("restore_"))
    unverified = sorted(name for name in used if not prices.PRICES[name].verified)
    return f"prices not verified offline (check them on the AWS pricing pages): {', '.join(unverified)}"


def _account_notes(
    copies: _Copies, quota: LambdaQuota, cap: ConcurrencyCap, shape: PipelineShape
) -> list[str]:
    """What the job leaves out (archived objects not restored) and what the account allows:
    its Lambda concurrency, the Map's lowered to it, reservations it cannot take."""
    notes = []
    if copies.skipped:
        notes.append(
            f"{plural(copies.skipped, 'archived object')} (GLACIER, DEEP_ARCHIVE) would be skipped: needs restore (--restore TIER)"
        )
    notes.append(quota.note)
    if cap.note:
        notes.append(cap.note)
    reserved = shape.copy_reserved_concurrency + shape.record_failure_reserved_concurrency
    refused = reservations_refused(reserved, quota.account.limit) if quota.source != "default" else None
    if refused:
        notes.append(f"the settings cannot deploy in this account: {refused}")
    return notes


def _mib(n: int) -> str:
    return f"{n / MiB:g} MiB"


def _pair(pair: tuple[float, float], scale: float = 1.0) -> str:
    return f"{pair[0] / scale:.3g}-{pair[1] / scale:.3g}"
