"""Archived sources (Glacier, Deep Archive, archived Intelligent-Tiering) are never attempted blindly.

A copy of an archived object fails with InvalidObjectState, so Ferry reports it as
`skipped: needs restore`, or starts the restore the caller asked for and reports `pending`.
"""

from __future__ import annotations

from typing import Any

from ferry.engine.proofs.source import SourceInfo
from ferry.engine.run.outcome import WOULD_RESTORE, Outcome
from ferry.errors import describe, error_code
from ferry.models import RESTORE_TIERS, CopyPolicy, Status


def archived_outcome(client: Any, info: SourceInfo, policy: CopyPolicy) -> Outcome | None:
    """None when the object can be read now; otherwise what to report for it."""
    state = info.archive_state
    if state is None:
        return None
    where = info.head.get("ArchiveStatus") or info.storage_class
    if state == "restoring":
        return Outcome(
            Status.PENDING,
            "restore",
            reason=f"restoring: a restore from {where} is in progress; run again when it completes",
        )
    if policy.restore is None:
        return Outcome(
            Status.SKIPPED,
            "restore",
            reason=f"needs restore: the object is in {where}; run with --restore bulk|standard|expedited",
        )
    if policy.dry_run:
        return Outcome(
            Status.PENDING,
            "restore",
            reason=f"{WOULD_RESTORE} a {policy.restore} restore from {where}",
        )
    return _request_restore(client, info, policy, where)


def _request_restore(client: Any, info: SourceInfo, policy: CopyPolicy, where: str) -> Outcome:
    tier = RESTORE_TIERS[policy.restore or "bulk"]
    if info.head.get("ArchiveStatus"):
        request: dict[str, Any] = {}  # Intelligent-Tiering archive tiers take neither days nor tier
    else:
        request = {"Days": policy.restore_days, "GlacierJobParameters": {"Tier": tier}}
    args = info.version_args()
    try:
        client.restore_object(Bucket=info.obj.bucket, Key=info.obj.key, RestoreRequest=request, **args)
    except Exception as error:
        if error_code(error) == "RestoreAlreadyInProgress":
            return Outcome(
                Status.PENDING, "restore", reason=f"restoring: a restore from {where} is in progress"
            )
        reason = describe(
            error, side="source", action="s3:RestoreObject", bucket=info.obj.bucket, key=info.obj.key
        )
        return Outcome(Status.FAILED, "restore", reason=reason)
    return Outcome(
        Status.PENDING,
        "restore",
        reason=f"restoring: {tier} restore from {where} requested for {policy.restore_days} days; run again when it completes",
    )
