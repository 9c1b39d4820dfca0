"""The job's ledger in DynamoDB: one job item, one marker per recorded batch pass, one item per
failed object, and multipart checkpoints. No item per copied object (cost): their detail is
in the job's report prefix in S3.

Counts must add up to the objects listed even when Step Functions retries a batch or two
copies of a batch race. So a batch pass is recorded by creating its marker, with its counts,
only if absent: whoever creates the marker is the attempt that counts; every other attempt
reads the marker and returns what it holds. The job's counts are the sum of its markers
(`tally`), taken by Finalize and then stored on the job item.

Why no counter on the job item: every batch adding to one item would make that item hot,
and a transaction that touches it (marker + counters) is cancelled with TransactionConflict
whenever another transaction is in flight on the same item, which botocore does not retry. At
100 concurrent batches that turns copied objects into false failures. Markers are each
written once, by one writer: nothing contends.

Table layout (partition key `pk`, sort key `sk`, TTL attribute `expires_at`):
    JOB#<id>   JOB              status, spec, times; counts once Finalize has summed them
    JOB#<id>   BATCH#<key>      attempt, report key, counts, hand-over, failures_recorded,
                                recorded_at, batch_stats (for the HTML report's charts)
    JOB#<id>   FAIL#<hash>      bucket, key, version id, destination key, reason
    CKPT#<id>  CKPT, PARTS#<n>  a multipart checkpoint, split by part range (expires; see
                                dynamodb_checkpoints.py)
    COPY#<h>   COPY             what a replication job with deletes on wrote at one
                                destination key (h: hash of bucket and key; no TTL: a source
                                may be deleted years after its copy; replaced by the next copy,
                                removed with the destination object). See replication/deletes.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from ferry.errors import FerryError, error_code
from ferry.pipeline.ledger import attribute_values
from ferry.pipeline.ledger.contract import (
    DAY,
    INTERRUPTED,
    RUNNING,
    BatchCounts,
    Failure,
    JobExists,
    Recorded,
    Tally,
    recorded_by,
)
from ferry.pipeline.ledger.copy_records import CopyRecord, record_id
from ferry.pipeline.ledger.dynamodb_checkpoints import DynamoCheckpointStore

_serialize, _deserialize = (
    attribute_values.serialize,
    attribute_values.deserialize,
)  # boto3's rules, not boto3


class DynamoLedger:
    """The ledger on one DynamoDB table (see the module docstring for its layout)."""

    def __init__(self, client: Any, table: str, *, ttl_days: int = 90) -> None:
        self.client, self.table, self.ttl_days = client, table, ttl_days

    # -- jobs ---------------------------------------------------------------------------------

    def create_job(self, job_id: str, spec: Mapping[str, Any], *, execution_arn: str | None = None) -> None:
        item = {
            "pk": _job(job_id),
            "sk": "JOB",
            "job_id": job_id,
            "status": "RUNNING",
            "spec": json.dumps(spec),
            "started_at": _now(),
            "execution_arn": execution_arn,
        }
        try:
            self.client.put_item(
                TableName=self.table,
                Item=_item({k: v for k, v in item.items() if v is not None}),
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                if recorded_by(self.job(job_id), execution_arn):
                    return  # a retried Prepare of the execution that created it: its own job
                raise JobExists(
                    f"job_id: a job {job_id!r} already exists in the ledger; give a new job_id (or omit it to use the execution name)"
                ) from error
            raise

    def job(self, job_id: str) -> dict[str, Any] | None:
        response = self.client.get_item(
            TableName=self.table, Key=_item({"pk": _job(job_id), "sk": "JOB"}), ConsistentRead=True
        )
        if "Item" not in response:
            return None
        job = _plain(response["Item"])
        job["spec"] = json.loads(job["spec"])
        return job

    def mark_job(self, job_id: str, status: str) -> bool:
        """Set an unfinished job's status (INTERRUPTED when `ferry run` stops early, RUNNING
        again when it resumes); False when the job is missing or already finished."""
        try:
            self.client.update_item(
                TableName=self.table,
                Key=_item({"pk": _job(job_id), "sk": "JOB"}),
                UpdateExpression="SET #s = :s",
                ConditionExpression="#s IN (:running, :interrupted)",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=_item(
                    {":s": status, ":running": RUNNING, ":interrupted": INTERRUPTED}
                ),
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def finish_job(self, job_id: str, status: str, report: Mapping[str, Any], tally: Tally) -> None:
        """The job's status, its report, and its counts as Finalize summed them."""
        totals = tally.to_dict()
        self.client.update_item(
            TableName=self.table,
            Key=_item({"pk": _job(job_id), "sk": "JOB"}),
            UpdateExpression="SET #s = :s, finished_at = :t, report = :r, "
            + ", ".join(f"{name} = :{name}" for name in totals),
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues=_item(
                {
                    ":s": status,
                    ":t": _now(),
                    ":r": json.dumps(report),
                    **{f":{k}": v for k, v in totals.items()},
                }
            ),
        )

    # -- batches ------------------------------------------------------------------------------

    def record_batch(
        self,
        job_id: str,
        batch_key: str,
        counts: BatchCounts,
        *,
        attempt: str,
        report_key: str | None,
        handover: Mapping[str, list[int]] | None = None,
        stats: Mapping[str, Any] | None = None,
    ) -> Recorded:
        """Record a batch pass once, whatever the number of attempts: the marker is created
        only if absent; a later attempt gets the recorded attempt's counts and hand-over.
        `stats` (ReportStats.to_marker: a size histogram, strategy and verification counts, a
        few hundred bytes) rides on the marker for the HTML report, counted once like counts."""
        handed = {name: list(positions) for name, positions in (handover or {}).items() if positions}
        marker = {
            "pk": _job(job_id),
            "sk": f"BATCH#{batch_key}",
            "attempt": attempt,
            "counts": counts.to_dict(),
            "handover": handed,
            "failures_recorded": counts.failed == 0,
            "recorded_at": _now(),
            "expires_at": int(time.time()) + self.ttl_days * DAY,
        }
        if report_key:
            marker["report_key"] = report_key
        if stats:
            marker["batch_stats"] = dict(stats)
        try:
            self.client.put_item(
                TableName=self.table, Item=_item(marker), ConditionExpression="attribute_not_exists(pk)"
            )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise
            existing = self.batch(job_id, batch_key)
            if existing is None:  # cannot happen: the condition failed because it exists
                raise
            return Recorded(
                BatchCounts.from_dict(existing["counts"]),
                False,
                existing.get("report_key"),
                {k: list(v) for k, v in (existing.get("handover") or {}).items()},
            )
        return Recorded(counts, True, report_key, handed)

    def tally(self, job_id: str) -> Tally:
        """The job's counts: every recorded marker's counts, summed (strongly consistent)."""
        return Tally.of(self.batches(job_id, projection="counts"))

    def batches(
        self, job_id: str, prefix: str = "", *, projection: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """The job's batch markers whose key starts with `prefix`, in key order."""
        extra = {"ProjectionExpression": projection} if projection else {}
        paginator = self.client.get_paginator("query")
        for page in paginator.paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :batch)",
            ExpressionAttributeValues=_item({":pk": _job(job_id), ":batch": f"BATCH#{prefix}"}),
            ConsistentRead=True,
            **extra,
        ):
            for raw in page.get("Items", []):
                yield _plain(raw)

    def batch(self, job_id: str, batch_key: str) -> dict[str, Any] | None:
        response = self.client.get_item(
            TableName=self.table,
            Key=_item({"pk": _job(job_id), "sk": f"BATCH#{batch_key}"}),
            ConsistentRead=True,
        )
        return _plain(response["Item"]) if "Item" in response else None

    def failures_recorded(self, job_id: str, batch_key: str) -> None:
        self.client.update_item(
            TableName=self.table,
            Key=_item({"pk": _job(job_id), "sk": f"BATCH#{batch_key}"}),
            UpdateExpression="SET failures_recorded = :t",
            ExpressionAttributeValues=_item({":t": True}),
        )

    # -- failed objects -----------------------------------------------------------------------

    def put_failures(self, job_id: str, failures: Iterable[Failure]) -> None:
        """One item per failed object, keyed by object: writing one twice changes nothing.

        A manifest may name one key twice, and both rows may fail: the batch then hands over
        two failures of one item. BatchWriteItem refuses a call whose requests name one item
        twice ("Provided list of item keys contains duplicates"), so each item is sent once,
        the last failure of it kept (as SQLite's upsert keeps it). The job's counts still hold
        both rows; the ledger and failures.jsonl hold the object once."""
        unique = {f.item_id: f for f in failures}
        requests = [
            {
                "PutRequest": {
                    "Item": _item(
                        {"pk": _job(job_id), "sk": f"FAIL#{item_id}", **f.to_dict(), "recorded_at": _now()}
                    )
                }
            }
            for item_id, f in unique.items()
        ]
        for start in range(0, len(requests), 25):
            pending = {self.table: requests[start : start + 25]}
            for attempt in range(8):
                response = self.client.batch_write_item(RequestItems=pending)
                pending = response.get("UnprocessedItems") or {}
                if not pending:
                    break
                time.sleep(min(2.0, 0.05 * 2**attempt))
            if pending:
                raise FerryError(
                    "DynamoDB kept refusing failure items (throttled): the batch will be retried"
                )

    def failures(self, job_id: str) -> Iterator[Failure]:
        paginator = self.client.get_paginator("query")
        for page in paginator.paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :fail)",
            ExpressionAttributeValues=_item({":pk": _job(job_id), ":fail": "FAIL#"}),
        ):
            for raw in page.get("Items", []):
                yield Failure.from_dict(_plain(raw))

    # -- multipart checkpoints ----------------------------------------------------------------

    def checkpoints(self, *, ttl_days: int = 7) -> DynamoCheckpointStore:
        """The engine's checkpoint store on the same table."""
        return DynamoCheckpointStore(self.client, self.table, ttl_days=ttl_days)


class DynamoCopyRecords:
    """Copy records (copy_records.CopyRecords) on the ledger table: one item per destination key."""

    _FIELDS = (
        "dest_bucket",
        "dest_key",
        "dest_etag",
        "size",
        "source_bucket",
        "source_key",
        "dest_version_id",
        "source_etag",
        "source_version_id",
        "sequencer",
        "replication",
        "job_id",
        "event_key",
    )

    def __init__(self, client: Any, table: str) -> None:
        self.client, self.table = client, table

    def _key(self, bucket: str, key: str) -> dict[str, Any]:
        return _item({"pk": f"COPY#{record_id(bucket, key)}", "sk": "COPY"})

    def get(self, bucket: str, key: str) -> CopyRecord | None:
        response = self.client.get_item(TableName=self.table, Key=self._key(bucket, key), ConsistentRead=True)
        if "Item" not in response:
            return None
        item = _plain(response["Item"])
        return CopyRecord(**{name: item[name] for name in self._FIELDS if name in item})

    def put(self, record: CopyRecord) -> None:
        """The latest copy replaces the record: it is what the destination now holds."""
        values = {name: getattr(record, name) for name in self._FIELDS}
        item = {"pk": f"COPY#{record.item_id}", "sk": "COPY", **values, "recorded_at": _now()}
        self.client.put_item(
            TableName=self.table, Item=_item({k: v for k, v in item.items() if v is not None})
        )

    def forget(self, record: CopyRecord) -> None:
        """Remove the record of a deleted copy, unless a newer copy has replaced it meanwhile."""
        try:
            self.client.delete_item(
                TableName=self.table,
                Key=self._key(record.dest_bucket, record.dest_key),
                ConditionExpression="dest_etag = :etag",
                ExpressionAttributeValues=_item({":etag": record.dest_etag}),
            )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise


def _job(job_id: str) -> str:
    return f"JOB#{job_id}"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _item(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _serialize(v) for k, v in data.items()}


def _plain(item: Mapping[str, Any]) -> dict[str, Any]:
    """DynamoDB attribute values to Python, with whole numbers as int (not Decimal)."""
    return {k: _numbers(_deserialize(v)) for k, v in item.items()}


def _numbers(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    return value
