"""How a command built on `ferry copy` adds its own work around the copy (`ferry sync`'s
deletes, `ferry copy --all-versions`' histories): `run_copy` calls an extension at five points, and does everything else as for a
plain copy (checks, clients, reports, progress, summary, exit code)."""

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

    def after_copy(
        self,
        summary: Summary,
        report: ReportWriter | None,
        failures: list[CopyResult],
        stopped: str | None,
        say: Callable[[str], None] | None = None,
    ) -> str | None:
        """After the copies: its own work, counted in `summary` (and with `-v`, each of its
        objects' line given to `say`); a sentence for stderr if it could not do it (the command
        then exits 2)."""
