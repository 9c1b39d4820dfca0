"""Counts that add up: every object of a copy or a job in exactly one of copied, skipped,
failed, pending. One type for the CLI's summary and the pipeline ledger's batch counts, so the
two can never disagree on what an outcome counts as. And how a count is said (`plural`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ferry.models import CopyResult, Status


@dataclass
class Counts:
    """Every object in exactly one of copied, skipped, failed, pending: counts that add up."""

    copied: int = 0
    skipped: int = 0
    failed: int = 0
    pending: int = 0
    bytes_copied: int = 0

    def count(self, result: CopyResult) -> None:
        if result.status == Status.COPIED:
            self.copied += 1
            self.bytes_copied += result.bytes
        elif result.status == Status.SKIPPED:
            self.skipped += 1
        elif result.status == Status.FAILED:
            self.failed += 1
        else:
            self.pending += 1

    @property
    def total(self) -> int:
        return self.copied + self.skipped + self.failed + self.pending

    def counts(self) -> dict[str, int]:
        return {
            "objects": self.total,
            "copied": self.copied,
            "skipped": self.skipped,
            "failed": self.failed,
            "pending": self.pending,
            "bytes_copied": self.bytes_copied,
        }


def plural(count: int, noun: str, *, thousands: bool = False) -> str:
    """`1 object`, `2 objects`, `0 objects`, `3 batches`: a count and its noun, in the number
    the count asks for. Every message that says how many uses it, so none says `1 objects`.
    Nouns ending in s, x, z, ch or sh take -es; `thousands` writes 1,000,000."""
    number = f"{count:,}" if thousands else str(count)
    if count == 1:
        return f"{number} {noun}"
    ending = "es" if noun.endswith(("s", "x", "z", "ch", "sh")) else "s"
    return f"{number} {noun}{ending}"
