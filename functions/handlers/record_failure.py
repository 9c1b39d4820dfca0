"""Lambda: a batch pass or a large object failed for good; record its objects as failed."""

from __future__ import annotations

from typing import Any

from ferry.pipeline.passes import pass_event, record_failure

from .runtime import logger, pass_invocation, publish_counts, services


@pass_invocation(pass_event)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    logger.error("recording a failed batch", extra={"error": event.get("error")})
    result = record_failure(event, services())
    publish_counts(result.pop("pass_counts"))
    return result
