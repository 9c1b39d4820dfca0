"""IAM for Finalize's clean-up of its job's abandoned uploads (functions/ferry/pipeline/
abandoned_uploads.py), found by their marks (functions/ferry/engine/records/upload_marks.py).

Each multipart upload a worker opens is marked by a small object at `.ferry/uploads/...` in
the destination BUCKET, outside any configured destination prefix (the workers' own grants on
it are in stack._copy_statements). Finalize lists the marks (ListObjectsV2 under the marks
prefix only), finds their open uploads (ListMultipartUploads: s3:ListBucketMultipartUploads
on the bucket, per "Multipart upload API and permissions" in the S3 user guide), aborts its
own job's abandoned ones (s3:AbortMultipartUpload on the configured destination prefixes,
where the uploads are) and deletes their marks by version id (s3:DeleteObjectVersion), so a
versioned bucket keeps nothing of them. A destination reached through a role or a
secret is written as the workers write it, so Finalize may reach it the same way.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

from ferry.models import DEFAULT_MARKS_PREFIX
from ferry.pipeline.locations import Location
from ferry.pipeline.settings import PipelineSettings

from .access import FIND_UPLOADS, bucket_arns, list_bucket_statements, marks_arns, object_arns, statement
from .reach import location_reach_statements


def mark_locations(settings: PipelineSettings) -> list[Location]:
    """The marks prefix of every destination bucket, for ListBucket's `s3:prefix` condition."""
    buckets = sorted({loc.bucket for loc in settings.destinations})
    return [Location(bucket, DEFAULT_MARKS_PREFIX) for bucket in buckets]


def finalize_statements(stack: cdk.Stack, settings: PipelineSettings) -> list[iam.PolicyStatement]:
    """Find the job's abandoned uploads by their marks, abort them, delete the marks."""
    return [
        statement(
            "ReadUploadMarks",
            ("s3:GetObject", "s3:DeleteObject", "s3:DeleteObjectVersion"),
            marks_arns(settings.destinations),
        ),
        *list_bucket_statements(mark_locations(settings), sid="ListUploadMarks"),
        statement("FindOpenUploads", FIND_UPLOADS, bucket_arns(settings.destinations)),
        statement("AbortAbandonedUploads", ["s3:AbortMultipartUpload"], object_arns(settings.destinations)),
        *location_reach_statements(stack, settings.destinations, settings),
    ]
