"""`make bench`: Ferry against s5cmd, rclone and the AWS CLI, side by side, on local S3 servers.

Every case runs every tool variant once per round, in an order that rotates from round to
round, for `--runs` rounds; the table gives the median and the spread. Run as
`python -m bench.run` from the repository root (the Makefile does).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

from . import data, measure
from .cases import BUILDERS, HUGE_KEY, LARGE_16_KEY, LARGE_KEY, SMALL_PREFIX, UPLOAD_FOLDER, Case, Settings
from .report import CaseResult, Page, ServerResult, render
from .servers import Server, make_server
from .stats import Row, Sample
from .tools import Binaries, Commands, base_env, rclone_env, versions

REPO = Path(__file__).resolve().parents[1]
GiB = 1024**3


def parse_size(text: str) -> int:
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    text = text.strip().lower().removesuffix("ib").removesuffix("b")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench", description=__doc__)
    p.add_argument(
        "--objects", type=int, help="small objects (default 2000; the seed measurement used 10000)"
    )
    p.add_argument("--object-size", type=int, default=500_000, help="bytes per small object (default 500 KB)")
    p.add_argument("--large-size", help="streamed large object (default 2GiB)")
    p.add_argument("--huge-size", help="server-side object above 5 GiB (default 5.5GiB)")
    p.add_argument("--runs", type=int, help="runs per variant (default 5)")
    p.add_argument("--equal", type=int, default=32, help="objects in flight for the equal-concurrency rows")
    p.add_argument("--quick", action="store_true", help="smoke test: 200 objects, 256 MiB, 2 runs")
    p.add_argument("--servers", default="minio,versitygw", help="comma-separated: minio, versitygw")
    p.add_argument(
        "--cases", default="1,2,3,4,6,7,8", help="comma-separated case numbers (5 is made from 1-4)"
    )
    p.add_argument("--tools", default="ferry,s5cmd,rclone,aws", help="comma-separated tools to include")
    p.add_argument("--minio", default=os.environ.get("BENCH_MINIO"))
    p.add_argument("--minio-version", default="")
    p.add_argument("--versitygw", default=os.environ.get("BENCH_VERSITYGW"))
    p.add_argument("--versitygw-version", default="")
    p.add_argument("--s5cmd", default=os.environ.get("BENCH_S5CMD"))
    p.add_argument("--rclone", default=shutil.which("rclone"))
    p.add_argument("--aws", default=os.environ.get("BENCH_AWS"))
    p.add_argument("--ferry", default=str(Path(sys.executable).parent / "ferry"))
    p.add_argument(
        "--baseline-ferry",
        help="another ferry command (e.g. a build of an earlier commit) run as extra rows, to measure a change side by side",
    )
    p.add_argument("--output", default=str(REPO / "bench" / "results" / "latest.md"))
    p.add_argument("--argv", default="make bench", help="the command line to print in the results")
    args = p.parse_args(argv)
    quick = args.quick
    args.settings = Settings(
        objects=args.objects or (200 if quick else 2000),
        object_size=args.object_size,
        large_size=parse_size(args.large_size or ("256MiB" if quick else "2GiB")),
        huge_size=parse_size(args.huge_size or ("5.1GiB" if quick else "5.5GiB")),
        runs=args.runs or (2 if quick else 5),
        equal=args.equal,
    )
    return args


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def machine() -> list[str]:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 1024**2:.1f} GiB"
    except OSError:
        pass
    return [
        f"Machine: {os.cpu_count()} cores ({cpu}), {memory} memory, Linux {platform.release()}, "
        f"Python {platform.python_version()}; client and server share the cores, over 127.0.0.1",
    ]


def git_commit() -> str:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "functions"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        return commit + ("+uncommitted engine changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def shown(command: str, server: Server, prefix: str, work: Path) -> str:
    """A command line as a reader can reuse it: no temp paths, port or run prefix."""
    command = command.replace(str(REPO) + "/", "").replace(server.url, "$ENDPOINT")
    return command.replace(str(work), "$WORK").replace(prefix, "RUN/")


def wait_for_disk(path: Path, needed: float, limit: float = 300.0) -> None:
    """Servers delete in the background (MinIO moves objects to a trash first): before a run
    that writes `needed` bytes, give them time to free the space the last run used."""
    deadline = time.monotonic() + limit
    while free_disk(path) < needed and time.monotonic() < deadline:
        time.sleep(2)


def run_case(
    case: Case, server: Server, env: dict[str, str], s3: object, settings: Settings, work: Path
) -> CaseResult:
    rows = [Row(v.tool, v.setting, case.objects, case.total_bytes, note=v.note) for v in case.variants]
    n = len(case.variants)
    kept: list[Path] = []  # disk runs' folders to delete when the case ends (set_aside)
    for round_ in range(settings.runs):
        order = [(i + round_) % n for i in range(n)]  # rotate, so no tool always goes first
        for i in order:
            variant, row = case.variants[i], rows[i]
            wait_for_disk(server.root, case.total_bytes * 1.5 + GiB)
            prefix = f"case{case.number}/{variant.tool}-{i}-r{round_}/"
            invocation = variant.build(prefix)
            if not row.command:
                row.command = shown(invocation.shown, server, prefix, work)
            run_env = dict(env, **variant.env)
            if len(invocation.pipelines) == 1:
                sample = measure.run_pipeline(invocation.pipelines[0], run_env)
            else:
                sample = measure.run_many(invocation.pipelines, run_env, invocation.concurrency)
            if sample.ok:
                if case.local_destination is not None:
                    copied, copied_bytes = data.count_files(case.local_destination / prefix)
                else:
                    copied, copied_bytes = data.count(s3, data.DST_BUCKET, prefix)
                if (copied, copied_bytes) != (case.objects, case.total_bytes):
                    sample = Sample(
                        sample.wall,
                        sample.cpu,
                        sample.peak_rss,
                        ok=False,
                        error=f"incomplete copy: {copied} objects, {copied_bytes} bytes "
                        f"(expected {case.objects}, {case.total_bytes})",
                    )
            row.samples.append(sample)
            status = "ok" if sample.ok else f"FAILED {sample.error}"
            log(
                f"case {case.number} run {round_ + 1}/{settings.runs} {variant.tool} ({variant.setting}): "
                f"{sample.wall:.2f} s, cpu {sample.cpu:.1f} s, rss {sample.peak_rss / 2**20:.0f} MiB {status}"
            )
            if case.local_destination is not None:
                set_aside(case, case.local_destination / prefix, kept)
            else:
                data.empty(s3, data.DST_BUCKET, prefix)
            server.purge_deleted()
    for folder in kept:
        shutil.rmtree(folder, ignore_errors=True)
    os.sync()
    return CaseResult(case.number, case.title, rows, case.notes)


def set_aside(case: Case, folder: Path, kept: list[Path]) -> None:
    """Clear a disk case's run before the next one, with its dirty pages written now: unflushed,
    they cost the next tool's run seconds of system CPU. Many files are kept until the case
    ends (disk allowing), not deleted: ext4 without a journal will not hand out an inode
    deleted in the last minute, and every file created then scans past each one (the kernel's
    recently_deleted), a cost that falls on whichever tool runs next, more with every run."""
    if case.objects > 1 and free_disk(folder.parent) > 2 * case.total_bytes + GiB:
        kept.append(folder)
    else:
        shutil.rmtree(folder, ignore_errors=True)
    os.sync()


def free_disk(path: Path) -> int:
    return shutil.disk_usage(path).free


def run_server(server: Server, args: argparse.Namespace, bins: Binaries, page: Page, write: object) -> None:
    settings: Settings = args.settings
    result = ServerResult(server.version())
    page.servers.append(result)
    cases = [int(c) for c in args.cases.split(",") if c.strip()]
    work = Path(tempfile.mkdtemp(prefix="ferry-bench-work-"))
    try:
        server.start()
        log(f"{server.name} on {server.url}, data in {server.data_dir}")
        s3 = data.client(server.url)
        data.make_buckets(s3)
        env = dict(base_env(work, bins.aws), **rclone_env(server.url, server.name))
        commands = Commands(bins, server.url)
        for number in cases:
            case = BUILDERS[number](commands, settings, work)
            if args.baseline_ferry:
                base_bins = replace(bins, ferry=args.baseline_ferry, s5cmd=None, rclone=None, aws=None)
                baseline = BUILDERS[number](Commands(base_bins, server.url), settings, work)
                for variant in baseline.variants:
                    variant.tool = "ferry-baseline"
                case.variants += baseline.variants
            needed = case.total_bytes * 2.2 + 2 * GiB
            wait_for_disk(server.root, needed, limit=900)  # the last case's deletes may still be running
            if free_disk(server.root) < needed:
                result.cases.append(
                    CaseResult(number, case.title, [], skipped=f"needs {needed / GiB:.0f} GiB free disk")
                )
                continue
            log(f"seeding case {number} on {server.name}")
            started = time.monotonic()
            if number in (1, 2, 8):
                have, _ = data.count(s3, data.SRC_BUCKET, SMALL_PREFIX)
                if have != settings.objects:
                    data.empty(s3, data.SRC_BUCKET, SMALL_PREFIX)
                    data.seed_small(s3, SMALL_PREFIX, settings.objects, settings.object_size)
                result.sources["small objects"] = data.describe_source(s3, data.small_key(SMALL_PREFIX, 0))
            elif number == 6:
                data.seed_files(work / UPLOAD_FOLDER, settings.objects, settings.object_size)
                result.sources["local files"] = f"{settings.objects:,} of {settings.object_size:,} bytes"
            else:
                key = LARGE_KEY if number in (3, 7) else HUGE_KEY
                size = settings.large_size if number in (3, 7) else settings.huge_size
                if not data.exists(s3, key, size):
                    data.seed_large(s3, key, size)
                result.sources[f"{key.split('/')[0]} object"] = data.describe_source(s3, key)
                if number == 3:
                    if not data.exists(s3, LARGE_16_KEY, size):
                        data.seed_large(s3, LARGE_16_KEY, size, part=16 * data.MiB)
                    result.sources["large object in 16 MiB parts"] = data.describe_source(s3, LARGE_16_KEY)
            log(f"seeded in {time.monotonic() - started:.0f} s")
            case_result = run_case(case, server, env, s3, settings, work)
            result.cases.append(case_result)
            if number == 4:
                data.empty(s3, data.SRC_BUCKET, HUGE_KEY)  # 5.5 GiB less on disk for what follows
                server.purge_deleted()
            write()
    except Exception as error:  # one server failing must not lose the other's results
        result.problem = f"{type(error).__name__}: {error} {server.log_tail(400)}"
        log(f"{server.name}: {result.problem}")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    # A terminated bench still stops its servers and removes their data (finally blocks run).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args = parse_args(argv)
    settings: Settings = args.settings
    wanted = set(args.tools.split(","))
    missing: list[str] = []

    def tool(name: str, path: str | None) -> str | None:
        if name not in wanted:
            return None
        if path and Path(path).exists():
            return str(Path(path).resolve()) if "/" in path else path
        missing.append(f"{name} (not found{': ' + path if path else ''})")
        return None

    bins = Binaries(
        ferry=args.ferry,
        s5cmd=tool("s5cmd", args.s5cmd),
        rclone=tool("rclone", args.rclone),
        aws=tool("aws", args.aws),
    )
    tool_versions = versions(bins, git_commit())
    settings_lines = [
        f"Settings: {settings.objects:,} small objects of {settings.object_size:,} bytes; "
        f"large object {settings.large_size / GiB:.2f} GiB; huge object {settings.huge_size / GiB:.2f} GiB; "
        f"{settings.runs} runs of every row; equal concurrency {settings.equal} objects "
        f"(parts: {settings.equal_parts})",
    ]
    if args.baseline_ferry:
        settings_lines.append(
            f"ferry-baseline rows: the same Ferry command lines run with `{args.baseline_ferry}`"
        )
    if missing:
        settings_lines.append("Missing tools, whose rows are absent: " + ", ".join(missing))
    page = Page(
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        machine=machine(),
        tools=tool_versions,
        settings=settings_lines,
        servers=[],
        method=METHOD,
        argv=args.argv,
    )
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)

    def write() -> None:
        tmp = output.with_suffix(".md.tmp")
        tmp.write_text(render(page))
        tmp.replace(output)
        output.with_suffix(".json").write_text(json.dumps(asdict(page), indent=1, default=str))

    for name in [s.strip() for s in args.servers.split(",") if s.strip()]:
        binary = getattr(args, name)
        pinned = getattr(args, f"{name}_version")
        if not binary or not Path(binary).exists():
            page.servers.append(ServerResult(name, problem=f"{name} binary not found ({binary})"))
            continue
        run_server(make_server(name, binary, pinned), args, bins, page, write)
        write()
    write()
    log(f"results in {output}")
    if missing:
        log("missing tools: " + ", ".join(missing))
    return 0


METHOD = [
    "Each row is one tool at one setting; each run is that tool's command as a child process, "
    "copying into a fresh destination prefix that is checked afterwards (every object there, "
    "every byte) and then emptied (a download of many files is kept on disk until its case "
    "ends: ext4 makes each file created within a minute of many deletions scan past them). "
    "Rows run one after another, in an order rotated from run to run, so that every tool meets "
    "the same machine conditions.",
    "",
    "- **time**: wall time of the whole command, from start to exit, listing included.",
    "- **objects/s, MiB/s**: objects and bytes copied divided by the median time.",
    "- **peak RSS**: the largest `ru_maxrss` over the runs, from `os.wait4` on each child; for a "
    "pipeline (`cat | pipe`), the sum of its processes.",
    "- **CPU s**: user + system CPU seconds of the client processes (median over runs); the "
    "server's CPU is not counted, but it runs on the same 2 cores and competes for them.",
    "- Credentials from the environment; `AWS_CA_BUNDLE` unset for every tool (plain http).",
]


if __name__ == "__main__":
    sys.exit(main())
