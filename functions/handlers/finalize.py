"""Lambda: write the job's report, set its status, return its summary."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from ferry.pipeline.jobs import finalize

from .runtime import logger, metrics, services, tag_logs, tracer


@logger.inject_lambda_context(log_event=False, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    tag_logs(event)
    summary = finalize(event, services())
    metrics.add_metric(name=f"Jobs{summary['status'].title()}", unit=MetricUnit.Count, value=1)
    logger.info("job finished", extra={"summary": summary})
    return summary
