"""One conditional delete: `DeleteObject` with `If-Match: <an ETag already checked>`, never a
`VersionId`, for every delete Ferry decides on (`ferry sync --delete`, replicated deletes).

An object rewritten since its ETag was read is kept (412); on a versioned bucket the delete
leaves a delete marker over the versions, which stay. S3 general purpose buckets honour
If-Match on DeleteObject (user guide, conditional-deletes.html); a server that refuses the
header gets the delete without it, and the caller says so in its result, since a write
between the check and the delete would then be lost.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from ferry.errors import error_code

# What a server that does not support If-Match on DeleteObject answers.
CONDITION_REFUSED = frozenset({"NotImplemented", "501", "InvalidArgument", "InvalidRequest"})
CONDITION_FAILED = frozenset({"PreconditionFailed", "412"})  # another ETag now: kept


def delete_if_match(client: Any, bucket: str, key: str, etag: str | None) -> tuple[dict[str, Any], bool]:
    """DeleteObject with If-Match on `etag` (none when `etag` is None), never a VersionId: S3's
    answer, and whether the server refused the condition and the delete went without it.
    Every other error, a failed condition (CONDITION_FAILED) or an absent key among them, is
    raised for the caller to read."""
    if etag is None:
        return client.delete_object(Bucket=bucket, Key=key), False
    try:
        return client.delete_object(Bucket=bucket, Key=key, IfMatch=f'"{etag}"'), False
    except ClientError as error:
        if error_code(error) not in CONDITION_REFUSED:
            raise
    return client.delete_object(Bucket=bucket, Key=key), True
