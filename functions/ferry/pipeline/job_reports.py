"""A pipeline job's report in S3: one JSON Lines file of object results per recorded batch,
then, at the end, `summary.json` and `failures.jsonl`.

    s3://<report bucket>/jobs/<job id>/objects/<batch key>.<attempt>.jsonl
    s3://<report bucket>/jobs/<job id>/summary.json
    s3://<report bucket>/jobs/<job id>/failures.jsonl
    s3://<report bucket>/jobs/<job id>/report.html      (the same, as a page: ferry.reports.report_html)
    s3://<report bucket>/jobs/<job id>/histories/...    (an all_versions job's keys: pipeline/history_keys.py)
    s3://<report bucket>/jobs/.map-runs/<Map Run id>/... (the Distributed Map's own results)
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ferry.models import CopyResult
from ferry.pipeline.ledger.contract import Failure

FAILURES_PART_SIZE = 8 * 1024 * 1024


# One encoder for every report line: json.dumps with options makes a new JSONEncoder on each
# call, two thirds of a line's cost, and a pass writes a line for each of its objects.
_LINE = json.JSONEncoder(ensure_ascii=False, default=str)


def result_lines(results: Iterable[CopyResult]) -> Iterator[str]:
    """A batch report's lines, one JSON object each (the same in S3 and in a local folder)."""
    encode = _LINE.encode
    for result in results:
        yield encode(result.to_dict()) + "\n"


def job_prefix(job_id: str) -> str:
    return f"jobs/{job_id}/"


class JobReports:
    def __init__(self, s3: Any, bucket: str) -> None:
        self.s3, self.bucket = s3, bucket

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def put_batch(self, job_id: str, batch_key: str, attempt: str, results: Iterable[CopyResult]) -> str:
        key = f"{job_prefix(job_id)}objects/{batch_key}.{attempt}.jsonl"
        body = "".join(result_lines(results))
        self.s3.put_object(
            Bucket=self.bucket, Key=key, Body=body.encode(), ContentType="application/x-ndjson"
        )
        return key

    def delete(self, key: str) -> None:
        self.s3.delete_object(Bucket=self.bucket, Key=key)

    def rows(self, key: str) -> Iterator[dict[str, Any]]:
        """The object results of one batch report, a line at a time."""
        body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"]
        for line in body.iter_lines():
            if line.strip():
                yield json.loads(line)

    def failed_in(self, key: str, batch_key: str) -> Iterator[Failure]:
        """The failures a recorded batch report lists (to finish recording them after a crash)."""
        return failed_rows(self.rows(key), batch_key)

    def put_final(
        self, job_id: str, summary: Mapping[str, Any], failures: Iterable[Failure]
    ) -> tuple[str, str]:
        """Write failures.jsonl, then summary.json (which names it); returns both keys.

        failures.jsonl is streamed from the ledger's query pages into a multipart upload, so a
        job with a million failures needs no more memory than one part."""
        prefix = job_prefix(job_id)
        failures_key, summary_key = f"{prefix}failures.jsonl", f"{prefix}summary.json"
        self.put_jsonl(failures_key, (f.to_dict() for f in failures))
        self.s3.put_object(
            Bucket=self.bucket,
            Key=summary_key,
            Body=json.dumps(summary, indent=2).encode(),
            ContentType="application/json",
        )
        return summary_key, failures_key

    def put_jsonl(self, key: str, values: Iterable[Any]) -> None:
        """JSON Lines streamed into a multipart upload (failures.jsonl, the parts of an
        all_versions job's keys): a million lines need no more memory than one part."""
        lines = (json.dumps(v, ensure_ascii=False).encode() + b"\n" for v in values)
        stream = io.BufferedReader(_LinesReader(lines), buffer_size=1024 * 1024)
        upload_stream(self.s3, stream, self.bucket, key, {"ContentType": "application/x-ndjson"})

    def text(self, key: str) -> str:
        """A small object's whole text (an all_versions job's manifest of parts)."""
        return self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read().decode("utf-8")

    def put_text(self, key: str, text: str) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=text.encode(), ContentType="text/plain")

    def put_html(self, job_id: str, page: str) -> str:
        """The report as one self-contained page, beside summary.json; returns its key."""
        key = f"{job_prefix(job_id)}report.html"
        self.s3.put_object(
            Bucket=self.bucket, Key=key, Body=page.encode(), ContentType="text/html; charset=utf-8"
        )
        return key


def upload_stream(s3: Any, stream: Any, bucket: str, key: str, extra_args: Mapping[str, str]) -> None:
    """A stream of unknown length to S3 as boto3's upload_fileobj sends it (s3transfer's
    transfer manager: one PUT, or a multipart upload of 8 MiB parts), in the caller's thread,
    one part at a time: a non-seekable stream is otherwise read ahead by up to ten parts while
    uploads are in flight. s3transfer is imported here, not above: the handlers' clients are
    botocore's (no upload_fileobj), and its import (multiprocessing with it) is not paid at a
    Lambda's init for the few invocations that write a JSON Lines file."""
    from s3transfer.futures import NonThreadedExecutor
    from s3transfer.manager import TransferConfig, TransferManager

    config = TransferConfig(multipart_threshold=FAILURES_PART_SIZE, multipart_chunksize=FAILURES_PART_SIZE)
    with TransferManager(s3, config, executor_cls=NonThreadedExecutor) as manager:
        manager.upload(stream, bucket, key, extra_args=dict(extra_args)).result()


class _LinesReader(io.RawIOBase):
    """A read-only file over an iterator of byte lines: what boto3's managed upload reads
    from, a part at a time, so the whole file is never in memory."""

    def __init__(self, lines: Iterator[bytes]) -> None:
        self._lines, self._pending = lines, b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            try:
                self._pending = next(self._lines)
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._pending))
        buffer[:size], self._pending = self._pending[:size], self._pending[size:]
        return size


def failed_rows(rows: Iterable[Mapping[str, Any]], batch_key: str) -> Iterator[Failure]:
    """The failures a batch report lists, whichever store holds it (S3 or a local folder)."""
    for row in rows:
        if row.get("status") == "failed":
            yield Failure(
                bucket=row.get("source_bucket", ""),
                key=row["key"],
                dest_key=row.get("dest_key", ""),
                reason=row.get("reason") or "failed",
                version_id=row.get("source_version_id") or row.get("version_id"),
                batch=batch_key,
            )
