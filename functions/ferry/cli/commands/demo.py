"""`ferry demo`: a whole copy job on an embedded S3 endpoint, no AWS account, no network.

It runs the same code path as `ferry copy` (the CLI's own `run_copy`), then checks the
result independently of the engine and runs again to show that identical objects are skipped.
Then the other door: `ferry run` (the CLI's `run_run`) of a job spec, the pipeline's own
code on this machine, with its ledger in a temporary SQLite file.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import tempfile
from typing import IO, Any

import boto3
from botocore.config import Config

from ferry.cli.commands.copy_command import parse_copy_args, run_copy
from ferry.cli.commands.run_command import parse_run_args, run_run
from ferry.counts import plural
from ferry.limits import MiB, format_size

SOURCE, DEST, PIPELINE_DEST = "ferry-demo-source", "ferry-demo-dest", "ferry-demo-pipeline"
AWKWARD_KEYS = [
    "awkward/with space.txt",
    "awkward/plus+sign.txt",
    "awkward/percent%20literal.txt",
    "awkward/question?mark#hash.txt",
    "awkward/données/日本語 ü.txt",
    "awkward/folder-marker/",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _client(url: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, request_checksum_calculation="when_required"),
    )


def fill_source(s3: Any, objects: int, large_size: int, rng: random.Random) -> int:
    """A realistic mix: many small objects, metadata, tags, empty and awkward keys, one multipart."""
    s3.create_bucket(Bucket=SOURCE)
    s3.create_bucket(Bucket=DEST)
    count = 0
    for i in range(objects):
        size = int(rng.lognormvariate(9.5, 1.2)) % (512 * 1024)
        extra: dict[str, Any] = {}
        if i % 5 == 0:
            extra = {
                "Metadata": {"owner": f"team-{i % 3}"},
                "ContentType": "application/json",
                "CacheControl": "max-age=60",
            }
        if i % 7 == 0:
            extra["Tagging"] = f"project=demo&index={i}"
        s3.put_object(
            Bucket=SOURCE, Key=f"data/{i // 100:02d}/object-{i:05d}.bin", Body=rng.randbytes(size), **extra
        )
        count += 1
    s3.put_object(Bucket=SOURCE, Key="data/empty-object", Body=b"")
    for key in AWKWARD_KEYS:
        s3.put_object(Bucket=SOURCE, Key=key, Body=b"" if key.endswith("/") else key.encode())
    count += 1 + len(AWKWARD_KEYS)
    upload = s3.create_multipart_upload(Bucket=SOURCE, Key="large/video.mp4", ContentType="video/mp4")
    part_size, parts = 16 * MiB, []
    for number, offset in enumerate(range(0, large_size, part_size), start=1):
        body = rng.randbytes(min(part_size, large_size - offset))
        response = s3.upload_part(
            Bucket=SOURCE, Key="large/video.mp4", UploadId=upload["UploadId"], PartNumber=number, Body=body
        )
        parts.append({"PartNumber": number, "ETag": response["ETag"]})
    s3.complete_multipart_upload(
        Bucket=SOURCE, Key="large/video.mp4", UploadId=upload["UploadId"], MultipartUpload={"Parts": parts}
    )
    return count + 1


def check_copy(s3: Any) -> list[str]:
    """Independent of the engine: every key, size and ETag equal; metadata and tags preserved."""
    problems = []

    def listing(bucket: str) -> dict[str, tuple[int, str]]:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return {o["Key"]: (o["Size"], o["ETag"]) for p in pages for o in p.get("Contents", [])}

    source, dest = listing(SOURCE), listing(DEST)
    if source != dest:
        missing = set(source) - set(dest)
        problems.append(f"{plural(len(missing), 'key')} missing or different, e.g. {sorted(missing)[:3]}")
    for key in [k for k in source if k.endswith("00000.bin") or k.endswith("00035.bin")]:
        a, b = s3.head_object(Bucket=SOURCE, Key=key), s3.head_object(Bucket=DEST, Key=key)
        if (a.get("Metadata"), a.get("ContentType")) != (b.get("Metadata"), b.get("ContentType")):
            problems.append(f"metadata differs for {key}")
        if (
            s3.get_object_tagging(Bucket=SOURCE, Key=key)["TagSet"]
            != s3.get_object_tagging(Bucket=DEST, Key=key)["TagSet"]
        ):
            problems.append(f"tags differ for {key}")
    return problems


def _run_pipeline_job(s3: Any, url: str, stdout: IO[str]) -> int:
    """The second door: the same source as a pipeline job spec, run by `ferry run` here (the
    large object above a lowered threshold takes the Fargate task's entry point)."""
    s3.create_bucket(Bucket=PIPELINE_DEST)
    spec = {
        "source": {"bucket": SOURCE, "prefix": ""},
        "destination": {"bucket": PIPELINE_DEST, "prefix": ""},
    }
    # Kept when the demo ends: the report and its HTML page it prints are there to be opened.
    folder = tempfile.mkdtemp(prefix="ferry-demo-")
    spec_path = os.path.join(folder, "job.json")
    with open(spec_path, "w", encoding="utf-8") as file:
        json.dump(spec, file)
    argv = [
        "run", spec_path, "--endpoint-url", url, "--ledger", os.path.join(folder, "ledger.sqlite"),
        "--large-object-threshold", "64MiB", "--quiet",
    ]  # fmt: skip
    stdout.write(f"\nThe pipeline's code on this machine, with job.json = {json.dumps(spec)}:\n")
    stdout.write(f"$ ferry {' '.join(argv)}\n")
    code = run_run(parse_run_args(argv[1:]), stdout, stdout)
    stdout.write(
        f"(The demo's job spec, ledger and reports stay in {folder}: open report.html there; remove "
        "the folder when done. `ferry run` keeps them in ~/.cache/ferry unless told otherwise.)\n"
    )
    return code


def run_demo(objects: int, large_size: int, stdout: IO[str]) -> int:
    from moto.server import ThreadedMotoServer

    # The embedded endpoint accepts any credentials; never send real ones to it.
    os.environ.update(AWS_ACCESS_KEY_ID="demo", AWS_SECRET_ACCESS_KEY="demo", AWS_DEFAULT_REGION="us-east-1")
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        os.environ.pop(var, None)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the embedded server's request log
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    try:
        s3 = _client(url)
        stdout.write(f"Embedded S3 endpoint on {url}\n")
        count = fill_source(s3, objects, large_size, random.Random(42))
        stdout.write(
            f"Source s3://{SOURCE}: {plural(count, 'object')} (small ones with metadata and tags, an empty one, "
            f"awkward keys, one {format_size(large_size)} multipart object)\n\n"
        )
        argv = ["copy", f"s3://{SOURCE}/", f"s3://{DEST}/", "--endpoint-url", url, "--quiet"]
        args = parse_copy_args(argv[1:])
        stdout.write(f"$ ferry {' '.join(argv)}\n")
        first = run_copy(args, stdout, stdout)
        problems = check_copy(s3)
        if problems:
            stdout.write("Independent check FAILED:\n" + "".join(f"  {p}\n" for p in problems))
            return 2
        stdout.write("Independent check: every key, size and ETag matches; metadata and tags preserved.\n\n")
        stdout.write("Running the same copy again (identical objects are skipped):\n")
        second = run_copy(args, stdout, stdout)
        third = _run_pipeline_job(s3, url, stdout)
        return first or second or third
    finally:
        server.stop()
