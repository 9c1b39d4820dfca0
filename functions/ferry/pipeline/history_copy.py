"""The workers' half of an all_versions job (pipeline/history_keys.py says how the keys reach
them): each key's history listed again on both sides and copied whole by the engine
(engine/versions/version_copy.copy_history), so one key's versions are written by one worker, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ferry.engine.run.deadlines import deadline_in, due
from ferry.engine.strategies.copier import Copier
from ferry.engine.versions.version_copy import KEYS_AT_ONCE, copy_history
from ferry.errors import ConfigError
from ferry.models import CopyResult, Status
from ferry.pipeline.items import ItemOutcome, Planned
from ferry.pipeline.recording import result_of
from ferry.s3.version_listing import key_history


def copy_key_histories(
    copier: Copier,
    planned: list[Planned],
    *,
    deadline: float | None,
    dry_run: bool,
    on_result: Callable[[CopyResult], None] | None = None,
) -> list[ItemOutcome]:
    """Copy each planned key's whole history, KEYS_AT_ONCE keys side by side; outcomes in the
    planned order. A key not started before the deadline is handed over untouched."""

    def one(plan: Planned) -> ItemOutcome:
        if due(deadline):
            return ItemOutcome([], handed_over=True)
        outcome = copy_one_history(copier, plan, deadline=deadline, dry_run=dry_run)
        if on_result and not outcome.handed_over:
            for result in outcome.results:
                on_result(result)
        return outcome

    with ThreadPoolExecutor(KEYS_AT_ONCE, thread_name_prefix="ferry-history") as pool:
        return list(pool.map(one, planned))


def copy_one_history(copier: Copier, plan: Planned, *, deadline: float | None, dry_run: bool) -> ItemOutcome:
    """List the key's history on both sides now (not from the manifest: versions may have come
    since), then copy what the destination lacks (engine/versions/version_copy.copy_history)."""
    obj, target = plan.obj, plan.target
    assert obj is not None and target is not None
    ctx = copier.ctx
    try:
        source = key_history(ctx.source_client, obj.bucket, obj.key)
        destination = key_history(ctx.dest_client, target.bucket, target.key, side="destination")
    except ConfigError as error:  # a refused listing, named with its side and permission
        return ItemOutcome([result_of(plan, Status.FAILED, f"history not listed: {error}")])
    if not source.versions:
        return ItemOutcome(
            [result_of(plan, Status.SKIPPED, "no versions left at the source since the listing")]
        )
    results = list(
        copy_history(copier, source, obj.bucket, target, destination, dry_run=dry_run, deadline=deadline)
    )
    return ItemOutcome(results, handed_over=any(r.handed_over for r in results))


def copy_history_to_the_end(
    copier: Copier,
    plan: Planned,
    *,
    pass_seconds: float,
    keep_going: Callable[[], bool],
    dry_run: bool,
) -> list[CopyResult] | None:
    """The Fargate task's copy of one large history: passes of `pass_seconds`, each ending at a
    checkpoint, until the key is done; None when asked to stop first (the retry resumes). A
    version copied in an earlier pass is found there by the last one: it is reported as the
    pass that copied it said, not as skipped."""
    copied: dict[str | None, CopyResult] = {}
    while True:
        outcome = copy_one_history(copier, plan, deadline=deadline_in(pass_seconds), dry_run=dry_run)
        if not outcome.handed_over:
            return [
                copied.get(r.source_version_id, r) if r.status == Status.SKIPPED else r
                for r in outcome.results
            ]
        copied.update((r.source_version_id, r) for r in outcome.results if r.status == Status.COPIED)
        if not keep_going():
            return None
