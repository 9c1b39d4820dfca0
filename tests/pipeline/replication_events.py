"""Real-shaped S3 events as EventBridge delivers them, and SQS records as Lambda receives them.

The event's shape is the S3 user guide's example "Object created" in "EventBridge event
message structure" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html):
envelope `version`, `id`, `detail-type`, `source: aws.s3`, `account`, `time`, `region`,
`resources`, and `detail` with `bucket.name`, `object.key`, `size`, `etag`, `version-id`, `sequencer`, `request-id`, `requester`, `source-ip-address`,
`reason`. The key is URL-encoded as the classic notification format documents
(notification-content-structure.html) unless `encode=False`: the EventBridge page says nothing of
encoding and a captured EventBridge event shows `:` as written, so both readings are tested. The
SQS record is the shape of Lambda's SQS event (Lambda developer guide,
"Using Lambda with Amazon SQS", example event).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any
from urllib.parse import quote_plus

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:ferry-replication-events"


def s3_event(
    bucket: str,
    key: str,
    *,
    sequencer: str,
    size: int = 5,
    etag: str = "b1946ac92492d2347c6235b4d2611184",
    time: str = "2021-11-12T00:00:00Z",
    detail_type: str = "Object Created",
    version_id: str | None = "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e",
    event_id: str | None = None,
    encode: bool = True,
) -> dict[str, Any]:
    obj: dict[str, Any] = {"key": quote_plus(key, safe="/") if encode else key, "size": size, "etag": etag}
    if version_id is not None:
        obj["version-id"] = version_id
    obj["sequencer"] = sequencer
    return {
        "version": "0",
        "id": event_id or str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": "aws.s3",
        "account": "111122223333",
        "time": time,
        "region": "us-east-1",
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": obj,
            "request-id": "N4N7GDK58NMKJ12R",
            "requester": "123456789012",
            "source-ip-address": "1.2.3.4",
            "reason": "PutObject",
        },
    }


def sqs_record(
    body: Any, message_id: str | None = None, receipt: str = "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a"
) -> dict[str, Any]:
    text = body if isinstance(body, str) else json.dumps(body)
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": receipt,
        "body": text,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "1545082649183",
            "SenderId": "AIDAIENQZJOLO23YVJ4VO",
            "ApproximateFirstReceiveTimestamp": "1545082649185",
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(text.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": "us-east-1",
    }


def sqs_event(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Records": records}
