"""Unit tests of engine decisions that need no server: strategy choice, sizing, reports."""

from __future__ import annotations

import io
import json

import pytest

from ferry import (
    Copier,
    CopyFailed,
    CopyPolicy,
    CopyResult,
    Endpoint,
    SourceObject,
    Status,
    VerificationFailed,
)
from ferry.cli.shared.report import ReportWriter, Summary
from ferry.engine.proofs.checksums import Checksum
from ferry.engine.proofs.source import SourceInfo
from ferry.engine.proofs.verify import verify_server_copy
from ferry.engine.strategies.copier import default_concurrency
from ferry.errors import describe
from ferry.limits import MiB
from ferry.s3.listing import matches, parse_s3_url


def _server_side(source: Endpoint, destination: Endpoint, mode: str = "auto") -> bool:
    with Copier(source, destination, CopyPolicy(mode=mode)) as copier:
        return copier._use_server_side()


def test_auto_copies_server_side_only_within_one_endpoint_and_partition():
    assert _server_side(Endpoint(region="us-east-1"), Endpoint(region="eu-west-1"))
    assert not _server_side(Endpoint(region="cn-north-1"), Endpoint(region="us-east-1"))
    assert not _server_side(Endpoint(region="us-gov-west-1"), Endpoint(region="us-east-1"))
    assert not _server_side(Endpoint(endpoint_url="http://127.0.0.1:9000"), Endpoint(region="us-east-1"))
    assert _server_side(Endpoint(region="cn-north-1"), Endpoint(region="us-east-1"), mode="server-side")
    assert not _server_side(Endpoint(region="us-east-1"), Endpoint(region="us-east-1"), mode="stream")


def test_default_concurrency_grows_for_small_objects_and_shrinks_for_large():
    small = default_concurrency([100 * 1024] * 50, cpus=2)
    large = default_concurrency([512 * MiB] * 50, cpus=2)
    assert small >= 32 and large <= 8 and small > large
    assert default_concurrency([], cpus=64) == 128  # unknown sizes: capped


def test_summary_counts_add_up_and_report_lines_are_json():
    summary, out = Summary(), io.StringIO()
    writer = ReportWriter(out)
    for status in [Status.COPIED, Status.COPIED, Status.SKIPPED, Status.FAILED, Status.PENDING]:
        result = CopyResult(
            source_key=f"k-{status}", dest_key="d", status=status, bytes=10, strategy="stream"
        )
        if status == Status.FAILED:
            result.reason = "AccessDenied on s3:GetObject"
        summary.add(result)
        writer.write(result)
    writer.close(summary.finish())
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert summary.total == 5 == len(lines) - 1
    assert (summary.copied, summary.skipped, summary.failed, summary.pending) == (2, 1, 1, 1)
    assert summary.bytes_copied == 20  # skipped and failed bytes are not counted as copied
    assert [line["key"] for line in lines[:-1]] == [
        f"k-{s}" for s in ("copied", "copied", "skipped", "failed", "pending")
    ]
    assert lines[3]["reason"] == "AccessDenied on s3:GetObject"
    assert lines[-1]["summary"]["objects"] == 5


def test_globs_match_relative_keys_and_excludes_win():
    assert matches("a/b.log", ["*.log"], [])
    assert not matches("a/b.txt", ["*.log"], [])
    assert not matches("debug.log", ["*.log"], ["debug*"])
    assert matches("anything", [], [])


def test_s3_urls_split_bucket_and_key():
    url = parse_s3_url("s3://bucket/some/prefix/", "SRC")
    assert (url.bucket, url.key) == ("bucket", "some/prefix/")
    assert parse_s3_url("s3://bucket", "SRC").key == ""


def _info(etag: str, checksum: Checksum | None) -> SourceInfo:
    return SourceInfo(
        obj=SourceObject("b", "k"),
        head={},
        size=10,
        etag=etag,
        checksum=checksum,
        storage_class="STANDARD",
        version_id=None,
    )


def test_server_copy_with_matching_etag_but_false_stored_checksum_fails():
    etag = "0" * 32 + "-3"
    info = _info(etag, Checksum("CRC64NVME", "AAAAAAAAAAA=", "FULL_OBJECT"))
    kwargs = {"dest_etag": f'"{etag}"', "dest_encryption": None, "same_layout": True, "dest_size": None}
    right = Checksum("CRC64NVME", "AAAAAAAAAAA=", "FULL_OBJECT")
    assert verify_server_copy(info, dest_checksum=right, **kwargs) == "etag"
    with pytest.raises(VerificationFailed, match="ETags match but the destination stored CRC64NVME"):
        verify_server_copy(info, dest_checksum=Checksum("CRC64NVME", "BBBBBBBBBBB=", "FULL_OBJECT"), **kwargs)
    with pytest.raises(VerificationFailed, match="ETag of the copy"):
        verify_server_copy(info, dest_checksum=right, **{**kwargs, "dest_etag": '"' + "1" * 32 + '-3"'})


def test_server_copy_without_comparable_evidence_says_unverified_until_sized():
    info = _info("kms-style-etag", None)
    kwargs = {
        "dest_etag": '"other"',
        "dest_checksum": None,
        "dest_encryption": "aws:kms",
        "same_layout": True,
    }
    assert verify_server_copy(info, dest_size=None, **kwargs) == "unverified"
    assert verify_server_copy(info, dest_size=10, **kwargs) == "size"
    with pytest.raises(VerificationFailed, match="size"):
        verify_server_copy(info, dest_size=11, **kwargs)


def test_a_failed_part_is_reported_not_the_parts_it_cancelled():
    from ferry.engine.parts.runner import root_cause as _root_cause
    from ferry.engine.proofs.in_order import Cancelled

    real = CopyFailed("AccessDenied on s3:PutObject (UploadPart)")
    assert _root_cause([Cancelled("copy cancelled: another part failed"), real]) is real
    assert _root_cause([real, Cancelled("x")]) is real


def test_source_changed_during_copy_reason_says_so():
    from botocore.exceptions import ClientError

    error = ClientError(
        {"Error": {"Code": "PreconditionFailed", "Message": "At least one of the pre-conditions"}},
        "GetObject",
    )
    reason = describe(error, side="source", action="s3:GetObject", bucket="b", key="k")
    assert "changed during the copy" in reason
