"""`ferry copy --mode stream` at its defaults stays within 256 MiB of resident memory whatever
the source's part layout (issue 14, case 3). A source in 16 MiB parts is streamed in its own
parts, so that its ETag and checksums can be proved; before the default memory limit counted
the process's own memory, 16 such parts in flight took the whole 256 MiB budget and the
process peaked at about 330 MiB.

Measured as the kernel keeps it: the `ferry` process's own peak resident set (VmHWM, read by
the process as it exits), the whole process with its imports and its S3 clients, on MinIO
(which answers the source's part layout). Not `ru_maxrss` from `os.wait4`: a forked child's
starts at its parent's resident set (Linux keeps the high-water mark across fork and exec),
so it would report pytest's own memory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from boto3.s3.transfer import TransferConfig

MiB = 1024 * 1024
# `ferry`'s console script, reporting the process's peak resident set on stderr as it exits.
FERRY_REPORTING_PEAK = (
    "import atexit, sys\n"
    "def peak():\n"
    "    with open('/proc/self/status') as status:\n"
    "        sys.stderr.write(next(line for line in status if line.startswith('VmHWM:')))\n"
    "atexit.register(peak)\n"
    "from ferry.cli.main import main\n"
    "sys.exit(main())\n"
)
PEAK_RSS_GOAL = 256 * MiB


@pytest.fixture
def source_in_16_mib_parts(minio) -> tuple[str, str]:
    """A 512 MiB object in 32 parts of 16 MiB: more parts than the default 16 in flight, so the
    memory budget, not the object, is what bounds them."""
    client = minio.client
    src, dst = minio.bucket("rss-src"), minio.bucket("rss-dst")
    part = 16 * MiB
    config = TransferConfig(multipart_threshold=part, multipart_chunksize=part, max_concurrency=4)
    body = _Repeating(os.urandom(MiB), 512)
    client.upload_fileobj(body, src, "large", Config=config)
    return src, dst


class _Repeating:
    """A readable of `count` copies of `block`, so the test process never holds the object."""

    def __init__(self, block: bytes, count: int) -> None:
        self._block, self._left, self._offset = block, count * len(block), 0

    def read(self, n: int = -1) -> bytes:
        n = self._left if n < 0 else min(n, self._left)
        out = bytearray()
        while len(out) < n:
            start = self._offset % len(self._block)
            chunk = self._block[start : start + n - len(out)]
            out += chunk
            self._offset += len(chunk)
        self._left -= n
        return bytes(out)


def test_a_source_in_16_mib_parts_streams_within_256_mib_at_the_defaults(
    minio, source_in_16_mib_parts, tmp_path: Path
) -> None:
    src, dst = source_in_16_mib_parts
    command = [sys.executable, "-c", FERRY_REPORTING_PEAK, "copy", f"s3://{src}/large", f"s3://{dst}/large"]
    command += ["--endpoint-url", minio.url, "--mode", "stream", "--json", "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    peak = int(done.stderr.rsplit("VmHWM:", 1)[1].split()[0]) * 1024  # kB
    print(f"peak RSS {peak / MiB:.0f} MiB")

    head = minio.client.head_object(Bucket=dst, Key="large")
    assert head["ContentLength"] == 512 * MiB
    assert head["ETag"].endswith('-32"'), "the copy keeps the source's 16 MiB parts"
    assert peak <= PEAK_RSS_GOAL, f"peak RSS {peak / MiB:.0f} MiB, over {PEAK_RSS_GOAL // MiB} MiB"
