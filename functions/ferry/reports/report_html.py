"""A job's report as one self-contained HTML page: summary, throughput over time, sizes,
strategies and verification, failures. Inline CSS and inline SVG only: the file opens with no
network (no script, no font, no image, no link to fetch). Every value from the report is
escaped, since keys and reasons are whatever the bucket and the server said.

`render_report_html(report)` takes a plain dict, the JSON report plus the fields of
ferry.reports.report_stats. Every field is optional except the counts; missing parts are left out:

    title, job_id, status (SUCCEEDED | PARTIAL | FAILED; derived from the counts if absent)
    source, destination          "s3://..." or {"bucket": ..., "prefix": ...}
    objects, copied, skipped, failed, pending, bytes_copied              ints
    bytes                        {"copied"|"skipped"|"failed"|"pending": bytes}
    seconds, bytes_per_second, started_at, finished_at                   numbers / ISO 8601
    strategies, verified_by      {name: objects}
    degradations                 [sentence, ...]
    timeline                     {"start", "bucket_seconds", "objects": [..], "bytes": [..]}
    sizes                        [{"min": bytes, "max": bytes, "objects": n}, ...]
    failures                     [{"key", "reason", "bucket"?, "version_id"?}, ...] (first N)
    failures_more                failures not listed (default: failed - len(failures))
    failures_report              where the full list is (a path or s3:// URL, shown as text)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from html import escape
from typing import Any

from ferry.limits import format_size

FAILURES_SHOWN = 50
OUTCOME_COLOURS = {"copied": "#2e9e5b", "skipped": "#7a8fa6", "failed": "#d64545", "pending": "#e0a030"}
DELETED_COLOUR = "#8a5cd6"  # a sync's deletes, shown only in a report that counts them
STATUS_COLOURS = {
    "SUCCEEDED": "#2e9e5b",
    "PARTIAL": "#e0a030",
    "FAILED": "#d64545",
    "MATCH": "#2e9e5b",
    "DIFFER": "#d64545",
    "STOPPED": "#e0a030",
}
# `ferry check`'s verdicts, as its summary names them, and their colours.
VERDICT_COLOURS = {
    "identical": "#2e9e5b",
    "different": "#d64545",
    "missing_on_destination": "#e0a030",
    "missing_on_source": "#8a5cd6",
    "unreadable": "#5b6878",
}
CHART_WIDTH, CHART_HEIGHT = 1040, 200

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2733;
  background:#f4f6f9;margin:0;padding:24px}
main{max-width:1100px;margin:0 auto}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:0 0 12px}
.sub{color:#5b6878;margin-bottom:18px;overflow-wrap:anywhere}
.badge{display:inline-block;color:#fff;border-radius:4px;padding:2px 10px;font-size:14px;
  font-weight:600;vertical-align:middle;margin-left:8px}
section{background:#fff;border:1px solid #dde3ea;border-radius:8px;padding:18px 20px;margin:0 0 18px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(118px,1fr));gap:10px}
.card{border:1px solid #e3e8ee;border-left:6px solid #9aa7b5;border-radius:6px;padding:10px 12px}
.card .n{font-size:20px;font-weight:700;white-space:nowrap}.card .l{color:#5b6878;font-size:13px}
.split{display:flex;height:18px;border-radius:4px;overflow:hidden;margin:16px 0 6px;background:#e9edf2}
.legend span{margin-right:16px;font-size:13px;color:#5b6878}
.dot{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px}
.notes li{color:#7a4b00}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #e9edf2;vertical-align:top}
th{font-size:13px;color:#5b6878;font-weight:600}
td.key{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px;overflow-wrap:anywhere;width:42%}
.bars td.v{width:70px;text-align:right;font-variant-numeric:tabular-nums}
.bars td.name{white-space:nowrap}
.bar{height:14px;border-radius:3px;background:#3b7dd8;min-width:2px}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:18px}
.muted{color:#5b6878;font-size:13px}
svg text{font:11px system-ui,sans-serif;fill:#5b6878}
"""


def render_report_html(report: Mapping[str, Any]) -> str:
    """The whole page for one job's report (see the module docstring for the fields)."""
    title = str(report.get("title") or _default_title(report))
    parts = [
        _header(report, title),
        _summary(report),
        _timeline(report.get("timeline")),
        _sizes(report.get("sizes")),
        _how(report),
        _failures(report),
    ]
    body = "\n".join(p for p in parts if p)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head>\n"
        f"<body><main>\n{body}\n</main></body></html>\n"
    )


def render_check_html(report: Mapping[str, Any]) -> str:
    """`ferry check`'s page: the verdict counts, the evidence that decided identical keys, and
    the first differences. Fields: source, destination, started_at, finished_at, keys, one
    count per verdict (VERDICT_COLOURS), identical_by {evidence: keys}, match, stopped,
    differences [{"key", "status", "evidence"?, "detail"?}], differences_report."""
    status = "STOPPED" if report.get("stopped") else ("MATCH" if report.get("match") else "DIFFER")
    title = str(report.get("title") or "Ferry check")
    total = max(_int(report, "keys"), 1)
    cards = [_card("keys", f"{_int(report, 'keys'):,}", "", "#3b7dd8")]
    cards += [
        _card(name.replace("_", " "), f"{_int(report, name):,}", "", colour)
        for name, colour in VERDICT_COLOURS.items()
    ]
    split = "".join(
        f'<div title="{n}" style="width:{100 * _int(report, n) / total:.3f}%;background:{c}"></div>'
        for n, c in VERDICT_COLOURS.items()
        if _int(report, n)
    )
    notes = [f"the check stopped: {report['stopped']}"] if report.get("stopped") else []
    notes_html = "".join(f"<li>{escape(n)}</li>" for n in notes)
    parts = [
        _header({**report, "status": status}, title),
        f'<section><h2>Summary</h2><div class="cards">{"".join(cards)}</div>'
        f'<div class="split">{split}</div>'
        + (f'<ul class="notes">{notes_html}</ul>' if notes else "")
        + "</section>",
        _how_identical(report.get("identical_by")),
        _differences(report),
    ]
    body = "\n".join(p for p in parts if p)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head>\n"
        f"<body><main>\n{body}\n</main></body></html>\n"
    )


def _how_identical(identical_by: Mapping[str, Any] | None) -> str:
    table = _count_table(
        "Evidence", "identical keys per evidence (size alone is not proof of the same bytes)", identical_by
    )
    return f"<section>{table}</section>" if table else ""


def _differences(report: Mapping[str, Any]) -> str:
    listed = list(report.get("differences") or [])
    if not listed:
        return ""
    rows = "".join(
        f'<tr><td class="key">{escape(str(d.get("key", "")))}</td><td>{escape(str(d.get("status", "")))}</td>'
        f"<td>{escape(': '.join(str(d[k]) for k in ('evidence', 'detail') if d.get(k)))}</td></tr>"
        for d in listed
    )
    shown_total = sum(_int(report, n) for n in VERDICT_COLOURS if n != "identical")
    more = shown_total - len(listed)
    where = report.get("differences_report")
    note = f"… and {more:,} more" if more > 0 else ""
    if where:
        note += f"{'; ' if note else ''}every key is in {where}"
    return (
        f"<section><h2>Differences ({shown_total:,})</h2><table><tr><th>key</th><th>verdict</th>"
        f"<th>evidence</th></tr>{rows}</table>"
        + (f'<p class="muted">{escape(note)}</p>' if note else "")
        + "</section>"
    )


# -- pieces -------------------------------------------------------------------------------------


def _default_title(report: Mapping[str, Any]) -> str:
    return f"Ferry job {report['job_id']}" if report.get("job_id") else "Ferry copy report"


def _status(report: Mapping[str, Any]) -> str:
    """The report's status, or the pipeline's rule applied to the counts."""
    if report.get("status"):
        return str(report["status"])
    if _int(report, "failed") == 0 and _int(report, "pending") == 0:
        return "SUCCEEDED"
    return "FAILED" if _int(report, "copied") + _int(report, "skipped") == 0 else "PARTIAL"


def _header(report: Mapping[str, Any], title: str) -> str:
    status = _status(report)
    colour = STATUS_COLOURS.get(status, "#5b6878")
    route = " → ".join(_location(report.get(side)) for side in ("source", "destination") if report.get(side))
    when = " to ".join(str(report[k]) for k in ("started_at", "finished_at") if report.get(k))
    sub = " · ".join(escape(s) for s in (route, when) if s)
    return (
        f'<h1>{escape(title)}<span class="badge" style="background:{colour}">{escape(status)}</span></h1>'
        f'<div class="sub">{sub}</div>'
    )


def _location(value: Any) -> str:
    if isinstance(value, Mapping):
        if value.get("manifest"):
            return f"manifest {_location(value['manifest'])}"
        if value.get("bucket"):
            return f"s3://{value['bucket']}/{value.get('prefix') or value.get('key') or ''}"
    return str(value)


def _summary(report: Mapping[str, Any]) -> str:
    sizes = report.get("bytes") or {"copied": _int(report, "bytes_copied")}
    cards = [
        _card(
            "objects", f"{_int(report, 'objects'):,}", format_size(sum(map(int, sizes.values()))), "#3b7dd8"
        )
    ]
    outcomes = _outcomes(report)
    for outcome, colour in outcomes.items():
        size = sizes.get(outcome)
        cards.append(_card(outcome, f"{_int(report, outcome):,}", format_size(size) if size else "", colour))
    seconds = report.get("seconds")
    if seconds is not None:
        rate = report.get("bytes_per_second")
        if rate is None and seconds:
            rate = _int(report, "bytes_copied") / float(seconds)
        objects_rate = _int(report, "objects") / float(seconds) if seconds else 0.0
        cards.append(_card("duration", _duration(float(seconds)), "", "#5b6878"))
        cards.append(
            _card("throughput", f"{format_size(rate or 0)}/s", f"{objects_rate:,.1f} objects/s", "#5b6878")
        )
    total = max(_int(report, "objects"), 1)
    split = "".join(
        f'<div title="{o}" style="width:{100 * _int(report, o) / total:.3f}%;background:{c}"></div>'
        for o, c in outcomes.items()
        if _int(report, o)
    )
    legend = "".join(
        f'<span><i class="dot" style="background:{c}"></i>{o} {100 * _int(report, o) / total:.1f}%</span>'
        for o, c in outcomes.items()
    )
    notes = [str(n) for n in report.get("degradations") or []]
    if (report.get("concurrency") or {}).get("note"):  # Prepare lowered the Map's MaxConcurrency
        notes.insert(0, str(report["concurrency"]["note"]))
    if report.get("map_error"):
        error = report["map_error"]
        said = ": ".join(str(error.get(k)) for k in ("error", "cause") if error.get(k))
        notes.insert(0, f"the Distributed Map stopped: {said}")
    read, objects = report.get("objects_read_by_map"), report.get("objects")
    if read is not None and objects is not None and read != objects:
        notes.insert(0, f"the counts do not add up: the Map read {read} objects, the ledger holds {objects}")
    notes_html = (
        '<h2 style="margin-top:16px">Notes</h2><ul class="notes">'
        + "".join(f"<li>{escape(n)}</li>" for n in notes)
        + "</ul>"
        if notes
        else ""
    )
    return (
        f'<section><h2>Summary</h2><div class="cards">{"".join(cards)}</div>'
        f'<div class="split">{split}</div><div class="legend">{legend}</div>{notes_html}</section>'
    )


def _outcomes(report: Mapping[str, Any]) -> dict[str, str]:
    """Each outcome the report counts, with its colour: a sync's report counts deletes too."""
    return {**OUTCOME_COLOURS, "deleted": DELETED_COLOUR} if "deleted" in report else dict(OUTCOME_COLOURS)


def _card(label: str, number: str, detail: str, colour: str) -> str:
    return (
        f'<div class="card" style="border-left-color:{colour}"><div class="l">{escape(label)}</div>'
        f'<div class="n">{escape(number)}</div><div class="l">{escape(detail) or "&nbsp;"}</div></div>'
    )


def _timeline(timeline: Mapping[str, Any] | None) -> str:
    if not timeline or not timeline.get("objects"):
        return ""
    width = int(timeline.get("bucket_seconds") or 1)
    objects = [int(v) for v in timeline["objects"]]
    nbytes = [int(v) for v in timeline.get("bytes") or [0] * len(objects)]

    def at(i: int) -> str:
        return "+" + _duration(i * width)

    per = f"per {_duration(width)}"
    start = f" from {escape(str(timeline['start']))}" if timeline.get("start") else ""
    return (
        f'<section><h2>Throughput over time</h2><div class="muted">objects finished and bytes copied '
        f"{escape(per)}{start}</div>"
        f"<h3 class=muted>objects {escape(per)}</h3>{_bar_chart(objects, at, lambda v: f'{v:,.0f}', '#3b7dd8')}"
        f"<h3 class=muted>bytes copied {escape(per)}</h3>{_bar_chart(nbytes, at, format_size, '#2e9e5b')}"
        "</section>"
    )


def _sizes(sizes: Sequence[Mapping[str, Any]] | None) -> str:
    if not sizes:
        return ""
    counts = [int(s.get("objects", 0)) for s in sizes]

    def label(i: int) -> str:
        low = int(sizes[i].get("min", 0))
        return "0 B" if low == 0 and int(sizes[i].get("max", 0)) == 0 else f"≥{format_size(low)}"

    return (
        '<section><h2>Size distribution</h2><div class="muted">copied and skipped objects per size '
        f"(log scale buckets: each holds sizes up to twice its lower bound)</div>"
        f"{_bar_chart(counts, label, lambda v: f'{v:,.0f}', '#8a5cd6', every=1)}</section>"
    )


def _how(report: Mapping[str, Any]) -> str:
    tables = [
        _count_table("Strategies", "copied objects per copy strategy", report.get("strategies")),
        _count_table("Verification", "copied objects per verification method", report.get("verified_by")),
    ]
    if not any(tables):
        return ""
    return f'<section><div class="cols">{"".join(t or "<div></div>" for t in tables)}</div></section>'


def _count_table(title: str, what: str, counts: Mapping[str, Any] | None) -> str:
    if not counts:
        return ""
    rows = sorted(((str(k), int(v)) for k, v in counts.items()), key=lambda kv: (-kv[1], kv[0]))
    top = max(v for _, v in rows) or 1
    body = "".join(
        f'<tr><td class="name">{escape(name)}</td><td style="width:50%"><div class="bar" '
        f'style="width:{100 * value / top:.1f}%"></div></td><td class="v">{value:,}</td></tr>'
        for name, value in rows
    )
    return f'<div><h2>{escape(title)}</h2><div class="muted">{escape(what)}</div><table class="bars">{body}</table></div>'


def _failures(report: Mapping[str, Any]) -> str:
    failed = _int(report, "failed")
    listed = list(report.get("failures") or [])[:FAILURES_SHOWN]
    if not failed and not listed:
        return ""
    more = report.get("failures_more")
    more = failed - len(listed) if more is None else int(more)
    rows = "".join(
        f'<tr><td class="key">{escape(_failed_object(f))}</td><td>{escape(str(f.get("reason") or ""))}</td></tr>'
        for f in listed
    )
    where = report.get("failures_report")
    note = ""
    if more > 0:
        note = f"… and {more:,} more failed object{'s' if more != 1 else ''}"
        note += f": the full list is in {where}" if where else ""
    elif where:
        note = f"the full list is also in {where}"
    return (
        f"<section><h2>Failures ({failed:,})</h2><table><tr><th>object</th><th>reason</th></tr>{rows}</table>"
        + (f'<p class="muted">{escape(note)}</p>' if note else "")
        + "</section>"
    )


def _failed_object(failure: Mapping[str, Any]) -> str:
    key = str(failure.get("key") or failure.get("source_key") or "")
    bucket = failure.get("bucket") or failure.get("source_bucket")
    text = f"s3://{bucket}/{key}" if bucket else key
    return f"{text} (version {failure['version_id']})" if failure.get("version_id") else text


# -- an SVG bar chart ---------------------------------------------------------------------------


def _bar_chart(
    values: Sequence[int],
    label: Callable[[int], str],
    fmt: Callable[[float], str],
    colour: str,
    *,
    every: int | None = None,
) -> str:
    """Vertical bars, a scale on the left, labels under some bars (every `every`th, default
    about eight across)."""
    left, bottom, top_pad = 70, 22, 8
    width, height = CHART_WIDTH, CHART_HEIGHT
    plot_w, plot_h = width - left - 10, height - bottom - top_pad
    peak = max(values) if values else 0
    scale = plot_h / peak if peak else 0.0
    slot = plot_w / max(len(values), 1)
    gap = min(2.0, slot * 0.15)
    step = every or max(1, round(len(values) / 8))
    if every and slot < 64:
        step = math.ceil(64 / slot)  # labels need about 64 px each
    shapes: list[str] = []
    for fraction in (0.0, 0.5, 1.0):
        y = top_pad + plot_h * (1 - fraction)
        shapes.append(f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e8ee"/>')
        shapes.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(fmt(peak * fraction))}</text>'
        )
    for i, value in enumerate(values):
        h = value * scale
        x = left + i * slot + gap / 2
        shapes.append(
            f'<rect x="{x:.1f}" y="{top_pad + plot_h - h:.1f}" width="{max(slot - gap, 0.5):.1f}" '
            f'height="{h:.1f}" fill="{colour}"><title>{escape(label(i))}: {escape(fmt(value))}</title></rect>'
        )
        if i % step == 0:
            shapes.append(
                f'<text x="{x + (slot - gap) / 2:.1f}" y="{height - 6}" text-anchor="middle">'
                f"{escape(label(i))}</text>"
            )
    return (
        f'<svg viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'preserveAspectRatio="xMinYMin meet">{"".join(shapes)}</svg>'
    )


# -- small helpers ------------------------------------------------------------------------------


def _int(report: Mapping[str, Any], name: str) -> int:
    try:
        return int(report.get(name) or 0)
    except (TypeError, ValueError):
        return 0


def _duration(seconds: float) -> str:
    if seconds < 10 and seconds != int(seconds):
        return f"{seconds:.1f}s"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts: Iterable[tuple[int, str]] = ((days, "d"), (hours, "h"), (minutes, "m"), (secs, "s"))
    return " ".join(f"{n}{u}" for n, u in parts if n)
