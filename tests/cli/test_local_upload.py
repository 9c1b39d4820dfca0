"""`ferry copy ./folder/ s3://bucket/prefix/`: local files uploaded as a user runs it (the installed
`ferry`, real files, real S3 servers), each copy proved by the checksum S3 stored, and what is not
copied (links, special files, empty folders) accounted for."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from awscrt import checksums as crt

from conftest import S3Server

FERRY = str(Path(sys.executable).with_name("ferry"))
MiB = 1024 * 1024
SMALL_PARTS = ["--multipart-threshold", "5MiB", "--part-size", "5MiB"]


def ferry(server: S3Server, *args: str) -> subprocess.CompletedProcess[str]:
    where = ["--endpoint-url", server.url, "--region", server.region]
    return subprocess.run([FERRY, "copy", *args, *where], capture_output=True, text=True, timeout=300)


def crc32c(data: bytes) -> str:
    return base64.b64encode(crt.crc32c(data).to_bytes(4, "big")).decode()


def stored(server: S3Server, bucket: str, key: str) -> tuple[bytes, dict[str, Any]]:
    body = server.client.get_object(Bucket=bucket, Key=key)["Body"].read()
    head = server.client.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    return body, head


def report_lines(path: Path) -> dict[str, dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return {line["key"]: line for line in lines if "key" in line}


def tree(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def test_a_folder_uploads_under_the_prefix_each_file_proved_and_a_second_run_skips_all(
    s3_compatible: S3Server, tmp_path: Path
) -> None:
    server = s3_compatible
    bucket = server.bucket("up")
    large = os.urandom(12 * MiB + 123)  # three parts of 5 MiB, the last short
    files = {
        "a.txt": b"hello",
        "sub/b.bin": os.urandom(1000),
        "sub/deep/c.jpg": b"\xff\xd8",
        "big.bin": large,
    }
    src = tree(tmp_path / "photos", files)
    (src / "empty-folder").mkdir()
    report = tmp_path / "report.jsonl"

    run = ferry(server, f"{src}/", f"s3://{bucket}/backup/", *SMALL_PARTS, "--report", str(report))

    assert run.returncode == 0, run.stderr
    assert "4 objects: 4 copied, 0 skipped, 0 failed" in run.stdout
    assert "upload 3, upload-multipart 1" in run.stdout or "upload-multipart 1, upload 3" in run.stdout
    assert sorted(server.keys(bucket)) == sorted(f"backup/{name}" for name in files)  # no folder key
    for name, data in files.items():
        body, head = stored(server, bucket, f"backup/{name}")
        assert body == data
        assert head["ChecksumCRC32C"] == crc32c(data)  # the checksum computed while reading
    assert (
        server.client.head_object(Bucket=bucket, Key="backup/sub/deep/c.jpg")["ContentType"] == "image/jpeg"
    )
    lines = report_lines(report)
    assert lines[str(src / "big.bin")]["verified_by"] == "crc32c (full object)"
    assert lines[str(src / "big.bin")]["strategy"] == "upload-multipart"
    assert server.open_uploads(bucket) == []

    again = ferry(server, f"{src}/", f"s3://{bucket}/backup/", *SMALL_PARTS, "--json")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert (summary["copied"], summary["skipped"]) == (0, 4)

    by_time = ferry(
        server, f"{src}/", f"s3://{bucket}/backup/", *SMALL_PARTS, "--compare", "size-mtime", "--json"
    )
    assert json.loads(by_time.stdout)["skipped"] == 4


def test_a_changed_file_of_the_same_size_is_uploaded_again(versitygw: S3Server, tmp_path: Path) -> None:
    bucket = versitygw.bucket("up")
    src = tree(tmp_path / "src", {"same.txt": b"version-1", "large.bin": os.urandom(6 * MiB)})
    assert ferry(versitygw, str(src), f"s3://{bucket}", *SMALL_PARTS).returncode == 0
    (src / "same.txt").write_bytes(b"version-2")  # same size, other bytes
    with open(src / "large.bin", "r+b") as large:
        large.seek(3 * MiB)
        large.write(b"X")
    changed = (src / "large.bin").read_bytes()

    run = ferry(versitygw, str(src), f"s3://{bucket}", *SMALL_PARTS, "--json")

    assert json.loads(run.stdout)["copied"] == 2, run.stderr
    assert stored(versitygw, bucket, "same.txt")[0] == b"version-2"
    assert stored(versitygw, bucket, "large.bin")[0] == changed


def test_one_file_uploads_into_a_folder_or_onto_a_key(versitygw: S3Server, tmp_path: Path) -> None:
    bucket = versitygw.bucket("up")
    path = tmp_path / "report.pdf"
    path.write_bytes(b"%PDF-1.7")
    assert ferry(versitygw, str(path), f"s3://{bucket}/docs/").returncode == 0
    assert ferry(versitygw, str(path), f"s3://{bucket}/renamed.pdf").returncode == 0
    assert ferry(versitygw, str(path), f"s3://{bucket}").returncode == 0
    (tmp_path / "latest.pdf").symlink_to(path)  # a link named on the command line is read through
    assert ferry(versitygw, str(tmp_path / "latest.pdf"), f"s3://{bucket}/").returncode == 0
    assert sorted(versitygw.keys(bucket)) == ["docs/report.pdf", "latest.pdf", "renamed.pdf", "report.pdf"]
    assert versitygw.client.get_object(Bucket=bucket, Key="latest.pdf")["Body"].read() == b"%PDF-1.7"


def test_include_exclude_and_dry_run(versitygw: S3Server, tmp_path: Path) -> None:
    bucket = versitygw.bucket("up")
    src = tree(tmp_path / "src", {"a.jpg": b"1", "b.txt": b"2", "raw/c.jpg": b"3", "raw/tmp/d.jpg": b"4"})

    dry = ferry(versitygw, str(src), f"s3://{bucket}/p", "--dry-run", "--include", "*.jpg")
    assert dry.returncode == 0, dry.stderr
    assert "dry run: 3 objects: would copy 3 (3 B), would skip 0, 0 failed; nothing was written" in dry.stdout
    assert versitygw.keys(bucket) == []

    run = ferry(versitygw, str(src), f"s3://{bucket}/p", "--include", "*.jpg", "--exclude", "raw/tmp/*")
    assert run.returncode == 0, run.stderr
    assert sorted(versitygw.keys(bucket)) == ["p/a.jpg", "p/raw/c.jpg"]


def test_symbolic_links_are_skipped_with_a_reason_unless_followed(
    versitygw: S3Server, tmp_path: Path
) -> None:
    bucket = versitygw.bucket("up")
    outside = tree(tmp_path / "outside", {"target.txt": b"pointed at", "dir/inner.txt": b"inner"})
    src = tree(tmp_path / "src", {"real.txt": b"real"})
    (src / "to-file").symlink_to(outside / "target.txt")
    (src / "to-dir").symlink_to(outside / "dir")
    (src / "dangling").symlink_to(tmp_path / "nowhere")
    (src / "loop").symlink_to(src)
    report = tmp_path / "report.jsonl"

    run = ferry(versitygw, str(src), f"s3://{bucket}", "--report", str(report))

    assert run.returncode == 0, run.stderr
    assert versitygw.keys(bucket) == ["real.txt"]
    assert "5 objects: 1 copied, 4 skipped" in run.stdout
    assert (
        "skipped: 4 symbolic links, not followed (--follow-symlinks copies what they point to)" in run.stdout
    )
    lines = report_lines(report)
    assert lines[str(src / "to-file")]["status"] == "skipped"
    assert "symbolic link" in lines[str(src / "to-file")]["reason"]

    followed = ferry(versitygw, str(src), f"s3://{bucket}", "-L", "--report", str(report))

    assert followed.returncode == 2  # the dangling link and the loop are failures to look at
    assert sorted(versitygw.keys(bucket)) == ["real.txt", "to-dir/inner.txt", "to-file"]
    assert stored(versitygw, bucket, "to-file")[0] == b"pointed at"
    lines = report_lines(report)
    assert "target is missing" in lines[str(src / "dangling")]["reason"]
    assert "a loop" in lines[str(src / "loop")]["reason"]
    assert f"failed: {src / 'dangling'}: a symbolic link to nothing" in followed.stdout


def test_special_files_are_skipped_and_unreadable_ones_fail_alone(
    versitygw: S3Server, tmp_path: Path
) -> None:
    bucket = versitygw.bucket("up")
    src = tree(tmp_path / "src", {"ok.txt": b"ok"})
    os.mkfifo(src / "pipe")
    report = tmp_path / "report.jsonl"
    run = ferry(versitygw, str(src), f"s3://{bucket}", "--report", str(report))
    assert run.returncode == 0, run.stderr
    assert versitygw.keys(bucket) == ["ok.txt"]
    assert report_lines(report)[str(src / "pipe")]["reason"] == "a FIFO: only regular files are copied"


def test_a_file_that_is_not_utf8_named_fails_alone(versitygw: S3Server, tmp_path: Path) -> None:
    bucket = versitygw.bucket("up")
    src = tree(tmp_path / "src", {"fine.txt": b"ok"})
    with open(os.path.join(os.fsencode(src), b"bad-\xff.txt"), "wb") as odd:
        odd.write(b"x")
    run = ferry(versitygw, str(src), f"s3://{bucket}")
    assert run.returncode == 2
    assert versitygw.keys(bucket) == ["fine.txt"]
    assert "bad-\\xff.txt: the file name is not UTF-8" in run.stdout


@pytest.mark.parametrize("algorithm", ["CRC64NVME", "SHA256"])
def test_the_checksum_algorithm_is_the_one_asked_for(
    versitygw: S3Server, tmp_path: Path, algorithm: str
) -> None:
    bucket = versitygw.bucket("up")
    src = tree(tmp_path / "src", {"small.bin": os.urandom(100), "large.bin": os.urandom(11 * MiB)})
    run = ferry(
        versitygw, str(src), f"s3://{bucket}", *SMALL_PARTS, "--checksum-algorithm", algorithm, "--json"
    )
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    if algorithm == "SHA256":  # a SHA does not combine: a multipart upload stores it per part
        assert summary["verified_by"] == {"sha256 (full object)": 1, "sha256 (composite)": 1}
    else:
        assert summary["verified_by"] == {"crc64nvme (full object)": 2}
    for name in ("small.bin", "large.bin"):
        _, head = stored(versitygw, bucket, name)
        assert f"Checksum{algorithm}" in head


def test_size_age_and_files_from_filters_choose_the_files(versitygw: S3Server, tmp_path: Path) -> None:
    """The filters mean on a folder what they mean on a prefix: size, modification time, a list."""
    bucket = versitygw.bucket("up")
    src = tree(tmp_path / "src", {"small.txt": b"1", "large.txt": b"x" * 2048, "old.txt": b"o" * 2048})
    os.utime(src / "old.txt", (1_000_000_000, 1_000_000_000))  # 2001
    run = ferry(versitygw, str(src), f"s3://{bucket}/p", "--min-size", "1KiB", "--max-age", "30d")
    assert run.returncode == 0, run.stderr
    assert "1 object: 1 copied" in run.stdout
    assert versitygw.keys(bucket) == ["p/large.txt"]
    listed = tmp_path / "keys.txt"
    listed.write_text("small.txt\n")
    run = ferry(versitygw, str(src), f"s3://{bucket}/q", "--files-from", str(listed))
    assert run.returncode == 0, run.stderr
    assert sorted(versitygw.keys(bucket)) == ["p/large.txt", "q/small.txt"]
