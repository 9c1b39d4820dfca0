"""Lambda: one run of an all_versions job's version listing (the parent's ListVersions loop)."""

from __future__ import annotations

from typing import Any

from ferry.pipeline.history_keys import list_versions_step

from .runtime import logger, services, tag_logs, tracer


@logger.inject_lambda_context(log_event=False, clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The job with its listing moved on; an error (the source refusing a page, too many runs)
    goes to the state's Catch, which settles the job FAILED with it."""
    tag_logs(event)
    job = list_versions_step(event["job"], services(), remaining_ms=context.get_remaining_time_in_millis())
    listing = job["histories"]
    logger.info(
        "versions listed",
        extra={k: listing[k] for k in ("runs", "keys", "versions", "bytes", "done")},
    )
    return job
