"""What the same objects would cost copied by AWS's managed services instead (S3 Batch Operations,
DataSync, S3 Batch Replication), at their list prices, beside the pipeline's own estimate."""

from __future__ import annotations

import math

from ferry.costs import prices
from ferry.costs.inputs import Assumptions
from ferry.costs.prices import GB, Line
from ferry.costs.workload import Workload
from ferry.counts import plural
from ferry.limits import MAX_SINGLE_COPY


def peer_costs(work: Workload, a: Assumptions, copied_bytes: float, objects: int) -> dict[str, list[Line]]:
    """The same objects copied by AWS's managed services, at their list prices."""
    put_into = prices.put_price(a.storage_class)
    transfer = prices.transfer_lines(copied_bytes, a.cross_region)
    return {
        "S3 Batch Operations (Copy)": _batch_operations_copy(work, objects, put_into, transfer),
        "DataSync": [*_datasync(copied_bytes, objects, put_into), *transfer],
        "S3 Batch Replication": [
            *_batch_operations_job(objects),
            Line("S3 requests", "replication PUT", objects, "requests", objects * put_into),
            *transfer,
        ],
    }


def _batch_operations_copy(work: Workload, objects: int, put_into: float, transfer: list[Line]) -> list[Line]:
    """S3 Batch Operations' Copy: one CopyObject an object, which cannot copy one over 5 GB
    (said as a line of its own, at no cost)."""
    too_big = sum(b.objects for b in work.bins.values() if b.mean_size > MAX_SINGLE_COPY)
    lines = [
        *_batch_operations_job(objects),
        Line("S3 requests", "CopyObject", objects - too_big, "requests", (objects - too_big) * put_into),
        *transfer,
    ]
    if too_big:
        lines.append(
            Line(
                "S3 Batch Operations",
                f"{plural(too_big, 'object')} over 5 GB cannot be copied",
                0,
                "objects",
                0.0,
            )
        )
    return lines


def _datasync(copied_bytes: float, objects: int, put_into: float) -> list[Line]:
    """DataSync (S3 to S3), approximately: it lists both sides, HEADs and GETs each source
    object, HEADs and PUTs each destination object (verification reads it back: not counted)."""
    gb = copied_bytes / GB
    return [
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
    ]


def _batch_operations_job(objects: int) -> list[Line]:
    """What S3 Batch Operations charges for one job over `objects` objects, whichever operation
    it runs (Copy, or Batch Replication, which runs as a Batch Operations job)."""
    return [
        Line("S3 Batch Operations", "job", 1, "jobs", prices.price("batch_operations_job")),
        Line(
            "S3 Batch Operations",
            "objects",
            objects,
            "objects",
            objects * prices.price("batch_operations_object"),
        ),
    ]
