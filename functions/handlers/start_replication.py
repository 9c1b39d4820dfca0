"""Lambda: a batch of S3 events from a replication's queue -> one manifest, one job.

The batch is held within the function's timeout: the context's remaining time is the
starter's deadline (ferry.pipeline.replication.starter), and what it cannot finish in time is
returned as batch item failures (the event source mapping reports them: ReportBatchItemFailures).
"""

from __future__ import annotations

import functools
import os
from typing import Any

from ferry.pipeline.replication.config import Replication
from ferry.pipeline.replication.starter import handle_batch
from ferry.pipeline.replication.starter_deletes import DeleteServices, delete_services, source_client

from .runtime import client, logger, tracer


@functools.cache
def _clients() -> tuple[Any, Any]:
    return client("s3"), client("stepfunctions")


@functools.cache
def _delete_services(environment: str) -> DeleteServices:
    """Clients for the replication's two locations (its roles, regions, endpoints, secrets) and
    the copy records on the ledger table; made once per process, on the first deletion."""
    return delete_services(
        Replication.from_environment(environment),
        dynamodb=client("dynamodb"),
        table_name=os.environ["FERRY_TABLE"],
    )


@functools.cache
def _source_client(environment: str) -> Any:
    """A client for the replication's source (its role, region, endpoint or secret), made once
    per process, on the first event key with two forms to resolve."""
    return source_client(Replication.from_environment(environment))


@logger.inject_lambda_context(log_event=False, clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    environment = os.environ["FERRY_REPLICATION"]
    replication = Replication.from_environment(environment)
    logger.append_keys(replication=replication.name)
    s3, stepfunctions = _clients()
    return handle_batch(
        event,
        replication,
        s3=s3,
        stepfunctions=stepfunctions,
        report_bucket=os.environ["FERRY_REPORT_BUCKET"],
        state_machine_arn=os.environ["FERRY_STATE_MACHINE_ARN"],
        deletes=functools.partial(_delete_services, environment) if replication.deletes else None,
        source=functools.partial(_source_client, environment),
        remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000,
    )
