"""A file larger than the memory `ferry copy` may use goes up and comes down within it: uploads
hold the parts in flight (granted by --memory-limit), downloads one chunk per ranged GET.

Measured as the kernel keeps it: the `ferry` process's own peak resident set (VmHWM, read by the
process as it exits; see test_stream_rss.py for why not ru_maxrss), on MinIO.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from cli.test_stream_rss import FERRY_REPORTING_PEAK
from conftest import S3Server

MiB = 1024 * 1024
SIZE = 320 * MiB
# The process's own ~70 MiB (Python, botocore, the clients) and what is in flight: far below
# the file, which would not fit if it were held.
PEAK_GOAL = 160 * MiB


def ferry_peak(server: S3Server, *args: str) -> int:
    command = [
        sys.executable,
        "-c",
        FERRY_REPORTING_PEAK,
        "copy",
        *args,
        "--endpoint-url",
        server.url,
        "--quiet",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return int(done.stderr.rsplit("VmHWM:", 1)[1].split()[0]) * 1024  # kB


def digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(8 * MiB):
            sha.update(block)
    return sha.hexdigest()


def test_a_file_larger_than_the_memory_limit_goes_up_and_down_within_it(
    minio: S3Server, tmp_path: Path
) -> None:
    bucket = minio.bucket("memory")
    source = tmp_path / "large.bin"
    block = os.urandom(MiB)
    with open(source, "wb") as file:
        for n in range(SIZE // MiB):
            file.write(n.to_bytes(8, "big") + block[8:])

    up = ferry_peak(minio, str(source), f"s3://{bucket}/large.bin", "--memory-limit", "48MiB")
    down = ferry_peak(
        minio, f"s3://{bucket}/large.bin", str(tmp_path / "back") + "/", "--memory-limit", "48MiB"
    )

    print(f"peak RSS: upload {up / MiB:.0f} MiB, download {down / MiB:.0f} MiB")
    assert up <= PEAK_GOAL, f"upload peak RSS {up / MiB:.0f} MiB"
    assert down <= PEAK_GOAL, f"download peak RSS {down / MiB:.0f} MiB"
    assert digest(tmp_path / "back" / "large.bin") == digest(source)
