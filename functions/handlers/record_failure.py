"""Lambda: a batch pass or a large object failed for good; record its objects as failed."""

from __future__ import annotations

from typing import Any

from ferry.pipeline.passes import pass_event, record_failure

from .runtime import logger, metrics, publish_counts, services, tag_logs, tracer


@logger.inject_lambda_context(log_event=False, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    event = dict(pass_event(event))  # a first pass gets the Distributed Map's {Items, BatchInput}
    tag_logs(event)
    logger.error("recording a failed batch", extra={"error": event.get("error")})
    result = record_failure(event, services())
    publish_counts(result.pop("pass_counts"))
    return result
