"""The Markdown results page: what was measured, on what, how, and the numbers.

Rendered from plain data so a unit test can check it without running anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .stats import GiB, MiB, Row, fastest, spread_percent


@dataclass
class CaseResult:
    number: int
    title: str
    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None


@dataclass
class ServerResult:
    server: str  # name and version
    sources: dict[str, str] = field(default_factory=dict)  # what each source object looks like
    cases: list[CaseResult] = field(default_factory=list)
    problem: str | None = None


@dataclass
class Page:
    date: str
    machine: list[str]
    tools: dict[str, str]
    settings: list[str]
    servers: list[ServerResult]
    method: list[str]
    argv: str = "make bench"


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f} s" if value < 100 else f"{value:.0f} s"


def number(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def size(value: int | None) -> str:
    if value is None:
        return "-"
    if value >= GiB:
        return f"{value / GiB:.2f} GiB"
    return f"{value / MiB:.0f} MiB"


def spread(row: Row) -> str:
    if row.min_wall is None or row.max_wall is None:
        return "-"
    pct = spread_percent(row)
    return f"{row.min_wall:.2f}-{row.max_wall:.2f} s ({pct:.0f}%)" if pct is not None else "-"


def runs(row: Row) -> str:
    failed = len(row.failures)
    return f"{len(row.good)}" if not failed else f"{len(row.good)} ok, {failed} failed"


# Cases of one large object, measured per GiB rather than per 1,000 objects.
ONE_LARGE_OBJECT = (3, 4, 7)
CPU_CASES = (1, 2, 3, 4)  # the cases whose rows make case 5's table


def case_table(case: CaseResult) -> list[str]:
    per_gib = case.number in ONE_LARGE_OBJECT
    lines = [
        "| tool | setting | runs | median time | spread (min-max) | objects/s | MiB/s | peak RSS | CPU s | "
        + ("CPU s / GiB |" if per_gib else "CPU s / 1,000 objects |"),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in case.rows:
        cpu_rate = row.cpu_per_gib if per_gib else row.cpu_per_1000_objects
        lines.append(
            f"| {row.tool} | {cell(row.setting)} | {runs(row)} | {seconds(row.median_wall)} | {spread(row)} | "
            f"{number(row.objects_per_second, 1 if per_gib else 0)} | {number(row.mib_per_second, 1)} | "
            f"{size(row.peak_rss)} | {number(row.median_cpu, 1)} | {number(cpu_rate, 2)} |"
        )
    return lines


def standing(case: CaseResult) -> str | None:
    """One sentence: Ferry's best row against the best row of any other tool."""
    ferry = fastest([r for r in case.rows if r.tool == "ferry"])
    peer = fastest([r for r in case.rows if not r.tool.startswith("ferry")])
    if ferry is None:
        failed = [r for r in case.rows if r.tool == "ferry" and r.failures]
        why = _oneline(failed[0].failures[0].error) if failed else "no complete run"
        return f"Ferry did not complete this case: {why}"
    if peer is None or ferry.median_wall is None or peer.median_wall is None:
        return None
    ratio = ferry.median_wall / peer.median_wall
    rss = ""
    if ferry.peak_rss and peer.peak_rss:
        rss = f"; peak RSS {size(ferry.peak_rss)} against {size(peer.peak_rss)}"
    if ratio <= 1:
        verdict = f"Ferry is the fastest: {seconds(ferry.median_wall)} ({ferry.setting}) against {peer.tool}'s {seconds(peer.median_wall)} ({peer.setting}), {1 / ratio:.2f}x"
    else:
        verdict = f"Ferry is {ratio:.2f}x slower than the fastest: {seconds(ferry.median_wall)} ({ferry.setting}) against {peer.tool}'s {seconds(peer.median_wall)} ({peer.setting})"
    return verdict + rss + "."


def cpu_table(server: ServerResult) -> list[str]:
    """Case 5: each tool's client CPU per 1,000 small objects and per GiB, from its rows
    at equal concurrency where there is one, else its default."""
    by_case = {c.number: c for c in server.cases if not c.skipped and c.number in CPU_CASES}
    tools: list[str] = []
    for case in by_case.values():
        for row in case.rows:
            if row.tool not in tools:
                tools.append(row.tool)

    def pick(case_number: int, tool: str, per_gib: bool) -> str:
        case = by_case.get(case_number)
        rows = [r for r in case.rows if r.tool == tool and r.good] if case else []
        if not rows:
            return "-"
        row = min(rows, key=lambda r: r.median_cpu or float("inf"))
        value = row.cpu_per_gib if per_gib else row.cpu_per_1000_objects
        return f"{number(value, 2)} ({cell(row.setting)})"

    lines = [
        "| tool | CPU s / 1,000 objects, server-side | CPU s / 1,000 objects, streamed | CPU s / GiB streamed | CPU s / GiB server-side |",
        "| --- | --- | --- | --- | --- |",
    ]
    for tool in tools:
        lines.append(
            f"| {tool} | {pick(1, tool, False)} | {pick(2, tool, False)} | {pick(3, tool, True)} | {pick(4, tool, True)} |"
        )
    return lines


def render(page: Page) -> str:
    out = ["# Ferry benchmarks", ""]
    out.append(f"Measured {page.date} with `{page.argv}`.")
    out.append("")
    out += [f"- {line}" for line in page.machine]
    out.append("- Tools: " + "; ".join(v if v.startswith(k) else f"{k} {v}" for k, v in page.tools.items()))
    out += [f"- {line}" for line in page.settings]
    out += ["", "## How it was measured", ""]
    out += page.method
    for server in page.servers:
        out += ["", f"## Server: {server.server}", ""]
        if server.problem:
            out += [f"Not run: {server.problem}", ""]
            continue
        if server.sources:
            out.append("Source objects: " + "; ".join(f"{k}: {v}" for k, v in server.sources.items()) + ".")
            out.append("")
        for case in server.cases:
            out += [f"### Case {case.number}: {case.title} ({server.server.split()[0]})", ""]
            if case.skipped:
                out += [f"Not run: {case.skipped}", ""]
                continue
            out += case_table(case)
            out.append("")
            verdict = standing(case)
            if verdict:
                out += [f"**{verdict}**", ""]
            for row in case.rows:
                for sample in row.failures[:1]:
                    out.append(f"- {row.tool} ({row.setting}) failed: `{_oneline(sample.error)}`")
                if row.note:
                    out.append(f"- {row.tool} ({row.setting}): {row.note}")
            out += [f"- {note}" for note in case.notes]
            out.append("")
        if any(case.number in CPU_CASES for case in server.cases):
            out += [f"### Case 5: client CPU seconds ({server.server.split()[0]})", ""]
            out += cpu_table(server)
            out += [
                "",
                "Each cell is the tool's lowest-CPU complete row of that case (its setting in brackets).",
            ]
    out += ["", "## Command lines", ""]
    seen: set[str] = set()
    for server in page.servers[:1]:
        for case in server.cases:
            for row in case.rows:
                key = f"{case.number}:{row.tool}:{row.setting}"
                if row.command and key not in seen:
                    seen.add(key)
                    out.append(f"- case {case.number}, {row.tool} ({row.setting}): `{row.command}`")
    out.append("")
    return "\n".join(out)


def cell(text: str) -> str:
    """A table cell: a `|` in a setting (`cat | pipe`) must not split the column."""
    return text.replace("|", "\\|")


def _oneline(text: str | None) -> str:
    return " ".join((text or "").split()).replace("`", "'")[:400]
