"""What every ledger keeps and hands back, whatever stores it: the `Ledger` interface, and the
values passing through it (a batch's counts, a failed object, a recorded pass, a job's tally).

Two ledgers keep it: DynamoDB on AWS (`dynamodb.DynamoLedger`) and one SQLite file for `ferry
run` (`sqlite.SQLiteLedger`). Both import this module and neither imports the other, so `ferry
run` with its SQLite ledger needs nothing of DynamoDB's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ferry.counts import Counts
from ferry.engine.records.checkpoints import CheckpointStore
from ferry.errors import ConfigError
from ferry.models import CopyResult

COUNTERS = ("copied", "skipped", "failed", "pending")
DAY = 86_400


# An unfinished job's statuses: running, or stopped early by `ferry run` and resumable.
RUNNING, INTERRUPTED = "RUNNING", "INTERRUPTED"


class JobExists(ConfigError):
    """A job id is used once: a second execution with it would mix two jobs' counts."""


def recorded_by(job: Mapping[str, Any] | None, execution_arn: str | None) -> bool:
    """The job was recorded by this execution: a retried Prepare (Step Functions retries it
    after a Lambda service error, which may come after the function ran) finds its own job."""
    return execution_arn is not None and (job or {}).get("execution_arn") == execution_arn


@dataclass
class BatchCounts(Counts):
    """What one batch adds to the job: every object it was given, in exactly one counter.

    `items`: the Map items it settled, where an item is not one object: an all_versions job's
    item is a key, whose versions are its objects (pipeline/history_keys.py). The count check
    (count_check.py) weighs the Map's items against these; None means one item per object."""

    items: int | None = None

    @property
    def objects(self) -> int:
        return self.total

    @property
    def settled_items(self) -> int:
        return self.objects if self.items is None else self.items

    def to_dict(self) -> dict[str, int]:
        data = self.counts()
        if self.items is not None:
            data["items"] = self.items
        return data

    @classmethod
    def of(cls, results: Iterable[CopyResult]) -> BatchCounts:
        counts = cls()
        for result in results:
            counts.count(result)
        return counts

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BatchCounts:
        items = data.get("items")
        return cls(
            **{k: int(data.get(k, 0)) for k in (*COUNTERS, "bytes_copied")},
            items=None if items is None else int(items),
        )


@dataclass
class Failure:
    """A failed object as the ledger keeps it (and the job report lists it)."""

    bucket: str
    key: str
    dest_key: str
    reason: str
    version_id: str | None = None
    batch: str | None = None

    @property
    def item_id(self) -> str:
        identity: list[Any] = [self.bucket, self.key, self.version_id, self.dest_key]
        if not self.key:  # a manifest row that names no object: the reason quotes the row,
            identity.append(self.reason)  # so two such rows stay two failures, as they are counted
        text = json.dumps(identity)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    @classmethod
    def of(cls, result: CopyResult, batch: str | None = None) -> Failure:
        return cls(
            bucket=result.source_bucket or "",
            key=result.source_key,
            dest_key=result.dest_key,
            reason=result.reason or "failed (no reason given)",
            # The source's version: a history's result names it apart from the destination's.
            version_id=result.source_version_id or result.version_id,
            batch=batch,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Failure:
        """A failure as either ledger stores it (the fields `to_dict` writes)."""
        return cls(
            bucket=data["bucket"],
            key=data["key"],
            dest_key=data["dest_key"],
            reason=data["reason"],
            version_id=data.get("version_id"),
            batch=data.get("batch"),
        )

    def to_dict(self) -> dict[str, Any]:
        data = {
            "bucket": self.bucket,
            "key": self.key,
            "dest_key": self.dest_key,
            "reason": self.reason,
            "version_id": self.version_id,
            "batch": self.batch,
        }
        return {k: v for k, v in data.items() if v is not None}


@dataclass
class Recorded:
    """The outcome of recording a batch pass: what the attempt that counts recorded."""

    counts: BatchCounts
    first: bool  # this call's results were the ones recorded
    report_key: str | None
    handover: dict[str, list[int]]  # positions in the pass's items: "remaining", "large"


@dataclass
class Tally:
    """A job's counts: the sum of its recorded markers."""

    counts: BatchCounts
    batches: int  # markers summed (batch passes and large objects)
    items: int = 0  # the Map items they settled (BatchCounts.items): the objects, but in an all_versions job

    def to_dict(self) -> dict[str, int]:
        return {**self.counts.to_dict(), "batches": self.batches}

    @classmethod
    def of(cls, markers: Iterable[Mapping[str, Any]]) -> Tally:
        """The sum of batch markers' counts (each ledger's `tally`)."""
        total, batches, items = BatchCounts(), 0, 0
        for marker in markers:
            counts = BatchCounts.from_dict(marker.get("counts") or {})
            for name in (*COUNTERS, "bytes_copied"):
                setattr(total, name, getattr(total, name) + getattr(counts, name))
            items += counts.settled_items
            batches += 1
        return cls(total, batches, items)


class Ledger(Protocol):
    """What the pipeline needs of a ledger, whatever keeps it: DynamoDB on AWS (`DynamoLedger`),
    SQLite on one machine (`sqlite.SQLiteLedger`, for `ferry run`).

    The semantics every implementation keeps (tests/pipeline/test_ledger_contract.py runs the
    same tests over both): a job id is created once (`JobExists`); a batch pass is recorded
    once, by whichever attempt creates its marker first, and every later attempt gets that
    attempt's counts and hand-over back; `tally` is the sum of the markers; a failed object is
    one item, written any number of times (twice in one call too); checkpoints outlive the process that saved them.
    """

    def create_job(self, job_id: str, spec: Mapping[str, Any], *, execution_arn: str | None = None) -> None:
        """Record a new job, RUNNING. A job id already recorded raises JobExists, unless the
        same execution recorded it (a retried Prepare): then nothing changes."""
        ...

    def job(self, job_id: str) -> dict[str, Any] | None: ...
    def finish_job(self, job_id: str, status: str, report: Mapping[str, Any], tally: Tally) -> None: ...
    def mark_job(self, job_id: str, status: str) -> bool: ...
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
    ) -> Recorded: ...
    def tally(self, job_id: str) -> Tally: ...
    def batches(
        self, job_id: str, prefix: str = "", *, projection: str | None = None
    ) -> Iterator[dict[str, Any]]: ...
    def batch(self, job_id: str, batch_key: str) -> dict[str, Any] | None: ...
    def failures_recorded(self, job_id: str, batch_key: str) -> None: ...
    def put_failures(self, job_id: str, failures: Iterable[Failure]) -> None: ...
    def failures(self, job_id: str) -> Iterator[Failure]: ...
    def checkpoints(self, *, ttl_days: int = 7) -> CheckpointStore: ...
