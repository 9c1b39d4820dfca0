"""`ferry copy s3://bucket/prefix/ ./folder/`: objects downloaded as a user runs it (the installed
`ferry`, real S3 servers, real files): each file proved by the object's own evidence before it
takes its name, given the object's time, and keys that cannot be file names refused alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import S3Server
from faults.proxy import FaultPlan, fault_proxy

FERRY = str(Path(sys.executable).with_name("ferry"))
MiB = 1024 * 1024
SMALL_PARTS = ["--multipart-threshold", "5MiB", "--part-size", "5MiB"]


def ferry(url: str, region: str, *args: str) -> subprocess.CompletedProcess[str]:
    where = ["--endpoint-url", url, "--region", region]
    return subprocess.run([FERRY, "copy", *args, *where], capture_output=True, text=True, timeout=300)


def download(server: S3Server, *args: str) -> subprocess.CompletedProcess[str]:
    return ferry(server.url, server.region, *args)


def report_lines(path: Path) -> dict[str, dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return {line["key"]: line for line in lines if "key" in line}


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def put_in_parts(server: S3Server, bucket: str, key: str, data: bytes, part: int, **create: Any) -> None:
    client = server.client
    upload = client.create_multipart_upload(Bucket=bucket, Key=key, **create)["UploadId"]
    algorithm = create.get("ChecksumAlgorithm")
    parts = []
    for number, start in enumerate(range(0, len(data), part), 1):
        extra = {"ChecksumAlgorithm": algorithm} if algorithm else {}
        response = client.upload_part(
            Bucket=bucket,
            Key=key,
            UploadId=upload,
            PartNumber=number,
            Body=data[start : start + part],
            **extra,
        )
        entry = {"PartNumber": number, "ETag": response["ETag"]}
        if algorithm:
            entry[f"Checksum{algorithm}"] = response[f"Checksum{algorithm}"]
        parts.append(entry)
    client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
    )


def test_a_prefix_downloads_into_a_folder_proved_timed_and_skipped_the_second_time(
    s3_compatible: S3Server, tmp_path: Path
) -> None:
    server = s3_compatible
    bucket = server.bucket("down")
    objects = {
        "photos/a.txt": b"hello",
        "photos/2024/b.bin": os.urandom(1000),
        "photos/2024/deep/empty": b"",
        "photos/big.bin": os.urandom(12 * MiB + 7),
        "photosX/not-me": b"no",
    }
    for key, data in objects.items():
        server.client.put_object(Bucket=bucket, Key=key, Body=data)
    dst = tmp_path / "out"
    report = tmp_path / "report.jsonl"

    run = download(server, f"s3://{bucket}/photos", str(dst), *SMALL_PARTS, "--report", str(report))

    assert run.returncode == 0, run.stderr
    assert "4 objects: 4 copied, 0 skipped, 0 failed" in run.stdout
    expected = {k.removeprefix("photos/"): v for k, v in objects.items() if k.startswith("photos/")}
    assert files_under(dst) == expected
    for key in expected:
        modified = server.client.head_object(Bucket=bucket, Key=f"photos/{key}")["LastModified"]
        assert (dst / key).stat().st_mtime == modified.timestamp()  # the object's time, to the second
    lines = report_lines(report)
    assert lines["photos/big.bin"]["strategy"] == "download-ranges"
    assert lines["photos/a.txt"]["strategy"] == "download"
    assert all(line["verified_by"] in ("md5", "crc64nvme (full object)") for line in lines.values())
    assert not [p for p in dst.rglob(".*")], "no temporary file or record stays"

    again = download(server, f"s3://{bucket}/photos", str(dst), *SMALL_PARTS, "--json")
    assert (json.loads(again.stdout)["skipped"], json.loads(again.stdout)["copied"]) == (4, 0), again.stderr
    by_time = download(
        server, f"s3://{bucket}/photos", str(dst), *SMALL_PARTS, "--json", "--compare", "size-mtime"
    )
    assert json.loads(by_time.stdout)["skipped"] == 4, by_time.stderr


def test_a_file_changed_locally_is_downloaded_again_with_checksums_but_not_by_time(
    versitygw: S3Server, tmp_path: Path
) -> None:
    bucket = versitygw.bucket("down")
    versitygw.client.put_object(Bucket=bucket, Key="doc.txt", Body=b"original")
    dst = tmp_path / "out"
    assert download(versitygw, f"s3://{bucket}", str(dst)).returncode == 0
    (dst / "doc.txt").write_bytes(b"ORIGINAL")  # same size, newer, other bytes

    by_time = download(versitygw, f"s3://{bucket}", str(dst), "--compare", "size-mtime")
    assert (dst / "doc.txt").read_bytes() == b"ORIGINAL", by_time.stderr
    by_checksum = download(versitygw, f"s3://{bucket}", str(dst))
    assert (dst / "doc.txt").read_bytes() == b"original", by_checksum.stderr


def test_one_object_downloads_into_a_folder_or_onto_a_file_name(versitygw: S3Server, tmp_path: Path) -> None:
    bucket = versitygw.bucket("down")
    versitygw.client.put_object(Bucket=bucket, Key="dir/one.bin", Body=b"one")
    assert download(versitygw, f"s3://{bucket}/dir/one.bin", f"{tmp_path}/into/").returncode == 0
    assert download(versitygw, f"s3://{bucket}/dir/one.bin", str(tmp_path / "renamed.bin")).returncode == 0
    assert (tmp_path / "into" / "one.bin").read_bytes() == b"one"
    assert (tmp_path / "renamed.bin").read_bytes() == b"one"


@pytest.mark.parametrize(
    "how, evidence",
    [
        ("minio-one-part-no-checksum", "md5"),
        ("minio-parts-no-checksum", "etag"),
        ("versitygw-parts-sha256-composite", "sha256 (composite)"),
        ("versitygw-parts-crc32-full", "crc32 (full object)"),
    ],
)
def test_each_kind_of_evidence_proves_a_download(
    request: pytest.FixtureRequest, tmp_path: Path, how: str, evidence: str
) -> None:
    """What the object carries decides the proof; an object in parts is fetched in its own
    parts where only they can prove it (its ETag or composite checksum is over them)."""
    server = request.getfixturevalue(how.split("-")[0])
    bucket = server.bucket("down")
    data = os.urandom(13 * MiB)
    if how == "minio-one-part-no-checksum":
        server.client.put_object(Bucket=bucket, Key="obj", Body=data)
    elif how == "minio-parts-no-checksum":
        put_in_parts(server, bucket, "obj", data, 6 * MiB)
    elif how == "versitygw-parts-sha256-composite":
        put_in_parts(server, bucket, "obj", data, 6 * MiB, ChecksumAlgorithm="SHA256")
    else:
        put_in_parts(
            server, bucket, "obj", data, 6 * MiB, ChecksumAlgorithm="CRC32", ChecksumType="FULL_OBJECT"
        )
    report = tmp_path / "report.jsonl"

    run = download(server, f"s3://{bucket}/obj", f"{tmp_path}/out/", *SMALL_PARTS, "--report", str(report))

    assert run.returncode == 0, run.stdout + run.stderr
    assert report_lines(report)["obj"]["verified_by"] == evidence
    assert (tmp_path / "out" / "obj").read_bytes() == data


@pytest.mark.parametrize("size", [200_000, 11 * MiB], ids=["one-get", "ranged-gets"])
@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_bytes_damaged_on_the_way_never_take_the_file_name(
    request: pytest.FixtureRequest, tmp_path: Path, server_name: str, size: int
) -> None:
    """Every GET has one byte flipped (tests/faults/proxy.py): versitygw's stored CRC64NVME
    catches it on one GET (read again, five times, then failed) or in the combined CRC of
    the parts; MinIO's objects have no checksum, so their MD5 ETag catches it. Either way the
    download fails with the reason and leaves no file, temporary or final."""
    server: S3Server = request.getfixturevalue(server_name)
    bucket = server.bucket("down")
    server.client.put_object(Bucket=bucket, Key="obj", Body=os.urandom(size))
    dst = tmp_path / "out"
    plan = FaultPlan(rates={"flip": 1.0}, kinds=frozenset({"get", "get-range"}))
    with fault_proxy(server.url, plan) as proxy:
        run = ferry(proxy.url, server.region, f"s3://{bucket}", str(dst), *SMALL_PARTS)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "failed: s3://" in run.stdout
    assert "verification failed" in run.stdout or "reading the source failed 5 times" in run.stdout
    assert files_under(dst) == {} and not [p for p in dst.rglob("*") if p.is_file()]


def test_a_body_cut_short_is_read_again_from_where_it_broke(versitygw: S3Server, tmp_path: Path) -> None:
    bucket = versitygw.bucket("down")
    data = os.urandom(11 * MiB)
    versitygw.client.put_object(Bucket=bucket, Key="obj", Body=data)
    # Half the GETs cut short (the same ones on every run: the draws are seeded; this seed cuts
    # the object's one ranged GET and some of those asked again); a range asked again from
    # where its body broke is another request, cut or not in its turn.
    plan = FaultPlan(rates={"truncate": 0.5}, kinds=frozenset({"get-range"}), seed=4)
    with fault_proxy(versitygw.url, plan) as proxy:
        run = ferry(proxy.url, versitygw.region, f"s3://{bucket}", str(tmp_path), *SMALL_PARTS)
        assert proxy.faults()["truncate"] >= 2, (proxy.faults(), proxy.requests)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "obj").read_bytes() == data


def test_an_object_nothing_can_prove_fails_before_a_byte_is_written(
    minio: S3Server, quirks: Any, tmp_path: Path
) -> None:
    """MinIO stores no checksum unless asked; an object in two parts of 20 MiB has a `-2` ETag
    that no common part size (8, 5, 16, 15, 10, 64, 100, 128 MiB) gives, and behind a proxy
    that refuses HEAD partNumber their sizes cannot be learned: nothing can prove a download."""
    bucket = minio.bucket("down")
    put_in_parts(minio, bucket, "parts", os.urandom(40 * MiB), 20 * MiB)
    minio.client.put_object(Bucket=bucket, Key="plain", Body=b"provable")
    proxy = quirks(minio, "head-part-number")
    dst = tmp_path / "out"

    run = ferry(proxy.url, minio.region, f"s3://{bucket}", str(dst), *SMALL_PARTS)

    assert run.returncode == 2, run.stdout + run.stderr
    assert (
        "failed: s3://" in run.stdout and "/parts: cannot be proved: the object has no checksum" in run.stdout
    )
    assert files_under(dst) == {"plain": b"provable"}
    ranged = [seen for seen in proxy.requests("GET") if "range" in seen.headers]
    assert ranged == [], "not a byte of it was asked for"
    assert not [p for p in dst.rglob(".*")]


def test_keys_that_cannot_be_file_names_fail_alone_and_nothing_leaves_the_folder(
    motoserver: S3Server, tmp_path: Path
) -> None:
    """moto keeps any key, as S3 does."""
    bucket = motoserver.bucket("down")
    outside = tmp_path / "outside"
    outside.mkdir()
    keys = {
        "ok.txt": b"fine",
        "../escape.txt": b"no",
        "a/../../escape2.txt": b"no",
        "a/./b.txt": b"no",
        "a//c.txt": b"no",
        "n" * 300: b"too long",
        "file-and-folder": b"a file",
        "file-and-folder/inside": b"under a file",
        "marker/": b"",
        "link/inside.txt": b"through a link",
        "nul\0byte": b"no",
    }
    for key, data in keys.items():
        motoserver.client.put_object(Bucket=bucket, Key=key, Body=data)
    listed = set(motoserver.keys(bucket))
    assert set(keys) <= listed, f"moto changed keys: {set(keys) - listed}"
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "link").symlink_to(outside)
    report = tmp_path / "report.jsonl"

    run = download(motoserver, f"s3://{bucket}", str(dst), "--report", str(report), "--concurrency", "1")

    assert run.returncode == 2, run.stdout + run.stderr
    lines = report_lines(report)
    assert lines["ok.txt"]["status"] == "copied"
    assert lines["file-and-folder"]["status"] == "copied"  # first in key order: the file wins
    assert "'..' segment" in lines["../escape.txt"]["reason"]
    assert "'..' segment" in lines["a/../../escape2.txt"]["reason"]
    assert "'.' segment" in lines["a/./b.txt"]["reason"]
    assert "empty segment" in lines["a//c.txt"]["reason"]
    assert "300 bytes, longer than this file system allows (255)" in lines["n" * 300]["reason"]
    assert "is a file where the key needs a folder" in lines["file-and-folder/inside"]["reason"]
    assert "is a symbolic link, which is not followed" in lines["link/inside.txt"]["reason"]
    assert lines["marker/"]["status"] == "skipped" and "folder marker" in lines["marker/"]["reason"]
    assert "NUL character" in lines["nul\0byte"]["reason"]
    assert "11 objects: 2 copied, 1 skipped, 8 failed" in run.stdout
    assert files_under(dst) == {"ok.txt": b"fine", "file-and-folder": b"a file"}
    assert list(outside.iterdir()) == [] and not (tmp_path / "escape.txt").exists()


def test_size_and_age_filters_choose_the_objects(versitygw: S3Server, tmp_path: Path) -> None:
    bucket = versitygw.bucket("down")
    for key, body in {"p/small": b"1", "p/large": b"x" * 2048}.items():
        versitygw.client.put_object(Bucket=bucket, Key=key, Body=body)
    run = download(versitygw, f"s3://{bucket}/p/", str(tmp_path / "d"), "--min-size", "1KiB")
    assert run.returncode == 0, run.stderr
    assert files_under(tmp_path / "d") == {"large": b"x" * 2048}
    run = download(versitygw, f"s3://{bucket}/p/", str(tmp_path / "e"), "--min-age", "1d")
    assert run.returncode == 0, run.stderr  # every object is newer: a copy of nothing
    assert files_under(tmp_path / "e") == {}


@pytest.mark.parametrize("virtual_s3", [4096], indirect=True)
def test_an_object_of_10000_parts_is_downloaded_in_its_own_parts_and_proved_by_them(
    virtual_s3: Any, tmp_path: Path
) -> None:
    """S3's 10,000 parts (of 4 KiB, on the virtual endpoint, which stores no checksum): the
    download learns the layout, fetches the parts in runs of ranged GETs (each answer's
    Content-Range checked), records and checksums each of the 10,000 parts at its own end,
    and proves the file by the `-10000` ETag computed over them."""
    bucket = virtual_s3.bucket("down")
    made = virtual_s3.make(bucket, "big", "seed-10000", [4096] * 10_000)
    report = tmp_path / "r.jsonl"
    dst = tmp_path / "out"

    run = download(virtual_s3, f"s3://{bucket}/big", f"{dst}/", "--report", str(report))

    assert run.returncode == 0, run.stdout + run.stderr
    assert made["ETag"].strip('"').endswith("-10000")
    line = report_lines(report)["big"]
    assert line["status"] == "copied" and "etag" in line["verified_by"], line
    expected = virtual_s3.client.get_object(Bucket=bucket, Key="big")["Body"].read()
    assert len(expected) == 10_000 * 4096
    assert (dst / "big").read_bytes() == expected
    assert [p.name for p in dst.iterdir()] == ["big"]  # no temporary file or record left
