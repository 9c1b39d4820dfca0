"""IAM statements scoped to the configured buckets and prefixes: nothing wider.

Object actions go on `arn:aws:s3:::bucket/prefix*` only; `s3:ListBucket` goes on the bucket
with an `s3:prefix` condition. Keys may hold characters IAM reads as wildcards or variables
(`*`, `?`, `$`): they are escaped (`${*}`, `${?}`, `${$}`), so a prefix `a*` grants `a*...`
and not `a...`.

The condition is `StringLike`, not `StringLikeIfExists`: a ListObjectsV2 without a Prefix
carries no `s3:prefix`, and IfExists would let it list the whole bucket. The price: S3 answers
a GET or HEAD of a missing key with 403 instead of 404 unless the caller may list the bucket
(HeadObject, "Permissions"), and such a request carries no `s3:prefix` either, so with
`StringLike` it fails the condition (IAM condition operators: a key absent from the request
makes every operator false but ...IfExists and Null). The code copes: every listing names a
Prefix inside its configured location (tests/engine/test_bucket_scope.py), and skip-existing
takes a 403 HEAD as "absent" only when a listing with the key as its prefix shows the key
absent (engine/compare/skip.py); any other 403 stays an access error.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

from ferry.models import DEFAULT_MARKS_PREFIX
from ferry.pipeline.locations import Location

SOURCE_READ = (
    "s3:GetObject",
    "s3:GetObjectVersion",
    "s3:GetObjectTagging",
    "s3:GetObjectVersionTagging",
    "s3:GetObjectAttributes",
    "s3:GetObjectVersionAttributes",  # GetObjectAttributes of a version (all_versions reads by id)
    "s3:RestoreObject",
)
DESTINATION_WRITE = (
    "s3:PutObject",
    "s3:PutObjectTagging",
    "s3:GetObject",  # verification and the skip-existing check read the copy back
    "s3:GetObjectTagging",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
    "s3:DeleteObject",  # a copy that fails verification is removed
    # Versioned destinations: the copy is verified (HeadObject) and, if unproved, removed
    # (DeleteObject) by the VersionId it was written as: these need the version actions.
    "s3:GetObjectVersion",
    "s3:DeleteObjectVersion",
    "s3:GetObjectVersionTagging",  # the tags read back by the VersionId the copy was written as
)
LEDGER_READ_WRITE = (
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:Query",
    "dynamodb:ConditionCheckItem",
)
# A batch's report object: written, read back after a crash, deleted when the ledger says
# that attempt does not count (ferry.pipeline.recording.record).
BATCH_REPORTS = ("s3:GetObject", "s3:PutObject", "s3:DeleteObject")


# An all_versions job (ferry.pipeline.history_keys): Prepare and the copy workers list the
# versions under the configured prefixes (ListObjectVersions takes the same s3:prefix
# condition as ListObjectsV2), and Prepare reads both buckets' versioning status.
LIST_VERSIONS = ("s3:ListBucketVersions",)
LIST_AND_VERSIONS = ("s3:ListBucket", *LIST_VERSIONS)
READ_VERSIONING = ("s3:GetBucketVersioning",)


# Upload marks (ferry.engine.records.upload_marks): a small object per open multipart upload, written
# after CreateMultipartUpload, read to resume after a crash, deleted after Complete or Abort by
# its version id (DeleteObject with VersionId is s3:DeleteObjectVersion), so a versioned bucket
# keeps neither the mark's version nor a delete marker.
UPLOAD_MARKS = ("s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:DeleteObjectVersion")
# Finding a crashed run's upload of a key: ListMultipartUploads is a bucket action.
FIND_UPLOADS = ("s3:ListBucketMultipartUploads",)
# No mark is written into a bucket whose Object Lock default retention would keep it: its
# configuration is read once per run (GetObjectLockConfiguration, a bucket action).
READ_OBJECT_LOCK = ("s3:GetBucketObjectLockConfiguration",)


def iam_escape(text: str) -> str:
    """A key prefix as an IAM ARN or StringLike pattern matches it literally."""
    return "".join({"*": "${*}", "?": "${?}", "$": "${$}"}.get(c, c) for c in text)


def bucket_arn(bucket: str) -> str:
    return f"arn:{cdk.Aws.PARTITION}:s3:::{bucket}"


def object_arns(locations: Iterable[Location]) -> list[str]:
    return sorted({f"{bucket_arn(loc.bucket)}/{iam_escape(loc.prefix)}*" for loc in locations})


def marks_arns(locations: Iterable[Location], marks_prefix: str = DEFAULT_MARKS_PREFIX) -> list[str]:
    """The marks prefix of each destination bucket (marks live outside the configured prefix)."""
    return sorted({f"{bucket_arn(loc.bucket)}/{iam_escape(marks_prefix)}*" for loc in locations})


def bucket_arns(locations: Iterable[Location]) -> list[str]:
    return sorted({bucket_arn(loc.bucket) for loc in locations})


def list_bucket_statements(
    locations: Iterable[Location], *, sid: str, actions: Sequence[str] = ("s3:ListBucket",)
) -> list[iam.PolicyStatement]:
    """`s3:ListBucket` (or `actions`: `LIST_VERSIONS`) per bucket, limited to the configured
    prefixes (`StringLike`: a listing must name a Prefix inside them; see the module docstring
    for the 403 this implies)."""
    by_bucket: dict[str, set[str]] = {}
    for loc in locations:
        by_bucket.setdefault(loc.bucket, set()).add(loc.prefix)
    statements = []
    for index, (bucket, prefixes) in enumerate(sorted(by_bucket.items())):
        conditions = None
        if "" not in prefixes:  # a whole bucket configured: no condition to add
            conditions = {"StringLike": {"s3:prefix": sorted(iam_escape(p) + "*" for p in prefixes)}}
        statements.append(
            iam.PolicyStatement(
                sid=f"{sid}{index}",
                actions=list(actions),
                resources=[bucket_arn(bucket)],
                conditions=conditions,
            )
        )
    return statements


def statement(sid: str, actions: Sequence[str], resources: Sequence[str]) -> iam.PolicyStatement:
    return iam.PolicyStatement(sid=sid, actions=list(actions), resources=list(resources))
