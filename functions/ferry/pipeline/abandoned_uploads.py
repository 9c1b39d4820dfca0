"""Finalize's clean-up of the multipart uploads a crash left open for its own job.

A worker killed mid-copy (a Lambda timeout, a Fargate task stopped without its SIGTERM
grace, a lost machine) leaves its upload open, and S3 bills the stored parts until someone
aborts it. A later pass or a retried task resumes such an upload from its mark
(engine/records/upload_marks.py); whatever is still open when the job ends was given up. Finalize
aborts those, once no batch of the job runs any more, so a job leaves nothing behind that
costs storage even where the destination bucket has no AbortIncompleteMultipartUpload rule.

Only uploads carrying Ferry's mark for THIS job are touched: another job's (which may still
be running), the CLI's (marked with no job) and anybody else's (unmarked) are left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ferry.engine.records.upload_marks import FerryUpload, abort_ferry_upload, list_ferry_uploads
from ferry.errors import describe
from ferry.jobspec import JobSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AbandonedUploads:
    """What the clean-up did: uploads aborted, and why it stopped early if it did."""

    aborted: int = 0
    error: str | None = None


def marks_prefix_of(spec: JobSpec) -> str | None:
    """Where the job's workers mark their uploads (None: they do not mark them)."""
    return spec.options.policy.marks_prefix


def abandoned_uploads(client: Any, spec: JobSpec, *, now: datetime | None = None) -> Iterator[FerryUpload]:
    """The job's marked uploads under its destination prefix, old enough to abort.

    Age is measured from S3's own `Initiated` time. With the default 0 seconds every one of
    the job's uploads counts, whatever the clocks say: at Finalize none is still being written.
    """
    prefix = marks_prefix_of(spec)
    if prefix is None:
        return
    after = spec.options.abort_uploads_after_seconds
    cutoff = (now or datetime.now(UTC)) - timedelta(seconds=after)
    for upload in list_ferry_uploads(
        client, spec.destination_bucket, key_prefix=spec.destination_prefix, marks_prefix=prefix
    ):
        if upload.mark.job_id != spec.job_id:
            continue
        if after and upload.initiated > cutoff:
            continue
        yield upload


def abort_abandoned_uploads(client: Any, spec: JobSpec, *, now: datetime | None = None) -> AbandonedUploads:
    """Abort each of the job's abandoned uploads and delete its mark. A refusal (an old stack
    without the grants, say) ends the clean-up with the reason in the result instead of
    failing Finalize: the job's copies are settled whatever happens to the leftovers."""
    aborted = 0
    bucket = spec.destination_bucket
    try:
        for upload in abandoned_uploads(client, spec, now=now):
            abort_ferry_upload(client, bucket, upload, marks_prefix=marks_prefix_of(spec) or "")
            log.info(
                "aborted upload %s of s3://%s/%s, abandoned by a crash", upload.upload_id, bucket, upload.key
            )
            aborted += 1
    except (ClientError, BotoCoreError) as error:
        reason = describe(
            error,
            side="destination",
            action="ListMultipartUploads/AbortMultipartUpload",
            bucket=bucket,
            key=spec.destination_prefix,
        )
        log.warning("could not abort the job's abandoned uploads: %s", reason)
        return AbandonedUploads(aborted, reason)
    return AbandonedUploads(aborted)
