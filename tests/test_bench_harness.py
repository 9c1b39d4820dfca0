"""The benchmark harness's pure pieces: medians and spreads, the verdict, and the Markdown page.

`make bench` itself is not a test (it takes most of an hour); these check its arithmetic.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for `bench`

from bench.report import CaseResult, Page, ServerResult, case_table, render, standing  # noqa: E402
from bench.stats import GiB, MiB, Row, Sample, fastest, spread_percent  # noqa: E402


def row(tool: str, walls: list[float], cpu: float = 1.0, rss: int = 50 * MiB, **kwargs: object) -> Row:
    r = Row(tool, kwargs.pop("setting", "32"), objects=1000, total_bytes=500 * MiB)  # type: ignore[arg-type]
    r.samples = [Sample(w, cpu, rss) for w in walls]
    return r


def test_median_spread_and_rates() -> None:
    r = row("ferry", [3.0, 1.0, 2.0, 10.0, 2.5])
    assert r.median_wall == 2.5
    assert (r.min_wall, r.max_wall) == (1.0, 10.0)
    assert spread_percent(r) == (10.0 - 1.0) / 2.5 * 100
    assert r.objects_per_second == 1000 / 2.5
    assert r.mib_per_second == 500 / 2.5
    assert r.cpu_per_1000_objects == 1.0
    assert r.cpu_per_gib == 1.0 * GiB / (500 * MiB)


def test_failed_runs_are_left_out_of_the_median_and_the_row_cannot_win() -> None:
    flaky = row("s5cmd", [1.0, 1.0])
    flaky.samples.append(Sample(0.1, 0.0, 0, ok=False, error="exit codes [1]"))
    steady = row("ferry", [2.0, 2.0, 2.0])
    assert flaky.median_wall == 1.0
    assert fastest([flaky, steady]) is steady  # a row with a failed run is not "the fastest"


def test_peak_rss_is_the_largest_of_the_runs() -> None:
    r = row("rclone", [1.0])
    r.samples += [Sample(1.0, 1.0, 300 * MiB), Sample(1.0, 1.0, 10 * MiB)]
    assert r.peak_rss == 300 * MiB


def test_standing_says_how_much_slower_ferry_is() -> None:
    case = CaseResult(1, "small", [row("ferry", [3.0]), row("s5cmd", [1.5]), row("aws", [6.0])])
    verdict = standing(case)
    assert verdict is not None and "2.00x slower" in verdict and "s5cmd" in verdict
    case = CaseResult(1, "small", [row("ferry", [1.0]), row("s5cmd", [1.5])])
    assert "Ferry is the fastest" in (standing(case) or "")


def test_table_escapes_pipes_in_settings() -> None:
    case = CaseResult(2, "streamed", [row("s5cmd", [1.0], setting="cat | pipe per object")])
    lines = case_table(case)
    assert "cat \\| pipe per object" in lines[2]
    assert len(lines[0].split(" | ")) == len(lines[2].split(" | "))


def test_page_renders_every_server_case_and_failure() -> None:
    failed = row("ferry", [])
    failed.samples = [Sample(0.5, 0.4, 90 * MiB, ok=False, error="exit codes [2]: UploadPartCopy refused")]
    server = ServerResult(
        "minio v1",
        sources={"small objects": "1 part(s), CRC32 FULL_OBJECT"},
        cases=[
            CaseResult(1, "small", [row("ferry", [2.0]), row("s5cmd", [1.0])]),
            CaseResult(4, "huge", [failed, row("rclone", [20.0])]),
        ],
    )
    page = Page(
        date="2026-11-21",
        machine=["Machine: 2 cores"],
        tools={"ferry": "ferry 0.1.0"},
        settings=["Settings: ..."],
        servers=[server, ServerResult("versitygw v1.8.0", problem="binary not found")],
        method=["how"],
    )
    text = render(page)
    assert "## Server: minio v1" in text
    assert "### Case 1: small (minio)" in text and "### Case 4: huge (minio)" in text
    assert "Ferry did not complete this case" in text and "UploadPartCopy refused" in text
    assert "### Case 5: client CPU seconds (minio)" in text
    assert "Not run: binary not found" in text


def test_the_disk_cases_upload_a_folder_and_download_into_one(tmp_path: Path) -> None:
    """Case 6 uploads the run's folder of files to the bucket; case 7 downloads the large
    object, case 8 the small objects, into a folder of the run, which the runner counts and
    removes after each run."""
    from bench.cases import BUILDERS, Settings
    from bench.data import count_files
    from bench.tools import Binaries, Commands

    commands = Commands(Binaries(ferry="ferry", s5cmd="s5cmd", rclone="rclone", aws=None), "http://e")
    upload = BUILDERS[6](commands, Settings(objects=10), tmp_path)
    assert {v.tool for v in upload.variants} == {"ferry", "s5cmd", "rclone"}
    assert upload.local_destination is None and upload.objects == 10
    ferry_command = upload.variants[0].build("RUN/").pipelines[0][0]
    assert ferry_command[:4] == ["ferry", "copy", str(tmp_path / "upload-source"), "s3://bench-dst/RUN/"]

    download = BUILDERS[7](commands, Settings(), tmp_path)
    assert {v.tool for v in download.variants} == {"ferry", "s5cmd"}
    assert download.local_destination == tmp_path / "downloads" and download.objects == 1
    ferry_command = download.variants[0].build("RUN/").pipelines[0][0]
    assert ferry_command[2:4] == ["s3://bench-src/large/object-large", f"{tmp_path}/downloads/RUN/"]

    small = BUILDERS[8](commands, Settings(objects=10), tmp_path)
    assert {v.tool for v in small.variants} == {"ferry", "s5cmd"}
    assert small.local_destination == tmp_path / "downloads" and small.objects == 10
    ferry_command = small.variants[0].build("RUN/").pipelines[0][0]
    assert ferry_command[2:4] == ["s3://bench-src/small/", f"{tmp_path}/downloads/RUN/"]
    s5cmd_command = small.variants[2].build("RUN/").pipelines[0][0]
    assert s5cmd_command[-2:] == ["s3://bench-src/small/*", f"{tmp_path}/downloads/RUN/"]

    (tmp_path / "downloads" / "RUN").mkdir(parents=True)
    (tmp_path / "downloads" / "RUN" / "object-large").write_bytes(b"x" * 10)
    assert count_files(tmp_path / "downloads" / "RUN") == (1, 10)
    case = CaseResult(7, "one object of 2.0 GiB downloaded to disk", [row("ferry", [1.0])])
    assert "CPU s / GiB" in case_table(case)[0]
    alone = Page("d", ["m"], {}, ["s"], [ServerResult("minio v1", cases=[case])], ["how"])
    assert "### Case 7" in render(alone) and "Case 5" not in render(alone)  # made from 1-4 only


def test_profile_splits_py_spy_stacks_into_start_up_requests_and_own_code(tmp_path: Path) -> None:
    from bench.profile import split

    raw = tmp_path / "raw.txt"
    raw.write_text(
        "\n".join(
            [
                "<module> (ferry/cli/main.py:1);_find_and_load (<frozen importlib._bootstrap>:1) 5",
                "run (ferry/engine/strategies/copier.py:1);Copier.copy (ferry/engine/strategies/copier.py:9);BaseClient._make_api_call (botocore/client.py:1) 7",
                "run (ferry/engine/strategies/copier.py:1);Copier.copy (ferry/engine/strategies/copier.py:9);verify (ferry/engine/proofs/verify.py:3) 2",
                "run (ferry/engine/strategies/copier.py:1);Copier.copy (ferry/engine/strategies/copier.py:9);LeanClient._send (ferry/s3/lean_s3.py:4) 3",
                "next_window (ferry/engine/strategies/copier.py:1);list_objects (ferry/s3/listing.py:2) 1",
                " 40",  # idle: no Python frame holds the GIL
            ]
        )
    )
    total, shares = split(raw)
    assert total == 18
    assert shares == {
        "start-up: imports, sessions, clients": 5,
        "per object: botocore requests": 7,
        "per object: lean requests (ferry/s3/lean_s3.py)": 3,
        "per object: Ferry's own code": 2,
        "listings (source and destination)": 1,
    }


# -- make load (bench/load.py, bench/load_stats.py): the arithmetic and the progress readers ----

from bench.load import key_of, size_of  # noqa: E402
from bench.load import render as render_load  # noqa: E402
from bench.load_stats import (  # noqa: E402
    Minute,
    Point,
    ReportLines,
    Trace,
    ledger_done,
    per_minute,
    proc_memory,
    rss_at,
    steadiness,
)


def points(rate: float, seconds: int, rss: int = 80 * MiB) -> list[Point]:
    return [Point(float(t), rss, rss, int(rate * t)) for t in range(seconds + 1)]


def test_per_minute_rates_and_steadiness_leave_out_the_partial_last_minute() -> None:
    trace = points(100, 150)  # 100 objects/s for two and a half minutes
    minutes = per_minute(trace)
    assert [(m.seconds, m.objects) for m in minutes] == [(60, 6000), (60, 6000), (30, 3000)]
    assert [m.rate for m in minutes] == [100, 100, 100]
    assert steadiness(minutes) == 1.0
    uneven = [Minute(0, 60, 6000), Minute(60, 60, 3000), Minute(120, 5, 1)]
    assert steadiness(uneven) == 0.5  # the 5-second tail does not count
    assert steadiness([Minute(0, 60, 10)]) is None


def test_rss_at_a_share_of_the_job_and_the_peak() -> None:
    trace = [
        Point(0, 50 * MiB, 50 * MiB, 0),
        Point(1, 60 * MiB, 60 * MiB, 10),
        Point(2, 70 * MiB, 90 * MiB, 50),
    ]
    assert rss_at(trace, 100, 0.1) == 60 * MiB
    assert rss_at(trace, 100, 0.5) == 70 * MiB
    assert rss_at(trace, 100, 0.9) is None
    assert Trace(trace).peak_rss == 90 * MiB
    assert Trace(trace, final_peak=120 * MiB).peak_rss == 120 * MiB


def test_report_lines_counts_whole_lines_as_the_report_grows_and_not_the_summary(tmp_path: Path) -> None:
    report = tmp_path / "r.jsonl"
    done = ReportLines(report)
    assert done() == 0  # not written yet
    report.write_text('{"key": "a"}\n{"key": "b"}\n{"ke')
    assert done() == 2  # the half-written line waits
    with open(report, "a") as f:
        f.write('y": "c"}\n{"summary": {"objects": 3}}\n')
    assert done() == 3


def test_ledger_done_sums_a_jobs_batches_from_the_sqlite_ledger(tmp_path: Path) -> None:
    from ferry.models import CopyResult, Status
    from ferry.pipeline.ledger.contract import BatchCounts
    from ferry.pipeline.ledger.sqlite import SQLiteLedger

    path = tmp_path / "ledger.sqlite"
    assert ledger_done(path, "j") == 0
    ledger = SQLiteLedger(path)
    ledger.create_job("j", {})
    results = [CopyResult("a", "a", Status.COPIED), CopyResult("b", "b", Status.FAILED, reason="x")]
    ledger.record_batch("j", "0001", BatchCounts.of(results), attempt="1", report_key=None)
    ledger.record_batch("j", "0002", BatchCounts.of(results[:1]), attempt="1", report_key=None)
    assert ledger_done(path, "j") == 3
    assert ledger_done(path, "other") == 0
    ledger.close()


def test_proc_memory_reads_this_process() -> None:
    import os

    rss, hwm = proc_memory(os.getpid()) or (0, 0)
    assert 0 < rss <= hwm
    assert proc_memory(2**22 + 12345) is None  # no such process


def test_seeded_keys_and_sizes_are_fixed_and_the_page_renders() -> None:
    assert key_of(12345) == "load/0012/obj-0012345"
    assert size_of(7, 1024, 4096) == size_of(7, 1024, 4096)
    assert {size_of(i, 1024, 4096) for i in range(100)} <= set(range(1024, 4097))
    path = {
        "name": "ferry copy",
        "command": "ferry copy ...",
        "ok": True,
        "seconds": 150.0,
        "summary": {"copied": 15000, "skipped": 0, "failed": 0},
        "peak_rss": 90 * MiB,
        "rss_at": {"10%": 80 * MiB, "50%": 81 * MiB, "90%": 82 * MiB},
        "minutes": [{"per_second": 100.0}, {"per_second": 100.0}, {"per_second": 100.0}],
        "steadiness": 1.0,
        "load_before": "load average 1.0, 1.0, 1.0",
        "load_after": "load average 2.0, 1.0, 1.0",
        "checks": {"copied+skipped+failed == objects": True},
        "listed": (15000, 1),
        "error": "",
    }
    manifest = {
        "format": "jsonl",
        "keys": 1000000,
        "manifest_bytes": 50 * MiB,
        "items_read": 1000000,
        "batches": 5000,
        "seconds": 40.0,
        "rss_before_reading": 50 * MiB,
        "peak_rss": 60 * MiB,
    }
    page = {
        "argv": "make load",
        "date": "today",
        "commit": "abc",
        "server": "versitygw",
        "machine": "Machine: 2 cores",
        "objects": 15000,
        "object_sizes": "1024-4096 bytes",
        "source_bytes": 40 * MiB,
        "paths": [path],
        "manifests": [manifest],
    }
    text = render_load(page)
    assert (
        "| ferry copy | ok | 15,000 copied, 0 skipped, 0 failed | 150 s | 90 MiB | 80 MiB / 81 MiB / 82 MiB |"
        in text
    )
    assert "- ferry copy: 100, 100, 100" in text
    assert "| jsonl | 1,000,000 | 50 MiB | 1000000 | 5000 | 40.0 | 50 MiB | 60 MiB |" in text


# -- make bench-startup (bench/startup.py): ratios to the yardstick, and one real round ----------

from bench import startup  # noqa: E402


def test_startup_table_gives_ratios_to_the_yardstick_and_the_verdicts() -> None:
    yardstick = startup.Command(startup.YARDSTICK, [], None, cpu=[0.2, 0.25, 0.18])
    helped = startup.Command("ferry --help", [], startup.HELP_TARGET, cpu=[0.05, 0.04, 0.3])
    handler = startup.Command("import handlers.x", [], startup.HANDLER_TARGET, cpu=[0.32, 0.31, 0.33])
    lines = startup.table([yardstick, helped, handler])
    assert lines[2] == "| `import botocore.session` | 0.200 | 0.180 | 0.250 | 1.00 | yardstick |"
    assert lines[3] == "| `ferry --help` | 0.050 | 0.040 | 0.300 | 0.25 | meets <= 0.5x |"
    assert lines[4] == "| `import handlers.x` | 0.320 | 0.310 | 0.330 | 1.60 | over 1.5x |"


def test_startup_tables_count_modules_compiled_at_init_where_counted() -> None:
    yardstick = startup.Command(startup.YARDSTICK, [], None, cpu=[0.2], table=startup.LAMBDA)
    handler = startup.Command("Prepare: import handlers.prepare", [], 1.5, cpu=[0.28], table=startup.LAMBDA)
    handler.compiled = 0
    lines = startup.table([yardstick, handler])
    assert lines[0].endswith("| target | modules compiled at init |") and lines[1].count("---") == 7
    assert lines[2] == "| `import botocore.session` | 0.200 | 0.200 | 0.200 | 1.00 | yardstick |  |"
    assert (
        lines[3]
        == "| `Prepare: import handlers.prepare` | 0.280 | 0.280 | 0.280 | 1.40 | meets <= 1.5x | 0 |"
    )
    setup = startup.LambdaSetup("/usr/bin/python3.13", "3.13.0", ["asset.1", "asset.2"], ["awscrt 0.38.0"])
    here = startup.commands()
    for command in here:
        command.cpu = [0.1]
    page = startup.render([*here, yardstick, handler], 1, "make bench-startup", "l", "l", setup)
    assert "## Here: the venv's Python" in page and "## As Lambda runs them: Python 3.13.0" in page
    assert "asset.1, asset.2" in page and "awscrt 0.38.0" in page


def test_startup_measures_both_help_texts_here(tmp_path: Path) -> None:
    found = startup.commands()
    assert [c.name for c in found] == [startup.YARDSTICK, "ferry --help", "ferry copy --help"]
    assert all(c.table == startup.HERE and c.inherit for c in found)
    # One real round of two cheap commands: the children are measured, in rotated order; one
    # with an environment of its own sees nothing of this one's.
    own = startup.Command("b", [sys.executable, "-c", "import os, sys; sys.exit('HOME' in os.environ)"], None)
    own.env, own.inherit = {"PATH": "/usr/bin"}, False
    cheap = [startup.Command("a", [sys.executable, "-c", "pass"], None), found[1], own]
    startup.measure(cheap, rounds=2, pycache=str(tmp_path), warm_up=False)
    assert all(len(c.cpu) == 2 and min(c.cpu) > 0 for c in cheap)
    assert "| `a` |" in startup.render(cheap, 2, "make bench-startup", "load", "load")
