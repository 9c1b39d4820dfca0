"""Read one manifest through the pipeline's ItemReader and ItemBatcher (what `ferry run` does
before any copy), count the items and batches, and print them as JSON with the process's RSS
before reading. `make load` runs it in a process of its own and samples that process's RSS,
so the figure is the reader's alone: nothing is copied, the objects need not exist.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from bench.load_stats import proc_memory
from bench.servers import REGION
from ferry.models import Endpoint
from ferry.pipeline.item_reader import batches, read_items
from ferry.pipeline.local_run import local_settings
from ferry.s3.clients import make_client


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--endpoint-url", required=True)
    p.add_argument("--bucket", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--format", choices=["csv", "jsonl"], required=True)
    args = p.parse_args()
    s3 = make_client(Endpoint(endpoint_url=args.endpoint_url, region=REGION))
    defaults = local_settings(memory_limit=256 * 2**20)  # the batch limits `ferry run` uses
    job = {"reader": args.format, "manifest": {"bucket": args.bucket, "key": args.key}}
    batch_input = {"job": {"job_id": "load-reader", "limits": {"large_object_concurrency": 4}}}
    memory = proc_memory(os.getpid()) or (0, 0)
    started = time.monotonic()
    items = count = 0
    for chunk in batches(
        read_items(s3, job),
        max_items=defaults.max_items_per_batch,
        max_bytes=defaults.max_input_bytes_per_batch,
        batch_input=batch_input,
    ):
        items += len(chunk)
        count += 1
    print(
        json.dumps(
            {"items": items, "batches": count, "seconds": time.monotonic() - started, "rss_before": memory[0]}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
