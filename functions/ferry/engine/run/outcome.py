"""What a strategy reports back to the engine about one object it handled."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferry.models import Status

# A dry run's results are pending, and their reasons start with what the run would have done:
# the command line counts them by these words ("would copy 2, would skip 1").
WOULD_COPY = "dry run: would copy"
WOULD_RESTORE = "dry run: would request"
WOULD_DELETE = "dry run: would delete"  # ferry sync --delete
WOULD_MARK = "dry run: would add a delete marker"  # --all-versions: a history's delete marker


@dataclass
class Outcome:
    status: Status
    strategy: str
    verified_by: str | None = None
    checksum: str | None = None
    version_id: str | None = None
    reason: str | None = None
    parts_resumed: int = 0
    note: str | None = None
    encryption: str | None = None
    handed_over: bool = False  # stopped for a deadline: a later call (checkpoint or not) finishes it


def written(
    strategy: str,
    response: Mapping[str, Any],
    *,
    verified_by: str,
    checksum: str,
    parts_resumed: int = 0,
    note: str | None = None,
) -> Outcome:
    """An object written and proved: its version and encryption as the write's answer (PutObject
    or CompleteMultipartUpload) says them."""
    return Outcome(
        Status.COPIED,
        strategy,
        verified_by=verified_by,
        checksum=checksum,
        version_id=response.get("VersionId"),
        parts_resumed=parts_resumed,
        note=note,
        encryption=response.get("ServerSideEncryption"),
    )
