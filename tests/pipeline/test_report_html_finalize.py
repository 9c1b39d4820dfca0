"""Finalize writes report.html beside summary.json: a whole job run by the parent harness
(Lambda batches, a Fargate large object, a batch that keeps failing), then the page from the
report bucket rendered in headless Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from test_parent_workflow import (  # noqa: F401 - `parent` is the fixture these tests use
    MAX_ITEMS_PER_BATCH,
    MiB,
    _break_batches_holding,
    _lower_large_object_threshold,
    parent,
    put_sources,
)

from conftest import PIPELINE_REPORTS
from ferry.reports.report_html import OUTCOME_COLOURS
from report_render import EXTERNAL, hex_colour, read_png, screenshot


def card(html: str, label: str) -> str:
    found = re.search(rf'<div class="l">{label}</div><div class="n">([^<]*)</div>', html)
    assert found, f"no {label} card"
    return found.group(1)


def test_finalize_writes_a_report_page_with_the_jobs_counts_charts_and_failures(
    parent: Any,  # noqa: F811 - the imported fixture
    monkeypatch: Any,
    tmp_path: Path,
) -> None:
    s3 = parent.pipeline.s3
    _lower_large_object_threshold(parent, monkeypatch, MiB)
    sources = put_sources(s3, "in/", 100)
    for key, size in (("in/mid.bin", 100 * 1024), ("in/large.bin", 3 * MiB)):
        s3.put_object(Bucket="src", Key=key, Body=b"m" * size)
    _break_batches_holding(parent, monkeypatch, "in/050.txt", also_record_failure=False)
    spec = {"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst", "prefix": "out/"}}

    described = parent.run(spec, "html-job")

    assert (described["status"], described["error"]) == ("FAILED", "FerryJobIncomplete")
    objects = len(sources) + 2
    summary = parent.report("html-job")
    assert (summary["status"], summary["objects"], summary["failed"]) == ("PARTIAL", objects, 40)
    job = parent.ledger_job("html-job")
    assert json.loads(job["report"])["report_html"] == f"s3://{PIPELINE_REPORTS}/jobs/html-job/report.html"
    # The charts' numbers add up to the job's counts, summed from the batch markers.
    copied = summary["copied"]
    assert sum(summary["timeline"]["objects"]) == objects
    assert sum(summary["timeline"]["bytes"]) == summary["bytes_copied"] == summary["bytes"]["copied"]
    assert sum(s["objects"] for s in summary["sizes"]) == copied + summary["skipped"]
    assert {"min": 2 * MiB, "max": 4 * MiB - 1, "objects": 1} in summary["sizes"]  # the Fargate object
    assert sum(summary["strategies"].values()) == sum(summary["verified_by"].values()) == copied
    assert summary["seconds"] >= 0 and summary["finished_at"] >= summary["started_at"]

    got = s3.get_object(Bucket=PIPELINE_REPORTS, Key="jobs/html-job/report.html")
    assert got["ContentType"].startswith("text/html")
    html = got["Body"].read().decode()
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    assert (card(html, "objects"), card(html, "copied"), card(html, "failed")) == (
        str(objects),
        str(copied),
        str(MAX_ITEMS_PER_BATCH),
    )
    assert ">PARTIAL<" in html and "Ferry job html-job" in html
    assert f"Failures ({MAX_ITEMS_PER_BATCH})" in html
    assert "s3://src/in/050.txt" in html and "cannot process the batch holding in/050.txt" in html
    assert html.count('<td class="key">') == MAX_ITEMS_PER_BATCH
    assert f"s3://{PIPELINE_REPORTS}/jobs/html-job/failures.jsonl" in html
    assert EXTERNAL.findall(html) == []

    png = tmp_path / "report.png"
    screenshot(page, png)
    image = read_png(png)
    colours = image.colours()
    assert len(colours) > 50
    assert image.share_not_near((0xF4, 0xF6, 0xF9)) > 0.05
    for outcome in ("copied", "failed"):
        assert colours[hex_colour(OUTCOME_COLOURS[outcome])] > 100, outcome
