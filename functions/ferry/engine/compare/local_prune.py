"""`ferry sync --delete` with a local folder as DST: the files its source no longer has,
removed one at a time (ferry.local.removal), each result counted as an S3 delete's is.

The extras come from the same walk as an S3 destination's (prune.find_extras), so the same
rules choose them: inside the folder only, after the filters, never Ferry's own partial
downloads, and only regular files (a link, a special file or a folder is no candidate).
"""

from __future__ import annotations

from collections.abc import Sequence

from ferry.engine.compare.prune import DeleteResult, Extra
from ferry.errors import FerryError
from ferry.local.removal import CHANGED, GONE, NOT_A_FILE, REMOVED, remove_file


def delete_local_extras(root: str, extras: Sequence[Extra]) -> list[DeleteResult]:
    """Remove each extra under `root`; one result each, in order. Never raises for one file."""
    return [_delete(root, extra) for extra in extras]


def _delete(root: str, extra: Extra) -> DeleteResult:
    try:
        outcome = remove_file(root, extra.relative_key, extra.size, extra.mtime_ns)
    except FerryError as error:
        return DeleteResult(None, extra.key, "failed", f"not deleted: {error}")
    except OSError as error:
        return DeleteResult(None, extra.key, "failed", f"not deleted: {error.strerror or error}")
    if outcome == REMOVED:
        return DeleteResult(None, extra.key, "deleted")
    assert outcome in (GONE, CHANGED, NOT_A_FILE)
    return DeleteResult(None, extra.key, "skipped", outcome)
