"""`make bench-worker-cost`: what one CopyBatch worker costs per small object, measured.

Starts versitygw and MinIO on 127.0.0.1, writes N small objects, and runs the pipeline's own
code over them as Step Functions would: Prepare (jobs.prepare), the Map's item shape and
ItemBatcher (item_reader.listing_items + item_reader.batches at the pipeline's default batch
limits), then one CopyBatch pass per batch (batches.copy_batch, the function the Lambda
handler calls) with the batch report written to S3 (JobReports, as on AWS). The copier runs
at the thread count it picks for small objects on a 2-CPU machine (engine.strategies.copier
default_concurrency), which is what it picks in the Lambda.

What it measures is the worker process's CPU seconds per object (time.process_time(), all
threads): the servers run on the same cores, and the machine is shared, so wall time says
little here; CPU time is what the process itself spent. The ledger is SQLite (no DynamoDB
offline): its three DynamoDB requests per pass on AWS are a few milliseconds per pass, i.e.
microseconds per object at these batch sizes.

Lambda bills duration x memory. A worker whose threads hide S3's latency is CPU-bound, and a
Python process holding the GIL uses at most one vCPU: Lambda gives one vCPU at 1,769 MB and
proportionally less below (aws-limits.md), so

    GB-seconds per object = CPU seconds per object / min(1, memory_mb / 1769) x memory_mb / 1024

and $/million = GB-seconds x 1e6 x the arm64 price per GB-second (ferry.costs.prices). Copies stay
CPU-bound while (threads / S3's latency per CopyObject) >= objects/s the CPU allows; the
latency on AWS is not measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from bench.servers import ACCESS_KEY, REGION, SECRET_KEY, Server, make_server
from ferry.costs import prices
from ferry.engine.strategies import copier as engine_copier
from ferry.engine.strategies.copier import default_concurrency
from ferry.limits import MiB
from ferry.models import Endpoint
from ferry.pipeline import batches as pipeline_batches
from ferry.pipeline import services as pipeline_services
from ferry.pipeline.batches import copy_batch
from ferry.pipeline.item_reader import batches, listing_items
from ferry.pipeline.job_reports import JobReports
from ferry.pipeline.jobs import prepare
from ferry.pipeline.ledger.sqlite import SQLiteLedger
from ferry.pipeline.local_run import local_settings
from ferry.pipeline.services import Services
from ferry.pipeline.settings import PipelineSettings
from ferry.s3.clients import make_client

REPO = Path(__file__).resolve().parents[1]
ONE_VCPU_MB = 1769  # Lambda: one full vCPU at 1,769 MB, proportionally less below (aws-limits.md)
RESULTS = REPO / "bench" / "results"
# `ferry copy`'s CPU ms per object on an idle machine: bench/results/latest.md, case 1 (2,000
# objects of 500 KB, server-side, default settings, median of 3), measured 2026-11-26. The
# `ferry copy` run beside the passes tells how much this machine's load inflates CPU time now;
# the passes' CPU is scaled by the same factor for an idle-machine figure.
_COUNT_LOCK = threading.Lock()
IDLE_CLI_CPU_MS = {"minio": 0.45, "versitygw": 0.46}


@dataclass
class Measured:
    server: str
    objects: int
    object_bytes: int
    batches: int
    items_per_batch: int
    threads: int
    runs: int
    cpu_seconds: float
    wall_seconds: float
    requests: dict[str, int]  # S3 requests the passes sent, by operation
    cli_cpu_seconds: float  # `ferry copy` of the same objects once, beside it (a reference)
    load_average: float  # the machine's 1-minute load average when the passes ended

    @property
    def cpu_per_object(self) -> float:
        return self.cpu_seconds / (self.objects * self.runs)

    @property
    def requests_per_object(self) -> float:
        return sum(self.requests.values()) / (self.objects * self.runs)

    @property
    def load_factor(self) -> float:
        """How much slower, in CPU, `ferry copy` ran beside the passes than on an idle machine
        (1 at the least: a quieter machine than then is not credited)."""
        return max(1.0, self.cli_cpu_seconds / self.objects * 1000 / IDLE_CLI_CPU_MS[self.server])

    @property
    def idle_cpu_per_object(self) -> float:
        """`cpu_per_object` on an idle machine (divided by `load_factor`)."""
        return self.cpu_per_object / self.load_factor


def lambda_memory_mb() -> int:
    """The CopyBatch Lambda's memory, as the pipeline's defaults (cdk.json) set it."""
    return int(next(f.default for f in fields(PipelineSettings) if f.name == "lambda_memory_mb"))


def lambda_cost_per_million(cpu_per_object: float, memory_mb: int) -> tuple[float, float]:
    """(GB-seconds per object, $ per million objects) for a CPU-bound worker at `memory_mb`."""
    usable_vcpu = min(1.0, memory_mb / ONE_VCPU_MB)
    gb_seconds = cpu_per_object / usable_vcpu * memory_mb / 1024
    return gb_seconds, gb_seconds * 1e6 * prices.price("lambda_arm64_gb_second")


def count_requests(client: Any, requests: Counter[str]) -> Any:
    """Count each S3 request `client` sends, by operation."""

    def count(model: Any, **_: Any) -> None:
        with _COUNT_LOCK:  # 64 threads send requests at once
            requests[model.name] += 1

    client.meta.events.register("before-call.s3", count)
    return client


def measure(
    server: Server,
    objects: int,
    object_bytes: int,
    runs: int,
    max_items: int | None = None,
    max_bytes: int | None = None,
) -> Measured:
    """Copy the same N objects `runs` times (a fresh destination prefix each run, so every
    object is copied, none skipped), one CopyBatch pass per batch, and add up the CPU."""
    endpoint = Endpoint(endpoint_url=server.url, region=REGION)
    s3 = make_client(endpoint)
    for bucket in ("cost-src", "cost-dst", "cost-reports"):
        s3.create_bucket(Bucket=bucket)
    body = os.urandom(object_bytes)
    with ThreadPoolExecutor(16) as pool:
        list(
            pool.map(
                lambda n: s3.put_object(
                    Bucket="cost-src", Key=f"in/photos/2026/11/img_{n:07d}.jpg", Body=body
                ),
                range(objects),
            )
        )
    settings = local_settings(
        memory_limit=lambda_memory_mb() * MiB // 3,
        concurrency=1,
        max_items_per_batch=max_items,
        max_input_bytes_per_batch=max_bytes,
    )
    state = Path(tempfile.mkdtemp(prefix="ferry-worker-cost-"))
    services = Services(
        s3=s3,
        dynamodb=None,
        settings=settings,
        source=endpoint,
        destination=endpoint,
        ledger_store=SQLiteLedger(state / "ledger.sqlite"),
        report_store=JobReports(s3, "cost-reports"),
        destination_s3=s3,
        reads_any_region=True,  # as `ferry run`: the bucket is on a local server, not in a region
    )
    requests: Counter[str] = Counter()
    count_requests(s3, requests)  # the report's client; the copier's as they are made:
    originals = {
        module: module.make_client for module in (engine_copier, pipeline_batches, pipeline_services)
    }
    for module, made in originals.items():
        module.make_client = lambda *a, _made=made, **k: count_requests(_made(*a, **k), requests)  # type: ignore[attr-defined]
    try:
        return _passes(server, s3, endpoint, services, settings, runs, objects, object_bytes, requests)
    finally:
        for module, made in originals.items():
            module.make_client = made  # type: ignore[attr-defined]


def _passes(
    server: Server,
    s3: Any,
    endpoint: Endpoint,
    services: Services,
    settings: Any,
    runs: int,
    objects: int,
    object_bytes: int,
    requests: Counter[str],
) -> Measured:
    counted: Counter[str] = Counter()
    cpu = wall = 0.0
    chunks: list[list[Any]] = []
    for run in range(runs + 1):  # run 0 warms the process up (imports, first clients): not counted
        spec = {
            "source": {"bucket": "cost-src", "prefix": "in/"},
            "destination": {"bucket": "cost-dst", "prefix": f"run{run}/"},
        }
        job = prepare({"spec": spec, "execution_name": f"cost-{server.name}-{run}"}, services)
        batch_job = {"job_id": job["job_id"], "limits": {"large_object_concurrency": 2}}
        chunks = list(
            batches(
                listing_items(s3, "cost-src", "in/"),
                max_items=settings.max_items_per_batch,
                max_bytes=settings.max_input_bytes_per_batch,
                batch_input={"job": batch_job},
            )
        )
        for chunk in chunks if run else chunks[:1]:
            seen = Counter(requests)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            result = copy_batch({"job": batch_job, "items": chunk, "pass": 1}, services, 900_000)
            if run:
                cpu += time.process_time() - cpu0
                wall += time.perf_counter() - wall0
                counted.update(requests - seen)
            copied = result["counts"]["copied"]
            if copied != len(chunk) or result["remaining"]:
                raise RuntimeError(
                    f"{server.name}: a pass copied {copied} of {len(chunk)}: {result['counts']}"
                )
    load = os.getloadavg()[0]
    return Measured(
        server=server.name,
        objects=objects,
        object_bytes=object_bytes,
        batches=len(chunks),
        items_per_batch=max(len(c) for c in chunks),
        threads=default_concurrency([object_bytes]),
        runs=runs,
        cpu_seconds=cpu,
        wall_seconds=wall,
        requests=dict(counted),
        cli_cpu_seconds=cli_cpu(server),
        load_average=load,
    )


def cli_cpu(server: Server) -> float:
    """CPU seconds of `ferry copy` over the same objects (a process of its own, start-up
    included): the same engine without the pipeline, measured in the same conditions."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, "-m", "ferry.cli", "copy", "s3://cost-src/in/", "s3://cost-dst/cli/"]
        + ["--endpoint-url", server.url, "--region", REGION],
        check=True,
        capture_output=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def report(rows: list[Measured], memory_mb: int, argv: str) -> str:
    lines = [
        "# What one CopyBatch worker costs per small object (measured)",
        "",
        f"`{argv}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs shared with "
        "other work (the worker process's CPU time is robust to that, wall time is not; CPU time still "
        "grows on a loaded machine: compare with the `ferry copy` column, measured beside it).",
        "",
        "The pipeline's own code: Prepare, the Map's listing items and ItemBatcher at the default batch "
        "limits, then one `copy_batch` pass per batch (the Lambda handler's function, its S3 clients kept "
        "from pass to pass as in a Lambda container) with its report written to S3; SQLite stands in "
        "for DynamoDB. Server-side copies (CopyObject), skip-existing on (one destination listing per "
        "batch), tags kept.",
        "",
        "| server | objects x runs | object size | batches of | threads | S3 requests per object | "
        "CPU ms per object | `ferry copy` beside it, CPU ms per object (idle: latest.md) | load average | "
        f"idle-machine CPU ms per object | Lambda $ per million at {memory_mb} MB (as measured / idle) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        usd = lambda_cost_per_million(row.cpu_per_object, memory_mb)[1]
        usd_idle = lambda_cost_per_million(row.idle_cpu_per_object, memory_mb)[1]
        lines.append(
            f"| {row.server} | {row.objects:,} x {row.runs} | {row.object_bytes:,} B | "
            f"{row.items_per_batch} | {row.threads} | {row.requests_per_object:.2f} | "
            f"{row.cpu_per_object * 1000:.2f} | "
            f"{row.cli_cpu_seconds / row.objects * 1000:.2f} ({IDLE_CLI_CPU_MS[row.server]:.2f}) | "
            f"{row.load_average:.1f} | {row.idle_cpu_per_object * 1000:.2f} | ${usd:.3f} / ${usd_idle:.3f} |"
        )
    worst = max(row.cpu_per_object for row in rows)
    worst_idle = max(row.idle_cpu_per_object for row in rows)
    gb_s, usd = lambda_cost_per_million(worst, memory_mb)
    gb_s_idle, usd_idle = lambda_cost_per_million(worst_idle, memory_mb)
    lines += [
        "",
        f"The worse server as measured: {worst * 1000:.2f} ms of CPU per object, {gb_s:.5f} GB-s at "
        f"{memory_mb} MB: **${usd:.3f} per million objects** (arm64, "
        f"${prices.price('lambda_arm64_gb_second'):.10f} per GB-second). On an idle machine: "
        f"{worst_idle * 1000:.2f} ms, {gb_s_idle:.5f} GB-s: **${usd_idle:.3f} per million** if CPU-bound "
        "throughout (`ferry estimate` takes this CPU per object: functions/ferry/costs/inputs.py "
        "MEASURED_CPU_PER_SMALL_OBJECT).",
        "",
        "The idle-machine figure divides the passes' CPU by how much more CPU `ferry copy` took beside "
        "them than in bench/results/latest.md (case 1: the same 2,000 objects of 500 KB on the same "
        "servers, idle): the same engine sending the same requests, so the machine's load is taken to "
        "inflate both alike (an assumption, not a measurement). These servers echo no encryption in "
        "CopyObject's answer and hold no encrypted object: one probe per bucket learns that "
        "(engine/run/encryption_probe.py), and each copy is one CopyObject, as on AWS.",
        "",
        "How: GB-s per object = CPU s per object / min(1, memory / 1,769 MB) x memory in GB. One Python "
        "process holding the GIL uses at most one vCPU, which Lambda gives at 1,769 MB; below that it gets "
        "a share in proportion. The worker is CPU-bound while its threads / S3's CopyObject latency "
        "exceeds the objects/s its CPU allows (1 / CPU per object); S3's latency on AWS, TLS (the "
        "servers here speak plain HTTP) and DynamoDB's requests are not measured here.",
        "",
        "Raw figures (JSON):",
        "",
        "```",
        json.dumps([asdict(r) for r in rows], indent=1),
        "```",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minio", required=True)
    p.add_argument("--versitygw", required=True)
    p.add_argument("--objects", type=int, default=2000)
    p.add_argument("--object-bytes", type=int, default=500_000)  # as bench/results/latest.md case 1
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--max-items-per-batch", type=int, help="default: the pipeline's")
    p.add_argument("--max-input-bytes-per-batch", type=int, help="default: the pipeline's")
    p.add_argument("--out", default=str(RESULTS / "worker_cost.md"))
    args = p.parse_args()
    os.environ.update(
        AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_DEFAULT_REGION=REGION
    )
    rows = []
    for name, binary in (("versitygw", args.versitygw), ("minio", args.minio)):
        server = make_server(name, binary, "bench")
        server.start()
        try:
            rows.append(
                measure(
                    server,
                    args.objects,
                    args.object_bytes,
                    args.runs,
                    args.max_items_per_batch,
                    args.max_input_bytes_per_batch,
                )
            )
        finally:
            server.stop()
        print(json.dumps(asdict(rows[-1])), flush=True)
    memory_mb = lambda_memory_mb()
    argv = "make bench-worker-cost" + (
        f' WORKER_COST_ARGS="{" ".join(sys.argv[1:][4:])}"' if len(sys.argv) > 5 else ""
    )
    text = report(rows, memory_mb, argv)
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
