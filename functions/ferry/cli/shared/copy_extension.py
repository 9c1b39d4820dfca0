"""How a command built on `ferry copy` adds its own work around the copy (`ferry sync`'s
deletes, `ferry copy --all-versions`' histories): `run_copy` calls an extension at five points, and does everything else as for a
plain copy (checks, clients, reports, progress, summary, exit code); after the copies it hands
over where they ended (`CopyEnd`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from ferry.cli.shared.report import ReportWriter, Summary
from ferry.engine.strategies.copier import Copier
from ferry.filters import Filters
from ferry.jobspec import JobOptions
from ferry.models import CopyResult, SourceObject, Target
from ferry.s3.listing import S3Url

Pair = tuple[SourceObject, Target]


@dataclass(frozen=True)
class CopySides:
    """The two sides of a copy once every check passed: what an extension works with."""

    src: S3Url
    dst: S3Url
    source_client: Any
    dest_client: Any
    options: JobOptions
    filters: Filters


@dataclass(frozen=True)
class CopyEnd:
    """Where the copies ended, for an extension's own work after them: the summary to count its
    work in, the report to write it to, the first failures (its own are added there), why the
    run stopped (None: it went to the end) and, with `-v`, where each of its objects' lines go."""

    summary: Summary
    report: ReportWriter | None
    failures: list[CopyResult]
    stopped: str | None
    say: Callable[[str], None] | None = None


class CopyExtension(Protocol):
    """What a command built on `ferry copy` adds around its copy (`ferry sync`'s deletes)."""

    def before_copy(self, sides: CopySides) -> None:
        """After every check, before anything is written; raises ConfigError to refuse."""

    def pairs(self, pairs: Iterator[Pair]) -> Iterator[Pair]:
        """The pairs to copy, as the extension wants them."""

    def on_result(self, result: CopyResult) -> None:
        """Each copy's result, as it comes."""

    def copy(self, copier: Copier, pairs: Iterator[Pair], on_result: Callable[[CopyResult], None]) -> None:
        """The copy itself (a plain copy: `copier.copy_batch`); every result to `on_result`."""

    def after_copy(self, end: CopyEnd) -> str | None:
        """After the copies: its own work, counted in `end.summary` (and with `-v`, each of its
        objects' line given to `end.say`); a sentence for stderr if it could not do it (the
        command then exits 2)."""
