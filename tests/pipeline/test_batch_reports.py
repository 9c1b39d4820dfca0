"""A batch's report: one JSON object a line for each result, in S3 (JobReports) or in a local
folder (`ferry run`'s LocalReports), the same lines either way.

Every CopyBatch pass writes one, a line for each of its thousands of objects, so the cost of a
line is paid a million times in a million-object job (tests/pipeline/test_map_million.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ferry.models import CopyResult, Status
from ferry.pipeline.job_reports import JobReports
from ferry.pipeline.local_reports import LocalReports

RESULTS = [
    CopyResult(f"in/ünï-{n:04d}.txt", f"out/ünï-{n:04d}.txt", Status.SKIPPED, reason="excluded", bytes=n)
    for n in range(1_000)
]


class _Bucket:
    """What JobReports asks of an S3 client to write a batch report."""

    def __init__(self) -> None:
        self.bodies: dict[str, bytes] = {}

    def put_object(self, *, Bucket: str, Key: str, Body: bytes, **_: Any) -> None:  # noqa: N803 - boto3's names
        self.bodies[Key] = Body


def _write(store: str, tmp_path: Any) -> bytes:
    if store == "s3":
        bucket = _Bucket()
        key = JobReports(bucket, "reports").put_batch("job", "batch-p1", "a1", RESULTS)
        return bucket.bodies[key]
    reports = LocalReports(tmp_path)
    key = reports.put_batch("job", "batch-p1", "a1", RESULTS)
    return (tmp_path / key).read_bytes()


@pytest.mark.parametrize("store", ["s3", "local"])
def test_a_batch_report_encodes_its_lines_without_a_new_encoder_for_each(
    store, tmp_path, monkeypatch
) -> None:
    """json.dumps with options (ensure_ascii, default) builds a new JSONEncoder on every call:
    two thirds of a line's encoding, once per object of every pass."""
    made = 0
    real_init = json.JSONEncoder.__init__

    def counted(self: json.JSONEncoder, *args: Any, **kwargs: Any) -> None:
        nonlocal made
        made += 1
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(json.JSONEncoder, "__init__", counted)

    body = _write(store, tmp_path)

    monkeypatch.undo()
    assert made <= 1, f"{made} JSON encoders made for a report of {len(RESULTS)} lines"
    expected = "".join(json.dumps(r.to_dict(), ensure_ascii=False, default=str) + "\n" for r in RESULTS)
    assert body.decode("utf-8") == expected
