"""What a `ferry run` handed out, so an interrupted job resumes without redoing anything.

On AWS the Map Run keeps its children's items and a redrive re-runs only the unfinished
ones. On one machine this journal does that: each batch's items are appended as it is
handed out (one JSON line), so a resume replays exactly those batches (each picks up from
its ledger records: passes recorded are not run again, objects recorded not copied again)
and then reads on from where the reader stopped: after the last listed key (a listing is in
key order, so keys added meanwhile before it are not mixed in) or after the rows already
read (a manifest). The file sits beside the job's local report.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ferry.errors import ConfigError


class RunJournal:
    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def for_job(cls, root: Path, job_id: str) -> RunJournal:
        return cls(root / "jobs" / job_id / "handed-out.jsonl")

    def start(self) -> None:
        """A new job's journal, empty."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("", encoding="utf-8")

    def handed_out(self, items: list[Any]) -> None:
        """Record one batch before it runs: flushed and synced, so a crash right after keeps it."""
        with self.path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(items, ensure_ascii=False, separators=(",", ":")) + "\n")
            file.flush()
            os.fsync(file.fileno())

    def batches(self) -> Iterator[list[Any]]:
        """The batches handed out so far, in order; a last line cut short by a crash is dropped
        (its batch never started: it was synced before the batch ran)."""
        if not self.path.exists():
            raise ConfigError(
                f"cannot resume: {str(self.path)!r} (what the run handed out) is missing; "
                "resume with the same --report-dir the job ran with"
            )
        with self.path.open(encoding="utf-8") as file:
            for line in file:
                try:
                    yield json.loads(line)
                except ValueError:
                    if line.endswith("\n"):
                        raise ConfigError(f"cannot resume: {str(self.path)!r} is damaged") from None
                    return
