"""Where a job's report goes: the report bucket on AWS (`job_reports.JobReports`), or a folder
on this machine for `ferry run` (`LocalReports`), with the same keys and the same files:

    <root>/jobs/<job id>/objects/<batch key>.<attempt>.jsonl
    <root>/jobs/<job id>/summary.json
    <root>/jobs/<job id>/failures.jsonl
    <root>/jobs/<job id>/histories/...       (an all_versions job's keys: pipeline/history_keys.py)
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from ferry.models import CopyResult
from ferry.pipeline.job_reports import failed_rows, result_lines
from ferry.pipeline.ledger.contract import Failure


class ReportStore(Protocol):
    """What the pipeline writes a job's report through (see `job_reports.JobReports`)."""

    def url(self, key: str) -> str: ...
    def put_batch(self, job_id: str, batch_key: str, attempt: str, results: Iterable[CopyResult]) -> str: ...
    def delete(self, key: str) -> None: ...
    def rows(self, key: str) -> Iterator[dict[str, Any]]: ...
    def put_jsonl(self, key: str, values: Iterable[Any]) -> None: ...
    def text(self, key: str) -> str: ...
    def put_text(self, key: str, text: str) -> None: ...
    def failed_in(self, key: str, batch_key: str) -> Iterator[Failure]: ...
    def put_final(
        self, job_id: str, summary: Mapping[str, Any], failures: Iterable[Failure]
    ) -> tuple[str, str]: ...
    def put_html(self, job_id: str, page: str) -> str: ...


class LocalReports:
    """A job's report as files under `root` (each written whole, then renamed into place, so a
    crash never leaves half a report where a later run would read it)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def url(self, key: str) -> str:
        return str(self.root / key)

    def put_batch(self, job_id: str, batch_key: str, attempt: str, results: Iterable[CopyResult]) -> str:
        key = f"jobs/{job_id}/objects/{batch_key}.{attempt}.jsonl"
        self._write(key, result_lines(results))
        return key

    def delete(self, key: str) -> None:
        Path(self.url(key)).unlink(missing_ok=True)

    def rows(self, key: str) -> Iterator[dict[str, Any]]:
        with open(self.url(key), encoding="utf-8") as file:
            for line in file:
                if line.strip():
                    yield json.loads(line)

    def failed_in(self, key: str, batch_key: str) -> Iterator[Failure]:
        return failed_rows(self.rows(key), batch_key)

    def put_jsonl(self, key: str, values: Iterable[Any]) -> None:
        self._write(key, (json.dumps(v, ensure_ascii=False) + "\n" for v in values))

    def text(self, key: str) -> str:
        return Path(self.url(key)).read_text(encoding="utf-8")

    def put_text(self, key: str, text: str) -> None:
        self._write(key, [text])

    def put_final(
        self, job_id: str, summary: Mapping[str, Any], failures: Iterable[Failure]
    ) -> tuple[str, str]:
        prefix = f"jobs/{job_id}/"
        failures_key, summary_key = f"{prefix}failures.jsonl", f"{prefix}summary.json"
        self._write(failures_key, (json.dumps(f.to_dict(), ensure_ascii=False) + "\n" for f in failures))
        self._write(summary_key, [json.dumps(summary, indent=2) + "\n"])
        return summary_key, failures_key

    def put_html(self, job_id: str, page: str) -> str:
        """The report as one self-contained page, beside summary.json; returns its key."""
        key = f"jobs/{job_id}/report.html"
        self._write(key, [page])
        return key

    def _write(self, key: str, lines: Iterable[str]) -> None:
        path = Path(self.url(key))
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                file.writelines(lines)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
