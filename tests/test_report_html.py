"""The HTML report's renderer and its fixed-size counters, on hand-made reports: escaping,
nothing fetched from the network, buckets that stay few however long the job runs."""

from __future__ import annotations

import re
from pathlib import Path

from ferry.models import CopyResult, Status
from ferry.reports.report_html import FAILURES_SHOWN, OUTCOME_COLOURS, render_report_html
from ferry.reports.report_stats import MAX_BUCKETS, ReportStats, Timeline, size_bucket
from report_render import EXTERNAL, hex_colour, read_png, screenshot

REPORT = {
    "job_id": "nightly-7",
    "status": "PARTIAL",
    "source": {"bucket": "photos", "prefix": "2024/"},
    "destination": "s3://backup/photos/",
    "objects": 10,
    "copied": 6,
    "skipped": 2,
    "failed": 1,
    "pending": 1,
    "bytes_copied": 3 * 1024 * 1024,
    "seconds": 12.5,
    "timeline": {
        "start": "2026-01-01T00:00:00Z",
        "bucket_seconds": 1,
        "objects": [4, 0, 6],
        "bytes": [1, 0, 2],
    },
    "sizes": [{"min": 1024, "max": 2047, "objects": 5}, {"min": 2048, "max": 4095, "objects": 3}],
    "strategies": {"server-side": 6},
    "verified_by": {"checksum": 6},
}


def card(html: str, label: str) -> str:
    """The number on a summary card."""
    found = re.search(rf'<div class="l">{label}</div><div class="n">([^<]*)</div>', html)
    assert found, f"no {label} card"
    return found.group(1)


def test_a_key_with_markup_is_shown_as_text_never_run():
    evil = 'photos/<script>alert("x")</script>&<img src=x onerror=alert(1)>.jpg'
    report = {**REPORT, "failures": [{"key": evil, "reason": "AccessDenied <b>bold</b>"}]}
    html = render_report_html(report)
    assert "<script>" not in html and "<img" not in html and "<b>bold" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&lt;img src=x onerror=alert(1)&gt;" in html
    assert "AccessDenied &lt;b&gt;bold&lt;/b&gt;" in html


def test_a_degradation_title_and_location_with_markup_are_escaped_too():
    report = {
        **REPORT,
        "title": "<i>t</i>",
        "degradations": ["<svg onload=x>"],
        "source": {"bucket": "b", "prefix": "<u>"},
    }
    html = render_report_html(report)
    assert "<i>t" not in html and "<svg onload" not in html and "<u>" not in html
    assert "&lt;svg onload=x&gt;" in html and "s3://b/&lt;u&gt;" in html


def test_the_page_references_nothing_outside_itself():
    html = render_report_html({**REPORT, "failures": [{"key": "k", "reason": "see https://example.com"}]})
    assert EXTERNAL.findall(html) == []
    assert "<script" not in html and "<link" not in html and "<img" not in html
    # The pattern itself finds what it must (so an empty result above means something).
    assert EXTERNAL.findall('<img src="https://cdn.example/x.png"><a href=//x>') != []
    assert EXTERNAL.findall("<style>b{background:url(x.png)}</style>") != []


def test_failures_beyond_those_listed_are_counted_not_dropped():
    failures = [{"key": f"k{n}", "reason": "r"} for n in range(FAILURES_SHOWN + 5)]
    html = render_report_html(
        {**REPORT, "failed": 120, "failures": failures, "failures_report": "s3://r/failures.jsonl"}
    )
    assert html.count('<td class="key">') == FAILURES_SHOWN
    assert (
        f"… and {120 - FAILURES_SHOWN:,} more failed objects: the full list is in s3://r/failures.jsonl"
        in html
    )
    assert "Failures (120)" in html


def test_counts_and_status_come_from_the_report():
    html = render_report_html(REPORT)
    assert (card(html, "objects"), card(html, "copied"), card(html, "failed")) == ("10", "6", "1")
    assert ">PARTIAL<" in html and "s3://photos/2024/ → s3://backup/photos/" in html
    derived = render_report_html(
        {k: v for k, v in REPORT.items() if k != "status"} | {"failed": 0, "pending": 0}
    )
    assert ">SUCCEEDED<" in derived


def test_an_empty_report_renders_without_charts():
    html = render_report_html({"objects": 0, "copied": 0, "skipped": 0, "failed": 0, "pending": 0})
    assert "<svg" not in html and "Failures" not in html and ">SUCCEEDED<" in html


def test_a_long_job_keeps_at_most_max_buckets_and_every_object():
    timeline = Timeline(start=1000.0)
    for second in range(0, 7 * 24 * 3600, 37):  # a week, an object every 37 s
        timeline.add(1000.0 + second, 1, 10)
    timeline.extend_to(1000.0 + 7 * 24 * 3600)
    assert len(timeline.objects) <= MAX_BUCKETS and len(timeline.bytes) == len(timeline.objects)
    assert sum(timeline.objects) == len(range(0, 7 * 24 * 3600, 37))
    assert sum(timeline.bytes) == 10 * sum(timeline.objects)
    assert timeline.width * MAX_BUCKETS >= 7 * 24 * 3600 > timeline.width * MAX_BUCKETS // 2


def test_sizes_land_in_log2_buckets_and_stats_survive_a_marker_round_trip():
    assert [size_bucket(s) for s in (0, 1, 2, 3, 4, 1023, 1024, 5 * 2**40)] == [-1, 0, 1, 1, 2, 9, 10, 42]
    stats = ReportStats()
    results = [
        CopyResult("a", "a", Status.COPIED, strategy="server-side", verified_by="checksum", bytes=1500),
        CopyResult("b", "b", Status.COPIED, strategy="multipart", verified_by="etag", bytes=20 * 2**20),
        CopyResult("c", "c", Status.SKIPPED, bytes=0),
        CopyResult("d", "d", Status.FAILED, reason="x", bytes=0),
    ]
    for result in results:
        stats.add(result)
    merged = ReportStats.from_marker(stats.to_marker()).merge(ReportStats.from_marker(stats.to_marker()))
    report = merged.to_dict()
    assert report["bytes"] == {"copied": 2 * (1500 + 20 * 2**20), "skipped": 0, "failed": 0, "pending": 0}
    assert report["strategies"] == {"server-side": 2, "multipart": 2}
    assert report["verified_by"] == {"checksum": 2, "etag": 2}
    sizes = report["sizes"]
    assert sum(s["objects"] for s in sizes) == 6  # copied and skipped, twice; not the failure
    assert sizes[0] == {"min": 0, "max": 0, "objects": 2}
    assert {"min": 1024, "max": 2047, "objects": 2} in sizes
    assert {"min": 16 * 2**20, "max": 32 * 2**20 - 1, "objects": 2} in sizes
    assert [s["min"] for s in sizes] == [0] + [2**e for e in range(25)]  # a continuous axis


def test_a_rendered_page_is_not_blank(tmp_path: Path):
    """Chromium draws the summary, the charts and the failures: many colours, the outcome
    colours among them, and a good share of the page not background."""
    page = tmp_path / "report.html"
    page.write_text(
        render_report_html({**REPORT, "failures": [{"key": "k", "reason": "r"}]}), encoding="utf-8"
    )
    png = tmp_path / "report.png"
    screenshot(page, png)
    image = read_png(png)
    colours = image.colours()
    assert (image.width, image.height) == (1200, 2000)
    assert len(colours) > 50
    assert image.share_not_near((0xF4, 0xF6, 0xF9)) > 0.05
    for outcome in ("copied", "failed"):
        assert colours[hex_colour(OUTCOME_COLOURS[outcome])] > 100, outcome
    assert colours.most_common(1)[0][1] < 0.95 * len(image.pixels)  # not one flat colour
