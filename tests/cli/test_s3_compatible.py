"""`ferry copy` on each real S3-compatible server in the suite, as a new user runs it.

Every test here takes `s3_compatible` (conftest.py): versitygw, MinIO and Garage in turn.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import S3Server

FERRY = str(Path(sys.executable).with_name("ferry"))


def ferry(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FERRY, *args], capture_output=True, text=True, timeout=600, env=env)


def error_lines(run: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in run.stderr.splitlines() if line.startswith("ferry: error")]


# A wrong secret key and an access key id the server does not know. The bucket check's
# HeadBucket answers a bare 403 (or, on versitygw, a bare 404) to both: only a request whose
# error has a body says which it is.
WRONG_CREDENTIALS = {
    "wrong-secret-key": ({"AWS_SECRET_ACCESS_KEY": "not-the-secret-key"}, "secret key"),
    "unknown-access-key-id": ({"AWS_ACCESS_KEY_ID": "FERRYNOSUCHKEYID"}, "access key id"),
}


@pytest.mark.parametrize("wrong", list(WRONG_CREDENTIALS))
def test_wrong_credentials_are_named_not_a_missing_permission(s3_compatible: S3Server, wrong: str) -> None:
    server = s3_compatible
    src, dst = server.bucket("src"), server.bucket("dst")
    server.client.put_object(Bucket=src, Key="a.txt", Body=b"a")
    override, named = WRONG_CREDENTIALS[wrong]

    run = ferry(
        "copy",
        f"s3://{src}",
        f"s3://{dst}",
        "--endpoint-url",
        server.url,
        "--region",
        server.region,
        env={**os.environ, **override},
    )

    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    (line,) = error_lines(run)
    assert "source credentials" in line and named in line, line
    assert "grant" not in line and "does not exist" not in line, line
    assert server.keys(dst) == []


def test_a_missing_bucket_is_still_named_missing_after_the_listing_is_asked(s3_compatible: S3Server) -> None:
    server = s3_compatible
    dst = server.bucket("dst")
    run = ferry(
        "copy",
        "s3://no-such-bucket-ferry",
        f"s3://{dst}",
        "--endpoint-url",
        server.url,
        "--region",
        server.region,
    )
    assert run.returncode == 1
    (line,) = error_lines(run)
    assert "source bucket 'no-such-bucket-ferry' does not exist" in line, line
