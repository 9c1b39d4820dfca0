"""The Distributed Map's own record of a job, read back at Finalize: what the ledger cannot know.

Where: the ResultWriter's Prefix is the constant MAP_RUNS_PREFIX, not a path into the state's
data. Whether ResultWriter resolves a `Prefix.$` path against the Map state's input or its
results is left open by AWS's documentation (an independent interpreter resolves it against the
results, where a job's prefix is not), and a wrong guess failed the Map after every object was
copied. Finalize finds the job's files from what Step Functions itself says: the Map's output
`ResultWriterDetails` (its manifest's bucket and key) when the Map succeeded, else each Map Run
of the execution (ListMapRuns) at `<MAP_RUNS_PREFIX>/<Map Run id>/manifest.json`, the id being
the Map Run ARN's last field; a manifest found there must name that Map Run.

A child execution that fails outside its own Catch (CopyBatch and RecordFailure both failing,
a timeout, an abort) records nothing, and batches that never started because the Map Run
stopped record nothing either. The ResultWriter still lists them: under the job's map-run
prefix it writes `<MapRunId>/manifest.json` naming `FAILED_n.json` (failed, timed out and
aborted children) and `PENDING_n.json` (never started) files, each a JSON array of child
records whose `Input` is the child's input as a JSON string: `{"Items": [...], "BatchInput":
...}` (Step Functions developer guide, "ResultWriter"). What DescribeMapRun counts of the Map
Run is checked against the ledger in count_check.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

log = logging.getLogger(__name__)
UNFINISHED = ("FAILED", "PENDING")  # result file groups whose children recorded nothing for sure
# A job id starts with a letter or digit (jobspec), so no job's own prefix is ever this one.
MAP_RUNS_PREFIX = "jobs/.map-runs"


@dataclass
class UnfinishedChild:
    """A child execution that did not succeed: its items, and what stopped it."""

    status: str  # FAILED, TIMED_OUT, ABORTED (in FAILED files) or PENDING
    items: list[Any] | None  # None when the result file left the input out
    error: str | None = None
    cause: str | None = None

    @property
    def reason(self) -> str:
        if self.status == "PENDING":
            return "never started: the Distributed Map stopped before this batch ran"
        cause = lambda_error_message(self.cause)
        return f"the batch's child execution {self.status.lower()} ({self.error or 'no error given'}{': ' + cause if cause else ''})"


@dataclass
class MapRunRecord:
    map_run_arn: str
    manifest_key: str
    unfinished: list[UnfinishedChild] = field(default_factory=list)


def job_map_runs(
    s3: Any,
    stepfunctions: Any,
    bucket: str,
    *,
    written: Mapping[str, Any] | None,
    execution_arn: str | None,
) -> list[MapRunRecord]:
    """The job's Map Run records: the manifest the Map's output names, or else those of the
    execution's Map Runs (none found: the count check below them says what is missing)."""
    if isinstance(written, Mapping) and written.get("Key"):
        return [_read_manifest(s3, str(written.get("Bucket") or bucket), str(written["Key"]))]
    records = []
    for arn in _execution_map_runs(stepfunctions, execution_arn):
        key = f"{MAP_RUNS_PREFIX}/{arn.rsplit(':', 1)[-1]}/manifest.json"
        try:
            record = _read_manifest(s3, bucket, key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") not in ("NoSuchKey", "404"):
                raise
            record = MapRunRecord(arn, key)  # no result files: the count check still applies
        if record.map_run_arn and record.map_run_arn != arn:
            raise ValueError(
                f"s3://{bucket}/{key} names Map Run {record.map_run_arn}, not {arn}: the ResultWriter "
                f"does not write under {MAP_RUNS_PREFIX}/<the Map Run ARN's last field>/ as Ferry reads it"
            )
        record.map_run_arn = arn
        records.append(record)
    return records


def _execution_map_runs(stepfunctions: Any, execution_arn: str | None) -> list[str]:
    if stepfunctions is None or not execution_arn:
        return []
    arns: list[str] = []
    try:
        for page in stepfunctions.get_paginator("list_map_runs").paginate(executionArn=execution_arn):
            arns.extend(run["mapRunArn"] for run in page.get("mapRuns", []))
    except ClientError as error:
        # Without the Map Runs, no batch is itemised; the count check still decides the job.
        log.warning("could not list the Map Runs of %s: %s", execution_arn, error)
        return []
    return arns


def _read_manifest(s3: Any, bucket: str, key: str) -> MapRunRecord:
    manifest = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    record = MapRunRecord(manifest.get("MapRunArn", ""), key)
    files = manifest.get("ResultFiles") or {}
    for group in UNFINISHED:
        for result_file in files.get(group) or []:
            body = s3.get_object(Bucket=manifest.get("DestinationBucket") or bucket, Key=result_file["Key"])[
                "Body"
            ]
            for child in json.loads(body.read()):
                record.unfinished.append(_child(group, child))
    return record


def _child(group: str, child: dict[str, Any]) -> UnfinishedChild:
    included = (child.get("InputDetails") or {}).get("Included", True)
    items = None
    if included and isinstance(child.get("Input"), str):
        try:
            items = json.loads(child["Input"]).get("Items")
        except (ValueError, AttributeError):
            items = None
    status = child.get("Status") or group
    return UnfinishedChild(
        status, items if isinstance(items, list) else None, child.get("Error"), child.get("Cause")
    )


def lambda_error_message(cause: str | None) -> str:
    """A Lambda error's Cause is a JSON document; its errorMessage is what a person reads."""
    if not cause:
        return ""
    try:
        details = json.loads(cause)
        if isinstance(details, dict) and details.get("errorMessage"):
            return str(details["errorMessage"])[:300]
    except ValueError:
        pass
    return cause[:300]
