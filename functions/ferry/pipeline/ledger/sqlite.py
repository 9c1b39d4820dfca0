"""The ledger in one SQLite file, for `ferry run` on one machine: the same semantics as
`DynamoLedger` (see `ferry.pipeline.ledger.contract.Ledger`), with SQLite's constraints doing what
DynamoDB's conditional writes do.

A batch pass is recorded with `INSERT ... ON CONFLICT DO NOTHING` on its (job, batch key)
primary key: the attempt whose row goes in is the one that counts, exactly as the marker's
`attribute_not_exists(pk)` condition decides it in DynamoDB; every later attempt reads the
row back. A failed object is keyed by `Failure.item_id`, so writing it twice changes nothing.

One connection, serialised by a lock (batches run in a few threads; each statement is short),
in WAL mode with a busy timeout so a second process on the same file waits instead of failing.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ferry.engine.records.checkpoints import Checkpoint
from ferry.errors import ConfigError
from ferry.pipeline.ledger.contract import DAY, BatchCounts, Failure, JobExists, Recorded, Tally, recorded_by

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY, status TEXT NOT NULL, spec TEXT NOT NULL, started_at TEXT NOT NULL,
    finished_at TEXT, execution_arn TEXT, report TEXT, totals TEXT);
CREATE TABLE IF NOT EXISTS batches (
    job_id TEXT NOT NULL, batch_key TEXT NOT NULL, attempt TEXT NOT NULL, counts TEXT NOT NULL,
    handover TEXT NOT NULL, failures_recorded INTEGER NOT NULL, report_key TEXT,
    recorded_at TEXT NOT NULL, batch_stats TEXT, PRIMARY KEY (job_id, batch_key));
CREATE TABLE IF NOT EXISTS failures (
    job_id TEXT NOT NULL, item_id TEXT NOT NULL, data TEXT NOT NULL, recorded_at TEXT NOT NULL,
    PRIMARY KEY (job_id, item_id));
CREATE TABLE IF NOT EXISTS checkpoints (
    copy_id TEXT PRIMARY KEY, data TEXT NOT NULL, expires_at INTEGER NOT NULL);
"""


class SQLiteLedger:
    """The ledger in a SQLite file (created with its tables on first use)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as error:
            raise ConfigError(
                f"cannot open the ledger {str(self.path)!r}: {error}; give a writable file with --ledger PATH"
            ) from error
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _run(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._db.execute(sql, args)

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._lock:
            cursor = self._db.execute(sql, args)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    # -- jobs ---------------------------------------------------------------------------------

    def create_job(self, job_id: str, spec: Mapping[str, Any], *, execution_arn: str | None = None) -> None:
        cursor = self._run(
            "INSERT INTO jobs (job_id, status, spec, started_at, execution_arn) VALUES (?, 'RUNNING', ?, ?, ?)"
            " ON CONFLICT (job_id) DO NOTHING",
            (job_id, json.dumps(spec), _now(), execution_arn),
        )
        if cursor.rowcount == 0:
            if recorded_by(self.job(job_id), execution_arn):
                return  # a retried Prepare of the execution that created it: its own job
            raise JobExists(
                f"job_id: a job {job_id!r} already exists in the ledger {str(self.path)!r}; give a new job_id (or omit it)"
            )

    def job(self, job_id: str) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM jobs WHERE job_id = ?", (job_id,))
        if not rows:
            return None
        row = rows[0]
        job: dict[str, Any] = {
            "job_id": row["job_id"],
            "status": row["status"],
            "started_at": row["started_at"],
        }
        job["spec"] = json.loads(row["spec"])
        for name in ("finished_at", "execution_arn", "report"):
            if row[name] is not None:
                job[name] = row[name]
        job.update(json.loads(row["totals"] or "{}"))
        return job

    def jobs(self) -> list[dict[str, Any]]:
        """Every job in the file, newest first (job id, status, times, counts once finished)."""
        ids = [r["job_id"] for r in self._rows("SELECT job_id FROM jobs ORDER BY started_at DESC, job_id")]
        return [job for job in (self.job(i) for i in ids) if job is not None]

    def mark_job(self, job_id: str, status: str) -> bool:
        """Set an unfinished job's status (see DynamoLedger.mark_job)."""
        cursor = self._run(
            "UPDATE jobs SET status = ? WHERE job_id = ? AND status IN ('RUNNING', 'INTERRUPTED')",
            (status, job_id),
        )
        return cursor.rowcount == 1

    def finish_job(self, job_id: str, status: str, report: Mapping[str, Any], tally: Tally) -> None:
        self._run(
            "UPDATE jobs SET status = ?, finished_at = ?, report = ?, totals = ? WHERE job_id = ?",
            (status, _now(), json.dumps(report), json.dumps(tally.to_dict()), job_id),
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
        """Record a batch pass once: the row goes in only if absent; a later attempt gets the
        recorded attempt's counts and hand-over (DynamoLedger.record_batch's contract). `stats`
        (the HTML report's per-batch figures) are kept with the row, counted once likewise."""
        handed = {name: list(positions) for name, positions in (handover or {}).items() if positions}
        cursor = self._run(
            "INSERT INTO batches (job_id, batch_key, attempt, counts, handover, failures_recorded,"
            " report_key, recorded_at, batch_stats) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (job_id, batch_key) DO NOTHING",
            (
                job_id,
                batch_key,
                attempt,
                json.dumps(counts.to_dict()),
                json.dumps(handed),
                int(counts.failed == 0),
                report_key,
                _now(),
                json.dumps(dict(stats)) if stats else None,
            ),
        )
        if cursor.rowcount == 1:
            return Recorded(counts, True, report_key, handed)
        existing = self.batch(job_id, batch_key)
        if existing is None:  # cannot happen: the insert was refused because the row exists
            raise RuntimeError(f"batch {batch_key!r} of job {job_id!r} was neither recorded nor found")
        return Recorded(
            BatchCounts.from_dict(existing["counts"]),
            False,
            existing.get("report_key"),
            {k: list(v) for k, v in (existing.get("handover") or {}).items()},
        )

    def tally(self, job_id: str) -> Tally:
        return Tally.of(self.batches(job_id))

    def batches(
        self, job_id: str, prefix: str = "", *, projection: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """The job's batch markers whose key starts with `prefix`, in key order (`projection`,
        DynamoDB's, is accepted and every field returned)."""
        rows = self._rows(
            "SELECT * FROM batches WHERE job_id = ? AND substr(batch_key, 1, ?) = ? ORDER BY batch_key",
            (job_id, len(prefix), prefix),
        )
        for row in rows:
            yield _marker(row)

    def batch(self, job_id: str, batch_key: str) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM batches WHERE job_id = ? AND batch_key = ?", (job_id, batch_key))
        return _marker(rows[0]) if rows else None

    def failures_recorded(self, job_id: str, batch_key: str) -> None:
        self._run(
            "UPDATE batches SET failures_recorded = 1 WHERE job_id = ? AND batch_key = ?", (job_id, batch_key)
        )

    # -- failed objects -----------------------------------------------------------------------

    def put_failures(self, job_id: str, failures: Iterable[Failure]) -> None:
        rows = [(job_id, f.item_id, json.dumps(f.to_dict()), _now()) for f in failures]
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.executemany(
                    "INSERT INTO failures (job_id, item_id, data, recorded_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (job_id, item_id) DO UPDATE SET data = excluded.data, recorded_at = excluded.recorded_at",
                    rows,
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def failures(self, job_id: str) -> Iterator[Failure]:
        for row in self._rows("SELECT data FROM failures WHERE job_id = ? ORDER BY item_id", (job_id,)):
            yield Failure.from_dict(json.loads(row["data"]))

    # -- multipart checkpoints ----------------------------------------------------------------

    def checkpoints(self, *, ttl_days: int = 7) -> SQLiteCheckpointStore:
        return SQLiteCheckpointStore(self, ttl_days=ttl_days)


class SQLiteCheckpointStore:
    """Multipart checkpoints in the ledger's file (DynamoCheckpointStore's counterpart); an
    expired one is not loaded, as DynamoDB's TTL would have removed it."""

    def __init__(self, ledger: SQLiteLedger, *, ttl_days: int = 7) -> None:
        self.ledger, self.ttl_days = ledger, ttl_days

    def load(self, copy_id: str) -> Checkpoint | None:
        rows = self.ledger._rows(
            "SELECT data FROM checkpoints WHERE copy_id = ? AND expires_at > ?", (copy_id, int(time.time()))
        )
        return Checkpoint.from_dict(json.loads(rows[0]["data"])) if rows else None

    def save(self, checkpoint: Checkpoint) -> None:
        self.ledger._run(
            "INSERT INTO checkpoints (copy_id, data, expires_at) VALUES (?, ?, ?)"
            " ON CONFLICT (copy_id) DO UPDATE SET data = excluded.data, expires_at = excluded.expires_at",
            (
                checkpoint.copy_id,
                json.dumps(checkpoint.to_dict()),
                int(time.time()) + self.ttl_days * DAY,
            ),
        )

    def delete(self, copy_id: str) -> None:
        self.ledger._run("DELETE FROM checkpoints WHERE copy_id = ?", (copy_id,))


def _marker(row: Mapping[str, Any]) -> dict[str, Any]:
    marker = {
        "sk": f"BATCH#{row['batch_key']}",
        "batch_key": row["batch_key"],
        "attempt": row["attempt"],
        "counts": json.loads(row["counts"]),
        "handover": json.loads(row["handover"]),
        "failures_recorded": bool(row["failures_recorded"]),
        "recorded_at": row["recorded_at"],
    }
    if row["report_key"]:
        marker["report_key"] = row["report_key"]
    if row["batch_stats"]:
        marker["batch_stats"] = json.loads(row["batch_stats"])
    return marker


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
