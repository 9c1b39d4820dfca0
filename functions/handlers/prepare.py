"""Lambda: validate the job spec, check access, create the job record (before any fan-out)."""

from __future__ import annotations

from typing import Any

from ferry.errors import ConfigError
from ferry.pipeline.jobs import prepare

from .runtime import logger, services, tracer


@logger.inject_lambda_context(log_event=False, clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    try:
        job = prepare(event, services())
    except ConfigError as error:  # a clear sentence for the execution's cause, not a traceback
        logger.warning("job rejected: %s", error)
        return {"rejected": str(error)}
    logger.append_keys(job_id=job["job_id"])
    logger.info("job accepted", extra={"reader": job["reader"]})
    return job
