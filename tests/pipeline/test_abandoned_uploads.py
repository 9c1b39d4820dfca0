"""Finalize aborts the multipart uploads a crash left open for its own job (issue 13): only
uploads carrying Ferry's mark for this job, under its destination prefix, at least
`abort_uploads_after_seconds` old; counted in the job's summary. Everyone else's stay.

The crash is reproduced by what it leaves behind: an open upload with parts, and its mark
written by upload_marks.write_mark, exactly as a worker killed between CreateMultipartUpload
and CompleteMultipartUpload leaves them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from conftest import PIPELINE_REPORTS, FakeLambdaContext
from ferry.engine.records.upload_marks import UploadMark, list_marks, mark_key, write_mark
from ferry.jobspec import parse_job_spec
from ferry.models import DEFAULT_MARKS_PREFIX
from ferry.pipeline.abandoned_uploads import AbandonedUploads, abandoned_uploads, abort_abandoned_uploads
from handlers import finalize, prepare

MiB = 1024 * 1024


def start_job(job_id: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    spec = {
        "job_id": job_id,
        "source": {"bucket": "src", "prefix": "in/"},
        "destination": {"bucket": "dst", "prefix": "out/"},
        "options": options or {},
    }
    job = prepare.handler({"spec": spec, "execution_name": job_id}, FakeLambdaContext())
    assert "rejected" not in job, job
    return job


def crashed_upload(s3: Any, key: str, job_id: str | None, *, marked: bool = True, bucket: str = "dst") -> str:
    """What a worker killed mid-copy leaves: an open upload holding a part, and (Ferry's) its mark."""
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=b"p" * (5 * MiB))
    if marked:
        mark = UploadMark(
            dest_key=key,
            upload_id=upload_id,
            job_id=job_id,
            source_bucket="src",
            source_key="in/" + key.split("/", 1)[1],
            source_version=None,
            source_etag='"0123456789abcdef0123456789abcdef"',
            source_size=12 * MiB,
            strategy="stream-multipart",
            algorithm="CRC32C",
            part_bounds=((0, 5 * MiB), (5 * MiB, 10 * MiB), (10 * MiB, 12 * MiB)),
            created=datetime.now(UTC),
        )
        write_mark(s3, bucket, mark)
    return upload_id


def open_uploads(s3: Any, bucket: str = "dst") -> set[tuple[str, str]]:
    return {(u["Key"], u["UploadId"]) for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])}


def test_finalize_aborts_its_own_abandoned_uploads_and_counts_them(pipeline) -> None:
    s3 = pipeline.s3
    s3.put_object(Bucket="src", Key="in/a.txt", Body=b"a")
    job = start_job("job-1")
    ours = crashed_upload(s3, "out/big.bin", "job-1")
    ours_too = crashed_upload(s3, "out/deep/er.bin", "job-1")
    others = {
        ("out/other-job.bin", crashed_upload(s3, "out/other-job.bin", "job-2")),  # another job, maybe running
        ("out/cli.bin", crashed_upload(s3, "out/cli.bin", None)),  # `ferry copy`'s: no job
        ("out/theirs.bin", crashed_upload(s3, "out/theirs.bin", "job-1", marked=False)),  # not Ferry's
        ("elsewhere/big.bin", crashed_upload(s3, "elsewhere/big.bin", "job-1")),  # outside the job's prefix
    }

    summary = finalize.handler({"job": job, "map": {}}, FakeLambdaContext())

    assert summary["abandoned_uploads_aborted"] == 2
    assert "abandoned_uploads_error" not in summary
    assert open_uploads(s3) == others
    marks = {(m.dest_key, m.upload_id) for m in list_marks(s3, "dst")}
    assert ("out/big.bin", ours) not in marks and ("out/deep/er.bin", ours_too) not in marks
    assert marks == {pair for pair in others if pair[0] != "out/theirs.bin"}, "others' marks stay"
    for key, upload_id in (("out/big.bin", ours), ("out/deep/er.bin", ours_too)):
        assert "Contents" not in s3.list_objects_v2(Bucket="dst", Prefix=mark_key(key, upload_id))
    stored = json.loads(s3.get_object(Bucket=PIPELINE_REPORTS, Key="jobs/job-1/summary.json")["Body"].read())
    assert stored["abandoned_uploads_aborted"] == 2
    assert summary["status"] == "SUCCEEDED"  # an empty job; the clean-up does not change its status


def test_uploads_younger_than_abort_uploads_after_seconds_are_left(versitygw) -> None:
    """The age is S3's own Initiated time, so this runs on versitygw: moto reports every upload
    as initiated on 2010-11-10."""
    s3 = versitygw.client
    bucket = versitygw.bucket("dst")
    spec = parse_job_spec(
        {
            "job_id": "job-1",
            "source": {"bucket": "src"},
            "destination": {"bucket": bucket, "prefix": "out/"},
            "options": {"abort_uploads_after_seconds": 3600},
        }
    )
    upload = crashed_upload(s3, "out/big.bin", "job-1", bucket=bucket)
    now = datetime.now(UTC)

    assert [u.upload_id for u in abandoned_uploads(s3, spec, now=now)] == [], "not an hour old yet"
    later = now + timedelta(hours=1, minutes=1)
    assert [u.upload_id for u in abandoned_uploads(s3, spec, now=later)] == [upload]

    assert abort_abandoned_uploads(s3, spec, now=now) == AbandonedUploads(aborted=0)
    assert open_uploads(s3, bucket) == {("out/big.bin", upload)}
    assert abort_abandoned_uploads(s3, spec, now=later) == AbandonedUploads(aborted=1)
    assert open_uploads(s3, bucket) == set()
    assert list(list_marks(s3, bucket, marks_prefix=DEFAULT_MARKS_PREFIX)) == []


def test_a_job_that_leaves_nothing_open_reports_none_aborted(pipeline) -> None:
    pipeline.s3.put_object(Bucket="src", Key="in/a.txt", Body=b"a")
    job = start_job("job-1")
    summary = finalize.handler({"job": job, "map": {}}, FakeLambdaContext())
    assert summary["abandoned_uploads_aborted"] == 0
    assert open_uploads(pipeline.s3) == set()
