"""When the server acted but its reply was lost, and botocore sent the request again.

botocore retries a request whose connection broke or whose answer was a 5xx (ferry.s3.clients), which
is right for every S3 request Ferry sends but two, whose first send may have done its work:

- CreateMultipartUpload: the retry makes a second upload; the first one, whose id never
  arrived, stays open (it costs storage for any parts, and shows in ListMultipartUploads)
  until a lifecycle rule aborts it. `abort_lost_creates` aborts it at once.
- CompleteMultipartUpload: the retry finds the upload gone, since the first send completed it
  (MinIO answers NoSuchUpload; versitygw answers the completion again). `completed_already`
  recognises the object the first send made, from the part ETags, so the copy is not failed
  (and counted failed) while the destination holds it.

botocore retries connection errors and 5xx answers and reports how many times it did in
`ResponseMetadata.RetryAttempts` (boto3 guide, retries.html, "How to validate if your client
performs a retry attempt"); that is how a possibly lost first send is known. Both are found by
tests/faults/test_lost_replies.py, through a proxy that cuts the reply after
the server acted. Neither can be settled by botocore's retry configuration: the retry itself is
what makes the second upload, and a NoSuchUpload is an answer, not a fault to retry.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import re
import time
from collections.abc import Sequence
from typing import Any

from ferry.engine.records.upload_marks import open_uploads_of_key
from ferry.errors import error_code

log = logging.getLogger(__name__)
_MD5_HEX = re.compile(r"^[0-9a-f]{32}$")


def retried(response: dict[str, Any]) -> bool:
    """botocore sent the request more than once (its ResponseMetadata says how many retries)."""
    return bool(response.get("ResponseMetadata", {}).get("RetryAttempts"))


def create_upload(client: Any, bucket: str, key: str, **args: Any) -> dict[str, Any]:
    """CreateMultipartUpload; if botocore had to send it more than once, the uploads the
    earlier sends made are aborted (abort_lost_creates)."""
    started = time.monotonic()
    response = client.create_multipart_upload(Bucket=bucket, Key=key, **args)
    if retried(response):
        abort_lost_creates(client, bucket, key, response["UploadId"], time.monotonic() - started)
    return response


def abort_lost_creates(client: Any, bucket: str, key: str, upload_id: str, elapsed: float) -> list[str]:
    """Abort the uploads an earlier send of our retried CreateMultipartUpload made.

    They are the uploads of exactly this key, by the same initiator, initiated within the time
    our call took, up to our own upload's start (by the server's clock, so no clock skew
    enters; one second more because some servers, versitygw among them, keep whole seconds).
    Another writer that started an upload of this same key within that second or two would
    lose it; two writers of one key at once are in conflict whatever Ferry does. Returns the
    upload ids aborted. Nothing is aborted if our own upload is not listed.
    """
    try:
        uploads = list(open_uploads_of_key(client, bucket, key))
    except Exception as error:
        log.warning("cannot list uploads of s3://%s/%s to abort a lost one: %s", bucket, key, error)
        return []
    ours = next((u for u in uploads if u.get("UploadId") == upload_id), None)
    if ours is None or not isinstance(ours.get("Initiated"), datetime.datetime):
        return []
    earliest = ours["Initiated"] - datetime.timedelta(seconds=elapsed + 1.0)
    aborted = []
    for upload in uploads:
        initiated = upload.get("Initiated")
        if (
            upload.get("UploadId") != upload_id
            and isinstance(initiated, datetime.datetime)
            and earliest <= initiated <= ours["Initiated"]
            and upload.get("Initiator") == ours.get("Initiator")
        ):
            try:
                client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload["UploadId"])
                aborted.append(upload["UploadId"])
            except Exception as error:
                log.warning(
                    "could not abort lost upload %s of s3://%s/%s: %s", upload["UploadId"], bucket, key, error
                )
    if aborted:
        log.info("aborted %d upload(s) of s3://%s/%s made by a retried create", len(aborted), bucket, key)
    return aborted


def multipart_etag(part_etags: Sequence[str]) -> str | None:
    """The ETag S3 gives an object completed from these parts (MD5 of the part MD5s, `-N`),
    or None when a part's ETag is not its MD5 (SSE-KMS, SSE-C)."""
    digests = []
    for etag in part_etags:
        value = etag.strip('"')
        if not _MD5_HEX.match(value):
            return None
        digests.append(bytes.fromhex(value))
    return f"{hashlib.md5(b''.join(digests)).hexdigest()}-{len(digests)}"


def completed_already(
    client: Any, bucket: str, key: str, part_etags: Sequence[str], size: int, error: BaseException
) -> dict[str, Any] | None:
    """The destination's HEAD, when a retried CompleteMultipartUpload answered NoSuchUpload
    because its first send completed the upload: the object there has exactly the ETag those
    parts make, and their size. None otherwise (the failure stands)."""
    response = getattr(error, "response", None) or {}
    if error_code(error) != "NoSuchUpload" or not retried(response):
        return None
    expected = multipart_etag(part_etags)
    if expected is None:
        return None
    try:
        head = client.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    except Exception:
        return None
    if head.get("ETag", "").strip('"') != expected or int(head.get("ContentLength", -1)) != size:
        return None
    log.info("s3://%s/%s: the first CompleteMultipartUpload made the object; its reply was lost", bucket, key)
    return head
