"""Lambda: validate the job spec, check access, create the job record (before any fan-out)."""

from __future__ import annotations

import functools
from typing import Any

from ferry.errors import ConfigError
from ferry.pipeline.jobs import prepare
from ferry.quotas.lambda_concurrency import AccountConcurrency, read_account_concurrency

from .runtime import client, logger, services, tracer


@logger.inject_lambda_context(log_event=False, clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    try:
        job = prepare(event, services(), account=account_concurrency)
    except ConfigError as error:  # a clear sentence for the execution's cause, not a traceback
        logger.warning("job rejected: %s", error)
        return {"rejected": str(error)}
    logger.append_keys(job_id=job["job_id"])
    logger.info("job accepted", extra={"reader": job["reader"]})
    note = job.get("concurrency", {}).get("note")
    if note:
        logger.warning("concurrency: %s", note)
    return job


def account_concurrency() -> AccountConcurrency:
    """The account's Lambda concurrency now (Lambda GetAccountSettings), asked at each job: a
    quota raised, or a reservation made, between two jobs counts from the next one."""
    return read_account_concurrency(_lambda_client())


@functools.cache
def _lambda_client() -> Any:
    """Made at the first job, not at init: only Prepare asks Lambda anything."""
    return client("lambda")
