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
objects as a histogram, and how many a batch holds), `requests` (the engine's S3 requests per
object), `durations` (a worker's time and the limits on a stack's rate), `peers` (AWS's managed
services on the same objects) and `prices` (the dated table). This module adds what the
pipeline itself costs (its Lambda, Step Functions, DynamoDB and Fargate, its listings and
reports) and puts the estimate together.

The model is vocabulary (imported by the CLI): it does not import the pipeline.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, replace
from typing import Any

from ferry.costs import prices
from ferry.costs.durations import (
    FARGATE_PASS_SECONDS,
    FARGATE_START_SECONDS,
    PASS_OVERHEAD_SECONDS,
    RESUME_SECONDS,
    RateLimits,
    rate_limits_at,
    worker_seconds,
)
from ferry.costs.inputs import ONE_VCPU_MB, Assumptions, LambdaQuota, PipelineShape, Rates
from ferry.costs.peers import peer_costs
from ferry.costs.prices import GB, Line
from ferry.costs.requests import DESTINATION_WRITES, PUT_CLASS, object_requests, resume_requests
from ferry.costs.workload import Workload, bin_layout, items_per_batch
from ferry.counts import plural
from ferry.limits import (
    DEFAULT_OBJECTS_PER_DAY,
    MiB,
)
from ferry.models import ARCHIVE_CLASSES
from ferry.quotas.lambda_concurrency import (
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

REPORT_LINE_BYTES = 400  # assumed: one object's line in a batch report
CHECKPOINT_PART_BYTES = 150  # a part's entry in a saved checkpoint (upload id, etag, checksum)
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
        times = [worker_seconds(b.objects, size, a.server_side, rates, w, share) for w in (0, 1, None)]
        one = worker_seconds(1, size, a.server_side, rates, None)
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

    lines.extend(prices.transfer_lines(copied_bytes, a.cross_region))

    # Duration: workers at once = the Map's concurrency (at most one per batch); large objects
    # on Fargate, up to fargate_max_concurrency per batch, alongside.
    workers = max(1, min(shape.max_concurrency, batches or 1))
    fargate_workers = max(1, min(large_objects or 1, shape.max_concurrency * shape.fargate_max_concurrency))
    duration = []
    for i in (1, 0):  # fast, slow
        lam = (lambda_seconds[i] + passes * PASS_OVERHEAD_SECONDS) / workers
        far = fargate_seconds[i] / fargate_workers
        duration.append(max(lam, far) + 30.0)  # + Prepare, Map start and Finalize
    alternatives = peer_costs(work, a, copied_bytes, objects - skipped)

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


def _mib(n: int) -> str:
    return f"{n / MiB:g} MiB"


def _pair(pair: tuple[float, float], scale: float = 1.0) -> str:
    return f"{pair[0] / scale:.3g}-{pair[1] / scale:.3g}"
