"""Finalize's clean-up of the multipart uploads a crash left open for its own job.

A worker killed mid-copy (a Lambda timeout, a Fargate task stopped without its SIGTERM
grace, a lost machine) leaves its upload open, and S3 bills the stored parts until someone
aborts it. A later pass or a retried task resumes such an upload from its mark
(engine/records/upload_marks.py); whatever is still open when the job ends was given up. Finalize
aborts those, once no batch of the job runs any more, so a job leaves nothing behind that
costs storage even where the destination bucket has no AbortIncompleteMultipartUpload rule.

A worker killed after CompleteMultipartUpload answered and before it deleted the upload's
mark leaves the mark alone: its retry finds the object (or, in an all_versions job, the
version) already at the destination, so no copy of it is left to delete the mark, which in a
versioned bucket is a version in the bucket's history. Finalize deletes the job's marks whose
upload no longer exists too, each by the version it was stored as, in the same pass over the
marks.

Only uploads and marks carrying Ferry's mark for THIS job are touched: another job's (which may
still be running), the CLI's (marked with no job) and anybody else's (unmarked) are left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ferry.engine.records.upload_marks import (
    FerryUpload,
    UploadMark,
    abort_ferry_upload,
    delete_mark,
    scan_marks,
)
from ferry.errors import describe
from ferry.jobspec import JobSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AbandonedUploads:
    """What the clean-up did: uploads aborted, marks of ended uploads deleted, and why it
    stopped early if it did."""

    aborted: int = 0
    error: str | None = None
    marks_deleted: int = 0


def marks_prefix_of(spec: JobSpec) -> str | None:
    """Where the job's workers mark their uploads (None: they do not mark them)."""
    return spec.options.policy.marks_prefix


def abandoned_uploads(client: Any, spec: JobSpec, *, now: datetime | None = None) -> Iterator[FerryUpload]:
    """The job's marked uploads under its destination prefix, old enough to abort."""
    for _, upload in job_leftovers(client, spec, now=now):
        if upload is not None:
            yield upload


def job_leftovers(
    client: Any, spec: JobSpec, *, now: datetime | None = None
) -> Iterator[tuple[UploadMark, FerryUpload | None]]:
    """The job's marks under its destination prefix, old enough to clean up, each with its open
    upload, or None where the upload has ended (the mark outlived a worker killed between
    ending the upload and deleting the mark).

    Age is measured from S3's own `Initiated` time (a mark without an upload: the time it was
    written). With the default 0 seconds every one of the job's marks counts, whatever the
    clocks say: at Finalize none is still being written.
    """
    prefix = marks_prefix_of(spec)
    if prefix is None:
        return
    after = spec.options.abort_uploads_after_seconds
    cutoff = (now or datetime.now(UTC)) - timedelta(seconds=after)
    for mark, upload in scan_marks(
        client, spec.destination_bucket, key_prefix=spec.destination_prefix, marks_prefix=prefix
    ):
        if mark.job_id != spec.job_id:
            continue
        if after and (upload.initiated if upload is not None else mark.created) > cutoff:
            continue
        yield mark, upload


def abort_abandoned_uploads(client: Any, spec: JobSpec, *, now: datetime | None = None) -> AbandonedUploads:
    """Abort each of the job's abandoned uploads and delete its mark. A refusal (an old stack
    without the grants, say) ends the clean-up with the reason in the result instead of
    failing Finalize: the job's copies are settled whatever happens to the leftovers."""
    aborted = marks_deleted = 0
    bucket, marks_prefix = spec.destination_bucket, marks_prefix_of(spec) or ""
    try:
        for mark, upload in job_leftovers(client, spec, now=now):
            if upload is None:
                delete_ended_uploads_mark(client, bucket, mark, marks_prefix)
                marks_deleted += 1
                continue
            abort_ferry_upload(client, bucket, upload, marks_prefix=marks_prefix)
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
        return AbandonedUploads(aborted, reason, marks_deleted)
    return AbandonedUploads(aborted, marks_deleted=marks_deleted)


def delete_ended_uploads_mark(client: Any, bucket: str, mark: UploadMark, marks_prefix: str) -> None:
    """Delete the mark of an upload that has ended, by the version it was read from: in a
    versioned bucket it leaves neither a version nor a delete marker."""
    delete_mark(
        client, bucket, mark.dest_key, mark.upload_id, marks_prefix=marks_prefix, stored_as=mark.stored_as
    )
    log.info(
        "deleted the mark of upload %s of s3://%s/%s, which ended before a crash let it go",
        mark.upload_id,
        bucket,
        mark.dest_key,
    )
