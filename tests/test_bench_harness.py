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


def test_profile_splits_py_spy_stacks_into_start_up_requests_and_own_code(tmp_path: Path) -> None:
    from bench.profile import split

    raw = tmp_path / "raw.txt"
    raw.write_text(
        "\n".join(
            [
                "<module> (ferry/cli/main.py:1);_find_and_load (<frozen importlib._bootstrap>:1) 5",
                "run (ferry/engine/copier.py:1);Copier.copy (ferry/engine/copier.py:9);BaseClient._make_api_call (botocore/client.py:1) 7",
                "run (ferry/engine/copier.py:1);Copier.copy (ferry/engine/copier.py:9);verify (ferry/engine/verify.py:3) 2",
                "run (ferry/engine/copier.py:1);Copier.copy (ferry/engine/copier.py:9);LeanClient._send (ferry/lean_s3.py:4) 3",
                "next_window (ferry/engine/copier.py:1);list_objects (ferry/listing.py:2) 1",
                " 40",  # idle: no Python frame holds the GIL
            ]
        )
    )
    total, shares = split(raw)
    assert total == 18
    assert shares == {
        "start-up: imports, sessions, clients": 5,
        "per object: botocore requests": 7,
        "per object: lean requests (ferry/lean_s3.py)": 3,
        "per object: Ferry's own code": 2,
        "listings (source and destination)": 1,
    }
