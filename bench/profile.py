"""`make profile`: where Ferry's client CPU goes when copying many small objects.

Starts versitygw on 127.0.0.1, writes N objects, runs `ferry copy` under `py-spy record
--gil` (CPU while holding the GIL, all threads), and splits the samples into start-up,
botocore requests, listings and Ferry's own code. Separate from `make bench`: py-spy slows the
process it samples, so these are shares, not timings.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
from botocore.config import Config

from bench.servers import ACCESS_KEY, SECRET_KEY, make_server

REPO = Path(__file__).resolve().parents[1]
RATE = 250  # samples per second

CATEGORIES = (
    ("start-up: imports, sessions, clients", ("_find_and_load", "create_client", "make_client")),
    ("listings (source and destination)", ("next_window", "list_objects", "plan_pairs")),
)


def category(stack: str) -> str:
    for name, markers in CATEGORIES:
        if any(marker in stack for marker in markers):
            return name
    if "Copier.copy (" in stack:
        if "_make_api_call" in stack:
            return "per object: botocore requests"
        if "lean_s3.py" in stack:
            return "per object: lean requests (ferry/s3/lean_s3.py)"
        return "per object: Ferry's own code"
    return "other: threads, results, the report"


def leaves(raw: Path) -> collections.Counter[str]:
    """Samples per innermost frame (the function itself running, without its callees), to
    name what inside a category costs the CPU."""
    counts = collections.Counter[str]()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack.strip():
            counts[stack.rsplit(";", 1)[-1].strip()] += int(count)
    return counts


def split(raw: Path) -> tuple[int, collections.Counter[str]]:
    """Samples per category from py-spy's raw (collapsed) output; idle samples are dropped."""
    total, shares = 0, collections.Counter[str]()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack.strip():
            continue
        total += int(count)
        shares[category(stack)] += int(count)
    return total, shares


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--versitygw", required=True)
    p.add_argument("--py-spy", required=True)
    p.add_argument("--objects", type=int, default=1500)
    p.add_argument("--modes", default="server-side,stream")
    args = p.parse_args()

    server = make_server("versitygw", args.versitygw, "profile")
    server.start()
    try:
        client = boto3.client(
            "s3",
            endpoint_url=server.url,
            region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            config=Config(s3={"addressing_style": "path"}),
        )
        client.create_bucket(Bucket="profile-src")
        client.create_bucket(Bucket="profile-dst")
        body = os.urandom(500_000)
        with ThreadPoolExecutor(16) as pool:
            list(
                pool.map(
                    lambda n: client.put_object(Bucket="profile-src", Key=f"p/{n:05d}", Body=body),
                    range(args.objects),
                )
            )
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
        out = Path(tempfile.mkdtemp(prefix="ferry-profile-"))
        for mode in args.modes.split(","):
            raw = out / f"{mode}.txt"
            command = [args.py_spy, "record", "--gil", "--rate", str(RATE), "--format", "raw", "-o", str(raw)]
            command += ["--", sys.executable, "-m", "ferry.cli", "copy", "s3://profile-src/p/"]
            command += [f"s3://profile-dst/{mode}/", "--endpoint-url", server.url, "--region", "us-east-1"]
            command += ["--mode", mode]
            subprocess.run(command, env=env, check=True, capture_output=True)
            total, shares = split(raw)
            print(f"ferry copy --mode {mode}, {args.objects} objects of 500 KB on versitygw:")
            print(f"  {total} samples at {RATE} Hz = {total / RATE:.2f} s of CPU holding the GIL")
            for name, count in shares.most_common():
                print(f"  {100 * count / total:5.1f}%  {count / RATE:5.2f} s  {name}")
            print("  functions by their own samples (callees excluded), the top 12:")
            for name, count in leaves(raw).most_common(12):
                print(f"  {100 * count / total:5.1f}%  {name}")
        shutil.rmtree(out, ignore_errors=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
