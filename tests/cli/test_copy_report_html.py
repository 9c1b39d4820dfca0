"""`ferry copy --report-html FILE` from a real run against versitygw: mixed sizes, a multipart
object and an object the destination cannot store, rendered in headless Chromium."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from test_cli import ferry

from ferry.cli.shared.parsing import EXIT_FAILED
from ferry.reports.report_html import OUTCOME_COLOURS
from report_render import EXTERNAL, hex_colour, read_png, screenshot

MiB = 1024 * 1024
SIZES = {"empty": 0, "tiny.txt": 10, "small.txt": 1000, "medium.bin": 100 * 1024, "large.bin": MiB}
MULTIPART = "multipart/twenty.bin"  # 8 + 8 + 4 MiB parts
# versitygw stores objects as files: with a file `clash` in the destination, a copy to
# `clash/inside.txt` needs `clash` to be a directory and fails: a real, per-object failure.
CLASH = "clash/inside.txt"


def seed(server, src: str, dst: str) -> None:
    for key, size in SIZES.items():
        server.client.put_object(Bucket=src, Key=key, Body=os.urandom(size))
    upload = server.client.create_multipart_upload(Bucket=src, Key=MULTIPART)
    parts = []
    for number, size in enumerate([8 * MiB, 8 * MiB, 4 * MiB], start=1):
        etag = server.client.upload_part(
            Bucket=src, Key=MULTIPART, UploadId=upload["UploadId"], PartNumber=number, Body=os.urandom(size)
        )["ETag"]
        parts.append({"PartNumber": number, "ETag": etag})
    server.client.complete_multipart_upload(
        Bucket=src, Key=MULTIPART, UploadId=upload["UploadId"], MultipartUpload={"Parts": parts}
    )
    server.client.put_object(Bucket=src, Key=CLASH, Body=b"cannot land")
    server.client.put_object(Bucket=dst, Key="clash", Body=b"a file where a folder would go")


def card(html: str, label: str) -> str:
    found = re.search(rf'<div class="l">{label}</div><div class="n">([^<]*)</div>', html)
    assert found, f"no {label} card"
    return found.group(1)


def test_copy_writes_an_html_report_that_renders_with_the_runs_counts(versitygw, vgw_buckets, tmp_path: Path):
    src, dst = vgw_buckets
    seed(versitygw, src, dst)
    report, page = tmp_path / "report.jsonl", tmp_path / "report.html"

    run = ferry(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url,
        "--report", str(report), "--report-html", str(page), "--quiet",
    )  # fmt: skip

    assert run.returncode == EXIT_FAILED, run.stdout + run.stderr  # one object failed
    summary = json.loads(report.read_text().splitlines()[-1])["summary"]
    objects = len(SIZES) + 2
    assert (summary["objects"], summary["copied"], summary["failed"]) == (objects, objects - 1, 1), run.stdout
    html = page.read_text(encoding="utf-8")
    # The counts, sizes, strategies and the failure, as the run's own JSON report has them.
    assert (card(html, "objects"), card(html, "copied"), card(html, "failed")) == (
        str(objects),
        str(objects - 1),
        "1",
    )
    assert ">PARTIAL<" in html and "Failures (1)" in html
    assert f"s3://{src}/{CLASH}" in html
    assert summary["bytes"]["copied"] == summary["bytes_copied"] == sum(SIZES.values()) + 20 * MiB
    sizes = summary["sizes"]
    assert sum(s["objects"] for s in sizes) == objects - 1
    assert {"min": 16 * MiB, "max": 32 * MiB - 1, "objects": 1} in sizes  # the multipart object
    assert {"min": 0, "max": 0, "objects": 1} in sizes
    assert sum(summary["strategies"].values()) == sum(summary["verified_by"].values()) == objects - 1
    for name, count in summary["strategies"].items():
        assert re.search(
            rf"<td class=\"name\">{re.escape(name)}</td>.*?<td class=\"v\">{count}</td>", html
        ), name
    assert sum(summary["timeline"]["objects"]) == objects
    assert sum(summary["timeline"]["bytes"]) == summary["bytes_copied"]
    assert html.count("<svg") == 3  # objects and bytes over time, sizes
    assert EXTERNAL.findall(html) == []

    png = tmp_path / "report.png"
    screenshot(page, png)
    image = read_png(png)
    colours = image.colours()
    assert len(colours) > 50
    assert image.share_not_near((0xF4, 0xF6, 0xF9)) > 0.05
    for outcome in ("copied", "failed"):
        assert colours[hex_colour(OUTCOME_COLOURS[outcome])] > 100, outcome


def test_an_unwritable_html_report_path_stops_before_copying(versitygw, vgw_buckets, tmp_path: Path):
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="a", Body=b"a")
    run = ferry(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url,
        "--report-html", str(tmp_path / "no" / "report.html"),
    )  # fmt: skip
    assert run.returncode == 1
    assert "cannot write the HTML report" in run.stderr and "Traceback" not in run.stderr
    assert versitygw.keys(dst) == []
