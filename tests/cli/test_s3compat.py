"""`ferry copy` on S3-compatible stores that lack a feature (issue 15's acceptance).

A default copy, auto and `--mode stream`, of a bucket with metadata, content headers, awkward
keys and multipart objects copies everything through each quirk of the QuirkProxy
(tests/engine/server_quirks.py) on versitygw and MinIO, a re-run skips everything, and each
degradation is said once in the summary and once in the report, never per object.
"""

from __future__ import annotations

import json
import os

import pytest
from test_cli import ferry

from ferry.cli.shared.parsing import EXIT_FAILED

MiB = 1024 * 1024
TAGS = "team=blue&tier=gold"
AWKWARD = ["plain.txt", "with space/a b.txt", "unicodé/ñ☃.txt", "plus+and%percent.txt", "q?hash#.txt"]
BIG = "multipart/twenty.bin"  # 20 MiB in 8 MiB parts (a common client default): `-3`


def seed_bucket(server, bucket: str, *, tags: bool) -> dict[str, bytes]:
    """Small objects with metadata and content headers under awkward keys, and one multipart."""
    extra = {"Tagging": TAGS} if tags else {}
    data = {}
    for key in AWKWARD:
        data[key] = os.urandom(1024)
        server.client.put_object(
            Bucket=bucket,
            Key=key,
            Body=data[key],
            Metadata={"origin": "s3compat"},
            ContentType="text/plain",
            ContentDisposition="attachment",
            CacheControl="max-age=60",
            **extra,
        )
    upload = server.client.create_multipart_upload(
        Bucket=bucket, Key=BIG, Metadata={"origin": "s3compat"}, ContentType="application/x-big", **extra
    )
    parts, body = [], b""
    for number, size in enumerate([8 * MiB, 8 * MiB, 4 * MiB], start=1):
        chunk = os.urandom(size)
        body += chunk
        etag = server.client.upload_part(
            Bucket=bucket, Key=BIG, UploadId=upload["UploadId"], PartNumber=number, Body=chunk
        )["ETag"]
        parts.append({"PartNumber": number, "ETag": etag})
    server.client.complete_multipart_upload(
        Bucket=bucket, Key=BIG, UploadId=upload["UploadId"], MultipartUpload={"Parts": parts}
    )
    data[BIG] = body
    return data


def run(proxy, src: str, dst: str, mode: str, report) -> tuple[dict, list[dict], str]:
    done = ferry(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", proxy.url, "--mode", mode,
        "--report", str(report), "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    return lines[-1]["summary"], lines[:-1], done.stdout


@pytest.mark.parametrize("mode", ["auto", "stream"])
@pytest.mark.parametrize("quirk", ["tagging-directive", "no-tagging", "head-part-number"])
@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_default_copy_through_each_quirk_copies_everything_and_says_each_degradation_once(
    request, server_name, quirk, mode, quirks, tmp_path
):
    server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), server.bucket("dst")
    keeps_tags = quirk != "no-tagging"  # a store without tagging holds none
    data = seed_bucket(server, src, tags=keeps_tags)
    proxy = quirks(server, quirk)

    summary, lines, stdout = run(proxy, src, dst, mode, tmp_path / "first.jsonl")
    assert (summary["copied"], summary["failed"]) == (len(data), 0), lines
    for key, body in data.items():
        got = server.client.get_object(Bucket=dst, Key=key)
        assert got["Body"].read() == body, key
        assert got["Metadata"] == {"origin": "s3compat"}
        if key != BIG:
            assert (got["ContentType"], got["ContentDisposition"], got["CacheControl"]) == (
                "text/plain", "attachment", "max-age=60",
            )  # fmt: skip
        tag_set = server.client.get_object_tagging(Bucket=dst, Key=key)["TagSet"]
        assert len(tag_set) == (2 if keeps_tags else 0), key
    degradations = summary["degradations"]
    assert len(degradations) == len(set(degradations)) <= 1
    for sentence in degradations:
        assert stdout.count(sentence) == 1  # in the summary once
        assert not any(sentence in (line.get("note") or "") for line in lines)  # never per object
    if quirk == "no-tagging" and mode == "stream":
        assert degradations and "tagging" in degradations[0]

    again, lines, _ = run(proxy, src, dst, mode, tmp_path / "second.jsonl")
    assert (again["skipped"], again["copied"], again["failed"]) == (len(data), 0, 0), lines


def test_a_destination_that_drops_tags_is_said_once_in_the_summary(versitygw, quirks, tmp_path):
    src = versitygw.bucket("src")
    dst = versitygw.bucket("dst")
    for n in range(4):
        versitygw.client.put_object(Bucket=src, Key=f"t{n}", Body=b"x", Tagging=TAGS)
    proxy = quirks(versitygw, "drops-tags")
    done = ferry(
        "copy", f"s3://{src}", f"s3://{dst}", "--source-endpoint-url", versitygw.url,
        "--dest-endpoint-url", proxy.url, "--concurrency", "1", "--quiet",
    )  # fmt: skip
    assert done.returncode == EXIT_FAILED
    assert "4 objects: 0 copied, 0 skipped, 4 failed" in done.stdout
    assert done.stdout.count("does not store object tags") == 1, done.stdout
    assert "and 3 more objects: see the note above" in done.stdout
    assert versitygw.keys(dst) == []  # the copy that lost its tags was removed
