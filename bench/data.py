"""The data each case copies, written once per server, and the cleanup between runs.

Objects are written the way a current SDK writes them (boto3's defaults: CRC checksums, and
8 MiB parts above 8 MiB, as the AWS CLI does), so every tool meets what it would meet in a
real bucket. Every destination is emptied after each run so disk use stays bounded.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from .servers import ACCESS_KEY, REGION, SECRET_KEY

MiB = 1024 * 1024
SEED_PART = 8 * MiB  # the AWS CLI's default part size
SRC_BUCKET = "bench-src"
DST_BUCKET = "bench-dst"


def client(url: str, pool: int = 64) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=Config(
            s3={"addressing_style": "path"},
            max_pool_connections=pool,
            retries={"mode": "standard", "max_attempts": 5},
            read_timeout=600,
        ),
    )


def make_buckets(s3: Any) -> None:
    for bucket in (SRC_BUCKET, DST_BUCKET):
        with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
            s3.create_bucket(Bucket=bucket)


def small_key(prefix: str, index: int) -> str:
    return f"{prefix}obj-{index:06d}"


def seed_small(s3: Any, prefix: str, count: int, size: int) -> None:
    """`count` objects of `size` random bytes each (distinct, so no layer can dedupe them)."""
    base = os.urandom(size)

    def put(index: int) -> None:
        body = index.to_bytes(8, "big") + base[8:]
        s3.put_object(Bucket=SRC_BUCKET, Key=small_key(prefix, index), Body=body)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, range(count)))


def seed_files(folder: Path, count: int, size: int) -> None:
    """`count` local files of `size` random bytes each, named as the small objects are, for
    the upload case; kept while their number and size are right."""
    present = list(folder.iterdir()) if folder.is_dir() else []
    if len(present) == count and all(p.stat().st_size == size for p in present):
        return
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    base = os.urandom(size)
    for index in range(count):
        (folder / small_key("", index)).write_bytes(index.to_bytes(8, "big") + base[8:])


def count_files(folder: Path) -> tuple[int, int]:
    """(files, bytes) under a local folder: each download run is checked to be complete (a
    temporary file left behind counts too, and fails the check)."""
    n = total = 0
    for path in folder.rglob("*"):
        if path.is_file():
            n += 1
            total += path.stat().st_size
    return n, total


class _Generated(io.RawIOBase):
    """`size` bytes made of a random block with each block's offset stamped in: cheap to make,
    never repeating block to block, and read sequentially like a file."""

    def __init__(self, size: int, block: int = 4 * MiB) -> None:
        self._size, self._pos, self._block = size, 0, os.urandom(block)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self._size - self._pos)
        if n <= 0:
            return 0
        view = memoryview(buffer)
        done = 0
        while done < n:
            offset = (self._pos + done) % len(self._block)
            chunk = min(n - done, len(self._block) - offset)
            view[done : done + chunk] = self._block[offset : offset + chunk]
            if offset == 0:
                stamp = ((self._pos + done) // len(self._block)).to_bytes(8, "big")
                view[done : done + min(8, chunk)] = stamp[: min(8, chunk)]
            done += chunk
        self._pos += n
        return n


def seed_large(s3: Any, key: str, size: int, part: int = SEED_PART) -> None:
    """One object uploaded in parts by s3transfer, as `aws s3 cp` would (8 MiB parts unless
    told otherwise: case 3 also streams a source in 16 MiB parts, whose layout Ferry keeps)."""
    config = TransferConfig(multipart_threshold=part, multipart_chunksize=part, max_concurrency=8)
    s3.upload_fileobj(io.BufferedReader(_Generated(size), part), SRC_BUCKET, key, Config=config)


def exists(s3: Any, key: str, size: int) -> bool:
    try:
        return int(s3.head_object(Bucket=SRC_BUCKET, Key=key)["ContentLength"]) == size
    except Exception:
        return False


def keys(s3: Any, bucket: str, prefix: str) -> Iterator[tuple[str, int]]:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            yield obj["Key"], int(obj["Size"])


def count(s3: Any, bucket: str, prefix: str) -> tuple[int, int]:
    """(objects, bytes) under a prefix: each run's copy is checked to be complete."""
    n = total = 0
    for _, size in keys(s3, bucket, prefix):
        n += 1
        total += size
    return n, total


def empty(s3: Any, bucket: str, prefix: str) -> None:
    """Delete every object and abort every open upload under `prefix`."""
    batch: list[dict[str, str]] = []
    for key, _ in keys(s3, bucket, prefix):
        batch.append({"Key": key})
        if len(batch) == 1000:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
            batch = []
    if batch:
        s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
    try:
        uploads = s3.list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", [])
    except Exception:
        uploads = []
    for upload in uploads:
        with contextlib.suppress(Exception):
            s3.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])


def describe_source(s3: Any, key: str) -> str:
    """What a source object looks like to a copier: size, part count and stored checksum."""
    head = s3.head_object(Bucket=SRC_BUCKET, Key=key, ChecksumMode="ENABLED")
    checksum = next(
        (
            f"{a} {head.get('ChecksumType', '')}".strip()
            for a in ("CRC64NVME", "CRC32C", "CRC32", "SHA256", "SHA1")
            if head.get(f"Checksum{a}")
        ),
        "no checksum",
    )
    etag = head.get("ETag", "").strip('"')
    parts = etag.rsplit("-", 1)[1] if "-" in etag else "1"
    return f"{parts} part(s), {checksum}"
