"""`ferry check SRC DST` as a user runs it: each key's verdict and the evidence that decided
it, on stdout, in the JSON Lines report and on the HTML page; exit 0 when the sides match, 2
when they differ, 1 on bad input; nothing is ever written to either side."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import S3Server
from ferry.cli.main import main

FERRY = str(Path(sys.executable).with_name("ferry"))


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def put(server: S3Server, bucket: str, objects: dict[str, bytes], **extra: str) -> None:
    for key, body in objects.items():
        server.client.put_object(Bucket=bucket, Key=key, Body=body, **extra)


def everything(server: S3Server, bucket: str) -> dict[str, str]:
    pages = server.client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {o["Key"]: o["ETag"] for page in pages for o in page.get("Contents", [])}


@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_check_names_every_difference_with_its_evidence_and_exits_2(request, tmp_path, server_name) -> None:
    server: S3Server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), server.bucket("dst")
    put(server, src, {"a/same": b"same", "a/changed": b"one", "a/resized": b"short", "a/only-src": b"s"})
    put(server, dst, {"b/same": b"same", "b/changed": b"two", "b/resized": b"longer", "b/only-dst": b"d"})
    put(server, dst, {"elsewhere/x": b"not compared"})
    before = (everything(server, src), everything(server, dst))
    report, page = tmp_path / "check.jsonl", tmp_path / "check.html"

    run = subprocess.run(
        [FERRY, "check", f"s3://{src}/a", f"s3://{dst}/b", "--endpoint-url", server.url,
         "--report", str(report), "--report-html", str(page)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert run.returncode == 2, run.stderr
    assert "missing on destination: only-src" in run.stdout
    assert "missing on source: only-dst" in run.stdout
    assert "differs: resized (size: sizes 5 and 6)" in run.stdout
    # Same size, other bytes: the strongest evidence both sides share decides, and is named.
    changed = next(line for line in run.stdout.splitlines() if line.startswith("differs: changed"))
    assert "(checksum: " in changed or "(etag: " in changed
    assert "5 keys: 1 identical, 2 different, 1 missing on destination, 1 missing on source" in run.stdout
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert [line["key"] for line in lines[:-1]] == ["changed", "only-dst", "only-src", "resized", "same"]
    same = lines[-2]
    assert same["status"] == "identical" and same["evidence"] in ("checksum", "etag")
    assert lines[-1]["summary"]["different"] == 2 and lines[-1]["summary"]["match"] is False
    html = page.read_text()
    assert "DIFFER" in html and "only-src" in html and "sizes 5 and 6" in html
    assert (everything(server, src), everything(server, dst)) == before  # nothing written


def test_sides_that_match_exit_0_and_say_how_they_were_proved(versitygw, vgw_buckets) -> None:
    src, dst = vgw_buckets
    objects = {f"k{i}": f"body {i}".encode() for i in range(5)}
    put(versitygw, src, objects)
    put(versitygw, dst, objects)
    code, out, err = call("check", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["keys"], summary["identical"], summary["match"]) == (5, 5, True)
    assert sum(summary["identical_by"].values()) == 5
    assert "identical by:" in err


def test_same_size_without_comparable_checksum_or_etag_is_identical_by_size_only(
    versitygw, vgw_buckets
) -> None:
    """A multipart ETag of another part size proves nothing, and the checksums differ in
    algorithm: the size alone decides, and the output says it proves less."""
    src, dst = vgw_buckets
    part = 5 * 1024 * 1024
    body = bytes(range(256)) * (2 * part // 256 + 1)
    versitygw.client.put_object(Bucket=src, Key="big", Body=body, ChecksumAlgorithm="SHA256")
    upload = versitygw.client.create_multipart_upload(Bucket=dst, Key="big", ChecksumAlgorithm="SHA1")
    parts = []
    for number, start in enumerate(range(0, len(body), part), start=1):
        answer = versitygw.client.upload_part(
            Bucket=dst, Key="big", UploadId=upload["UploadId"], PartNumber=number,
            Body=body[start : start + part], ChecksumAlgorithm="SHA1",
        )  # fmt: skip
        parts.append({"PartNumber": number, "ETag": answer["ETag"], "ChecksumSHA1": answer["ChecksumSHA1"]})
    versitygw.client.complete_multipart_upload(
        Bucket=dst, Key="big", UploadId=upload["UploadId"], MultipartUpload={"Parts": parts}
    )
    code, out, err = call("check", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url)
    assert code == 0, err
    assert "identical by: size 1" in out
    assert "not proved identical byte for byte" in out


def test_a_source_naming_one_object_is_compared_with_the_object_copy_would_write(
    versitygw, vgw_buckets
) -> None:
    src, dst = vgw_buckets
    put(versitygw, src, {"dir/file.txt": b"one", "dir/other.txt": b"x"})
    put(versitygw, dst, {"renamed.txt": b"one", "into/file.txt": b"two"})
    where = ("--endpoint-url", versitygw.url)
    assert call("check", f"s3://{src}/dir/file.txt", f"s3://{dst}/renamed.txt", *where)[0] == 0
    code, out, err = call("check", f"s3://{src}/dir/file.txt", f"s3://{dst}/into/", *where)
    assert code == 2 and "differs: file.txt" in out and "1 key:" in out
    code, out, err = call("check", f"s3://{src}/dir/file.txt", f"s3://{dst}/absent.txt", *where)
    assert code == 2 and "missing on destination: file.txt" in out


def test_filters_apply_to_both_sides(versitygw, vgw_buckets) -> None:
    src, dst = vgw_buckets
    put(versitygw, src, {"keep.txt": b"1", "skip.log": b"2"})
    put(versitygw, dst, {"keep.txt": b"1", "other.log": b"3"})
    code, out, err = call(
        "check", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--exclude", "*.log"
    )
    assert code == 0, err
    assert "1 key: 1 identical" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["s3://no-such-bucket-ferry", "s3://{dst}"], "source bucket 'no-such-bucket-ferry' does not exist"),
        (
            ["s3://{src}", "s3://no-such-bucket-ferry"],
            "destination bucket 'no-such-bucket-ferry' does not exist",
        ),
        (["s3://{src}", "not-a-url"], "DST 'not-a-url' is not an S3 URL"),
        (["s3://{src}", "s3://{dst}", "--report", "/no/such/dir/r.jsonl"], "cannot write the report"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(versitygw, vgw_buckets, args, message) -> None:
    src, dst = vgw_buckets
    argv = [a.format(src=src, dst=dst) for a in args]
    code, out, err = call("check", *argv, "--endpoint-url", versitygw.url)
    assert code == 1
    assert err.startswith("ferry: error: ") and err.count("\n") == 1, err
    assert message in err
