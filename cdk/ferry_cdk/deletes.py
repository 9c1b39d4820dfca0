"""What a replication with `"deletes": true` adds to the stack: the "Object Deleted" detail-type
on its EventBridge rule, and the statements the function running `apply_deletes`
(functions/ferry/pipeline/replication/deletes.py) needs. Nothing at all when deletes are off.

The rule and the starter's role are built in replication.py; it asks this module for
`deleted_detail_types(replication)` and `deletes_statements(replication, ...)`.

What the statements allow, and why no more:
- destination prefix: `s3:DeleteObject` (a plain delete: a versioned destination gets a delete
  marker; no `s3:DeleteObjectVersion` on this role; a destination reached through `role_arn` is
  deleted in a session of that role denied it, replication.starter_deletes.NO_VERSION_DELETES) and
  `s3:GetObject` (the HEAD that compares the destination with the copy record; S3 also
  requires it for a DeleteObject with `If-Match: <ETag>`, user guide conditional-deletes.html);
- source prefix: `s3:GetObject` (is the key back?) and `s3:GetObjectVersion` (the HEAD of the
  version a delete marker hides, the second proof);
- `s3:ListBucket` on both buckets, and `s3:ListBucketVersions` on the source's, only with
  `s3:prefix` inside the configured prefixes: a listing prefixed by the key proves a 403 HEAD
  means "absent", and ListObjectVersions finds the version under a marker;
- the ledger table: `dynamodb:GetItem` and `dynamodb:DeleteItem` (read and forget copy records).
"""

from __future__ import annotations

from typing import Protocol

from aws_cdk import aws_iam as iam

from ferry.pipeline.locations import Location

from .access import bucket_arn, iam_escape, object_arns

OBJECT_DELETED = "Object Deleted"


class Replication(Protocol):
    name: str
    deletes: bool
    source: Location
    destination: Location


def deleted_detail_types(replication: Replication) -> list[str]:
    """The detail-types to add to the replication's rule (besides "Object Created")."""
    return [OBJECT_DELETED] if replication.deletes else []


def deletes_statements(replication: Replication, *, table_arn: str) -> list[iam.PolicyStatement]:
    """The statements the deleting function needs for this replication ([] when deletes are off)."""
    if not replication.deletes:
        return []
    sid = "Deletes" + "".join(part.capitalize() for part in replication.name.split("-"))
    source, destination = replication.source, replication.destination
    statements = [
        iam.PolicyStatement(
            sid=f"{sid}Destination",
            actions=["s3:DeleteObject", "s3:GetObject"],
            resources=object_arns([destination]),
        ),
        iam.PolicyStatement(
            sid=f"{sid}Source",
            actions=["s3:GetObject", "s3:GetObjectVersion"],
            resources=object_arns([source]),
        ),
        iam.PolicyStatement(
            sid=f"{sid}Records",
            actions=["dynamodb:GetItem", "dynamodb:DeleteItem"],
            resources=[table_arn],
        ),
    ]
    for name, location, actions in (
        ("ListSource", source, ["s3:ListBucket", "s3:ListBucketVersions"]),
        ("ListDestination", destination, ["s3:ListBucket"]),
    ):
        conditions = (
            {"StringLike": {"s3:prefix": [iam_escape(location.prefix) + "*"]}} if location.prefix else None
        )
        statements.append(
            iam.PolicyStatement(
                sid=f"{sid}{name}",
                actions=actions,
                resources=[bucket_arn(location.bucket)],
                conditions=conditions,
            )
        )
    return statements
