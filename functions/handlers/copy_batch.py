"""Lambda: one pass over a batch, until the deadline the Lambda's remaining time sets."""

from __future__ import annotations

from typing import Any

from ferry.pipeline.batches import copy_batch, pass_event

from .runtime import logger, metrics, publish_counts, publish_lags, services, tag_logs, tracer


@logger.inject_lambda_context(log_event=False, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    event = dict(pass_event(event))  # a first pass gets the Distributed Map's {Items, BatchInput}
    tag_logs(event)
    result = copy_batch(event, services(), context.get_remaining_time_in_millis())
    publish_counts(result.pop("pass_counts"))
    publish_lags(result.pop("replication_lag", {}))
    return result
