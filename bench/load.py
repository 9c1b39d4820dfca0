"""`make load`: 100,000 small objects through `ferry copy` and through `ferry run` (the
pipeline's code on this machine, SQLite ledger) against a local S3 server, and a million-key
manifest through the pipeline's manifest reader; memory and throughput sampled every second.

What it shows: memory stays flat (no per-object state kept for the whole job), objects/s per
minute stays steady from first to last minute, and the counts add up (copied + skipped +
failed == objects; the destination lists exactly the source's objects and bytes). Writes
bench/results/load.md and load.json. Run as `python -m bench.load` from the repository root
(the Makefile does); `--objects 5000` for a quick look.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import data, measure
from .load_stats import (
    Point,
    ReportLines,
    Trace,
    child_pid,
    ledger_done,
    mib,
    per_minute,
    proc_memory,
    rss_at,
    steadiness,
)
from .run import git_commit, machine
from .servers import MinIO, Server, Versitygw
from .tools import base_env

REPO = Path(__file__).resolve().parents[1]
PREFIX = "load/"
FRACTIONS = (0.1, 0.5, 0.9)


def log(message: str) -> None:
    print(f"[load {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def key_of(index: int) -> str:
    """Keys in folders of 1,000 (as real data is laid out; a posix server lists them faster)."""
    return f"{PREFIX}{index // 1000:04d}/obj-{index:07d}"


def size_of(index: int, low: int, high: int) -> int:
    """A fixed pseudo-random size per key, so a re-seed is identical."""
    return random.Random(index).randint(low, high)


def seed(s3: Any, count: int, low: int, high: int, threads: int = 32) -> tuple[int, int]:
    """PUT `count` objects of `low`..`high` random bytes (real PUTs, so the server stores
    them with its ETags and checksums as for any client); skipped when already there.
    Returns (objects, bytes) in the source."""
    have = data.count(s3, data.SRC_BUCKET, PREFIX)
    expected = sum(size_of(i, low, high) for i in range(count))
    if have == (count, expected):
        log(f"source already holds {count} objects")
        return have
    data.empty(s3, data.SRC_BUCKET, PREFIX)
    block = os.urandom(high)
    started = time.monotonic()

    def put(index: int) -> None:
        body = index.to_bytes(8, "big") + block[8 : size_of(index, low, high)]
        s3.put_object(Bucket=data.SRC_BUCKET, Key=key_of(index), Body=body)
        if index and index % 10_000 == 0:
            log(f"seeded {index} objects ({index / (time.monotonic() - started):.0f}/s)")

    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(put, range(count)):
            pass
    return data.count(s3, data.SRC_BUCKET, PREFIX)


@dataclass
class PathResult:
    """One path's run: command, exit code, counts, memory and throughput."""

    name: str
    command: str
    exit_code: int = 0
    seconds: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)
    listed: tuple[int, int] = (0, 0)
    checks: dict[str, bool] = field(default_factory=dict)
    peak_rss: int = 0
    rss_at: dict[str, int | None] = field(default_factory=dict)
    minutes: list[dict[str, float]] = field(default_factory=list)
    steadiness: float | None = None
    load_before: str = ""
    load_after: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and all(self.checks.values()) and not self.error


def uptime() -> str:
    try:
        return "load average " + ", ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "load average unknown"


def sampled(
    argv: list[str], env: dict[str, str], progress: Callable[[], int], interval: float = 1.0
) -> tuple[int, str, str, Trace, float]:
    """Run `argv` under GNU time (the kernel's peak RSS of the tool itself), sampling the
    tool's RSS and `progress()` every `interval` seconds. Returns exit code, stdout, stderr
    tail, the trace and wall seconds."""
    trace = Trace()
    timed = measure.time_available()
    rss_file = Path(tempfile.mkstemp(prefix="load-rss-")[1])
    command = [measure.GNU_TIME, "-f", "%M", "-o", str(rss_file), "--", *argv] if timed else argv
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env, start_new_session=True)
        stop = threading.Event()

        def sample() -> None:
            pid = None
            last = 0
            while not stop.is_set():
                pid = pid or (child_pid(process.pid) if timed else process.pid)
                memory = proc_memory(pid) if pid else None
                done = progress()
                last = done if done >= 0 else last
                if memory:
                    trace.points.append(Point(time.monotonic() - started, memory[0], memory[1], last))
                stop.wait(interval)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        code = process.wait()
        wall = time.monotonic() - started
        stop.set()
        sampler.join()
        done = progress()
        if trace.points and done >= 0:  # the objects settled in the last second count too
            trace.points.append(Point(wall, 0, 0, done))
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")[-measure.TAIL :]
    if timed:
        with contextlib.suppress(OSError, ValueError):
            lines = [line for line in rss_file.read_text().split() if line.isdigit()]
            trace.final_peak = int(lines[-1]) * 1024 if lines else 0
    rss_file.unlink(missing_ok=True)
    return code, stdout, stderr, trace, wall


def summarise(result: PathResult, trace: Trace, total: int, period: float) -> None:
    """Peak RSS, RSS at 10/50/90 % of the objects, objects/s per minute and its steadiness."""
    result.peak_rss = trace.peak_rss
    result.rss_at = {f"{int(f * 100)}%": rss_at(trace.points, total, f) for f in FRACTIONS}
    minutes = per_minute(trace.points, period)
    result.minutes = [
        {
            "minute": i + 1,
            "seconds": round(m.seconds, 1),
            "objects": m.objects,
            "per_second": round(m.rate, 1),
        }
        for i, m in enumerate(minutes)
    ]
    result.steadiness = steadiness(minutes, period)


def check_counts(result: PathResult, s3: Any, dest_prefix: str, source: tuple[int, int]) -> None:
    """copied + skipped + failed == objects, none failed, and the destination lists exactly
    as many objects and bytes as the source."""
    s = result.summary
    settled = int(s.get("copied", 0)) + int(s.get("skipped", 0)) + int(s.get("failed", 0))
    result.listed = data.count(s3, data.DST_BUCKET, dest_prefix)
    result.checks = {
        "copied+skipped+failed == objects": settled == source[0],
        "none failed or pending": not s.get("failed") and not s.get("pending"),
        "destination lists the source's objects and bytes": result.listed == source,
    }


def last_json(stdout: str) -> dict[str, Any]:
    for line in reversed(stdout.strip().splitlines()):
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                return value
    return {}


def run_copy(
    ferry: str,
    server: Server,
    env: dict[str, str],
    s3: Any,
    work: Path,
    source: tuple[int, int],
    period: float,
) -> PathResult:
    dest = "load-copy/"
    data.empty(s3, data.DST_BUCKET, dest)
    report = work / "copy-report.jsonl"
    argv = [ferry, "copy", f"s3://{data.SRC_BUCKET}/{PREFIX}", f"s3://{data.DST_BUCKET}/{dest}"]
    argv += ["--endpoint-url", server.url, "--report", str(report), "--json", "--quiet"]
    result = PathResult("ferry copy", shown(argv, server, work))
    result.load_before = uptime()
    code, stdout, stderr, trace, wall = sampled(argv, env, ReportLines(report))
    result.load_after = uptime()
    result.exit_code, result.seconds, result.summary = code, wall, last_json(stdout)
    if code:
        result.error = stderr
    summarise(result, trace, source[0], period)
    check_counts(result, s3, dest, source)
    report.unlink(missing_ok=True)
    return result


def run_pipeline(
    ferry: str,
    server: Server,
    env: dict[str, str],
    s3: Any,
    work: Path,
    source: tuple[int, int],
    period: float,
) -> PathResult:
    dest = "load-run/"
    data.empty(s3, data.DST_BUCKET, dest)
    job_id = time.strftime("load-%Y%m%d-%H%M%S")
    spec = work / "job.json"
    spec.write_text(
        json.dumps(
            {
                "job_id": job_id,
                "source": {"bucket": data.SRC_BUCKET, "prefix": PREFIX},
                "destination": {"bucket": data.DST_BUCKET, "prefix": dest},
            }
        )
    )
    ledger = work / "ledger.sqlite"
    argv = [ferry, "run", str(spec), "--endpoint-url", server.url, "--ledger", str(ledger)]
    argv += ["--report-dir", str(work / "reports"), "--json", "--quiet"]
    result = PathResult("ferry run (local pipeline, SQLite ledger)", shown(argv, server, work))
    result.load_before = uptime()
    code, stdout, stderr, trace, wall = sampled(argv, env, lambda: ledger_done(ledger, job_id))
    result.load_after = uptime()
    result.exit_code, result.seconds, result.summary = code, wall, last_json(stdout)
    if code:
        result.error = stderr
    summarise(result, trace, source[0], period)
    check_counts(result, s3, dest, source)
    result.checks["the ledger counts every object"] = ledger_done(ledger, job_id) == source[0]
    return result


def shown(argv: list[str], server: Server, work: Path) -> str:
    text = " ".join(argv).replace(str(REPO) + "/", "").replace(server.url, "$ENDPOINT")
    return text.replace(str(work), "WORK")


# -- the manifest reader ------------------------------------------------------------------------


def write_manifest(path: Path, keys: int, fmt: str) -> int:
    """A manifest of `keys` keys (objects need not exist: the reader alone is measured)."""
    with open(path, "w", encoding="utf-8", newline="") as file:
        if fmt == "csv":
            file.write("bucket,key\n")
            for i in range(keys):
                file.write(f"{data.SRC_BUCKET},{key_of(i)}\n")
        else:
            for i in range(keys):
                file.write(json.dumps({"bucket": data.SRC_BUCKET, "key": key_of(i)}) + "\n")
    return path.stat().st_size


def read_manifests(
    server: Server, env: dict[str, str], s3: Any, work: Path, sizes: list[int]
) -> list[dict[str, Any]]:
    """Each manifest uploaded to the server, then read by `python -m bench.load_reader` (the
    pipeline's ItemReader and ItemBatcher, as `ferry run` reads a manifest), its RSS sampled."""
    rows = []
    for fmt in ("jsonl", "csv"):
        for keys in sizes:
            path = work / f"manifest-{keys}.{fmt}"
            size = write_manifest(path, keys, fmt)
            key = f"manifests/{path.name}"
            s3.upload_file(str(path), data.SRC_BUCKET, key)
            path.unlink()
            argv = [sys.executable, "-m", "bench.load_reader", "--endpoint-url", server.url]
            argv += ["--bucket", data.SRC_BUCKET, "--key", key, "--format", fmt]
            code, stdout, stderr, trace, wall = sampled(
                argv, dict(env, PYTHONPATH=str(REPO)), lambda: 0, 0.25
            )
            said = last_json(stdout)
            row = {
                "format": fmt,
                "keys": keys,
                "manifest_bytes": size,
                "items_read": said.get("items"),
                "batches": said.get("batches"),
                "seconds": round(wall, 1),
                "rss_before_reading": said.get("rss_before"),
                "peak_rss": trace.peak_rss,
                "ok": code == 0 and said.get("items") == keys,
                "error": "" if code == 0 else stderr,
            }
            log(
                f"manifest {fmt} {keys} keys: peak {mib(trace.peak_rss)}, {wall:.1f} s, {'ok' if row['ok'] else 'FAILED ' + row['error']}"
            )
            rows.append(row)
            s3.delete_object(Bucket=data.SRC_BUCKET, Key=key)
    return rows


# -- the page -----------------------------------------------------------------------------------


def render(page: dict[str, Any]) -> str:
    lines = [
        "# Load: many small objects through `ferry copy` and `ferry run`",
        "",
        f"`{page['argv']}` on {page['date']}, commit {page['commit']}, against {page['server']}.",
        page["machine"],
        f"Source: {page['objects']:,} objects of {page['object_sizes']} ({page['source_bytes'] / 2**20:.0f} MiB), "
        f"keys in folders of 1,000. Memory is the tool process's own (VmRSS sampled every second; peak by the kernel).",
        f"The machine is shared: {page.get('load_at_start', 'load average unknown')} (1, 5, 15 minutes) when "
        "the load began, and before → after each path below; on a busy machine throughput per minute "
        "follows the other work, not only Ferry.",
        "",
        "| path | result | objects | wall | peak RSS | RSS at 10% / 50% / 90% | objects/s (whole run) | slowest/fastest full minute | load before → after |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in page["paths"]:
        s = r["summary"]
        at = " / ".join(mib(r["rss_at"].get(f"{int(f * 100)}%")) for f in FRACTIONS)
        result = "ok" if r["ok"] else "FAILED"
        counts = f"{s.get('copied', 0):,} copied, {s.get('skipped', 0)} skipped, {s.get('failed', 0)} failed"
        steady = "n/a (under 2 full minutes)" if r["steadiness"] is None else f"{r['steadiness']:.2f}"
        rate = page["objects"] / r["seconds"] if r["seconds"] else 0
        lines.append(
            f"| {r['name']} | {result} | {counts} | {r['seconds']:.0f} s | {mib(r['peak_rss'])} | {at} | "
            f"{rate:.0f} | {steady} | {r['load_before'].removeprefix('load average ')} → "
            f"{r['load_after'].removeprefix('load average ')} |"
        )
    lines += ["", "Objects/s in each minute from the process's start (the last minute is partial):", ""]
    for r in page["paths"]:
        per = ", ".join(f"{m['per_second']:.0f}" for m in r["minutes"])
        lines.append(f"- {r['name']}: {per}")
    lines += ["", "Checks:", ""]
    for r in page["paths"]:
        for name, passed in r["checks"].items():
            lines.append(f"- {r['name']}: {name}: {'yes' if passed else 'NO'}")
        lines.append(
            f"- {r['name']}: destination listed {r['listed'][0]:,} objects, {r['listed'][1]:,} bytes"
        )
        if r["error"]:
            lines.append(f"- {r['name']}: error: `{r['error'][-300:]}`")
    if page["manifests"]:
        lines += [
            "",
            "Manifests through the pipeline's reader (`ferry run`'s ItemReader and ItemBatcher, objects not copied):",
            "",
            "| format | keys | manifest | items read | batches | seconds | RSS after imports | peak RSS |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for m in page["manifests"]:
            lines.append(
                f"| {m['format']} | {m['keys']:,} | {m['manifest_bytes'] / 2**20:.0f} MiB | {m['items_read']} | "
                f"{m['batches']} | {m['seconds']} | {mib(m['rss_before_reading'])} | {mib(m['peak_rss'])} |"
            )
    lines += ["", "Commands:", ""]
    lines += [f"- `{r['command']}`" for r in page["paths"]]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="load", description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=100_000)
    p.add_argument("--min-size", type=int, default=1024)
    p.add_argument("--max-size", type=int, default=4096)
    p.add_argument("--paths", default="copy,run", help="comma-separated: copy, run")
    p.add_argument("--manifest-keys", default="100000,1000000", help="comma-separated; empty for none")
    p.add_argument("--server", choices=["versitygw", "minio"], default="versitygw")
    p.add_argument("--versitygw", default=os.environ.get("BENCH_VERSITYGW"))
    p.add_argument("--minio", default=os.environ.get("BENCH_MINIO"))
    p.add_argument("--data-dir", help="keep the server's data here between runs (no re-seed)")
    p.add_argument("--period", type=float, default=60.0, help="seconds per throughput bucket (default 60)")
    p.add_argument("--ferry", default=str(Path(sys.executable).parent / "ferry"))
    p.add_argument("--output", default=str(REPO / "bench" / "results" / "load.md"))
    p.add_argument("--argv", default="make load")
    return p.parse_args(argv)


def start_server(args: argparse.Namespace) -> Server:
    binary = args.versitygw if args.server == "versitygw" else args.minio
    if not binary or not Path(binary).exists():
        raise SystemExit(f"load: no {args.server} binary (give --{args.server} PATH)")
    kind = Versitygw if args.server == "versitygw" else MinIO
    server = kind(name=args.server, binary=binary, pinned=Path(binary).name.split("-", 1)[-1])
    if args.data_dir:
        shutil.rmtree(server.root, ignore_errors=True)
        server.root = Path(args.data_dir)
    server.start()
    return server


def stop_server(server: Server, keep: bool) -> None:
    if not keep:
        server.stop()
    elif server.process and server.process.poll() is None:
        server.process.terminate()
        server.process.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args = parse_args(argv)
    server = start_server(args)
    work = Path(tempfile.mkdtemp(prefix="ferry-load-"))
    page: dict[str, Any] = {
        "argv": args.argv,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "server": server.version(),
        "machine": machine()[0],
        "objects": args.objects,
        "object_sizes": f"{args.min_size}-{args.max_size} bytes",
        "paths": [],
        "manifests": [],
    }
    output = Path(args.output)

    def write() -> None:  # after each part, so a run cut short still leaves what it measured
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(render(page))
        output.with_suffix(".json").write_text(json.dumps(page, indent=2) + "\n")

    try:
        log(f"{server.name} on {server.url}, data in {server.data_dir}")
        s3 = data.client(server.url, pool=64)
        data.make_buckets(s3)
        env = base_env(work)
        source = seed(s3, args.objects, args.min_size, args.max_size)
        page["source_bytes"] = source[1]
        page["load_at_start"] = uptime()
        runners = {"copy": run_copy, "run": run_pipeline}
        for name in [p for p in args.paths.split(",") if p]:
            log(f"{name}: {args.objects} objects ({uptime()})")
            result = runners[name](args.ferry, server, env, s3, work, source, args.period)
            log(
                f"{name}: {'ok' if result.ok else 'FAILED'} in {result.seconds:.0f} s, peak {mib(result.peak_rss)}, "
                f"per minute {[m['per_second'] for m in result.minutes]} {result.error}"
            )
            page["paths"].append(asdict(result) | {"ok": result.ok})
            write()
        sizes = [int(k) for k in args.manifest_keys.split(",") if k.strip()]
        page["manifests"] = read_manifests(server, env, s3, work, sizes) if sizes else []
    finally:
        stop_server(server, keep=bool(args.data_dir))
        shutil.rmtree(work, ignore_errors=True)
    write()
    log(f"wrote {output} and {output.with_suffix('.json')}")
    ok = all(p["ok"] for p in page["paths"]) and all(m["ok"] for m in page["manifests"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
