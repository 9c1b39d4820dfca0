"""`make bench-lean`: client CPU per 1,000 server-side copies of small objects, lean request
path against botocore alone, side by side on local MinIO and versitygw.

Each run is a fresh `ferry copy --mode server-side` process; its CPU (user + system, all
threads) comes from the kernel's accounting of the finished child (getrusage), so time spent
waiting on the server or on other processes is not counted: on a shared machine CPU time is
a steadier measure than wall time. Runs alternate lean / botocore so that both see the same
load; the median of the repeats is reported, with start-up (a copy of an empty prefix:
imports, sessions, clients) shown apart.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config

from bench.servers import ACCESS_KEY, SECRET_KEY, make_server

PATHS = {"lean": [], "botocore": ["--no-lean-requests"]}


def child_cpu(command: list[str], env: dict[str, str]) -> float:
    """User + system CPU seconds of one child process, from the kernel's accounting."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, env=env, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(name: str, binary: str, objects: int, repeats: int, size: int) -> dict[str, list[float]]:
    server = make_server(name, binary, "lean-cpu")
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
        for bucket in ("lean-src", "lean-dst", "lean-empty"):
            client.create_bucket(Bucket=bucket)
        body = os.urandom(size)
        with ThreadPoolExecutor(16) as pool:
            list(
                pool.map(
                    lambda n: client.put_object(Bucket="lean-src", Key=f"p/{n:05d}", Body=body),
                    range(objects),
                )
            )
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
        env.pop("FERRY_LEAN_REQUESTS", None)
        base = [
            sys.executable,
            "-m",
            "ferry.cli",
            "copy",
            "--endpoint-url",
            server.url,
            "--region",
            "us-east-1",
        ]
        base += ["--mode", "server-side"]
        cpu: dict[str, list[float]] = {
            f"{path} {what}": [] for path in PATHS for what in ("copy", "start-up")
        }
        for run in range(repeats):
            for path, flags in PATHS.items():
                dest = f"s3://lean-dst/{path}-{run}/"
                cpu[f"{path} copy"].append(child_cpu([*base, "s3://lean-src/p/", dest, *flags], env))
                empty = [*base, "s3://lean-empty/none/", f"s3://lean-dst/empty-{path}-{run}/", *flags]
                cpu[f"{path} start-up"].append(child_cpu(empty, env))
        return cpu
    finally:
        server.stop()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minio", required=True)
    p.add_argument("--versitygw", required=True)
    p.add_argument("--objects", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--size", type=int, default=500_000)
    args = p.parse_args()
    print(
        f"client CPU (s) per 1,000 server-side copies of {args.size:,}-byte objects, median of {args.repeats}"
    )
    print("| server | path | CPU per 1,000 | of which start-up | per object, start-up excluded (ms) |")
    print("|---|---|---|---|---|")
    for name, binary in (("minio", args.minio), ("versitygw", args.versitygw)):
        cpu = measure(name, binary, args.objects, args.repeats, args.size)
        for path in PATHS:
            total = statistics.median(cpu[f"{path} copy"]) * 1000 / args.objects
            startup = statistics.median(cpu[f"{path} start-up"])
            per_object = (statistics.median(cpu[f"{path} copy"]) - startup) / args.objects * 1000
            print(f"| {name} | {path} | {total:.2f} | {startup:.2f} | {per_object:.2f} |")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
