"""Lambda: one EventBridge Scheduler fire of a recurring sync (see ferry.pipeline.scheduled)."""

from __future__ import annotations

import functools
import os
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from ferry.pipeline.scheduled import SKIPPED_METRIC, fire

from .runtime import NAMESPACE, SERVICE, client, logger, tracer


@functools.cache
def _stepfunctions() -> Any:
    return client("stepfunctions")


@logger.inject_lambda_context(log_event=False, clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    logger.append_keys(schedule=event.get("schedule"), scheduled_time=event.get("scheduled_time"))
    outcome = fire(event, _stepfunctions(), os.environ["FERRY_STATE_MACHINE_ARN"])
    if outcome.action == "skipped":
        logger.warning(outcome.log_line(), extra={"running": outcome.running})
        # One EMF document per skip. `service` is named here, as Powertools adds it to every
        # metric of the stack's functions: the alarm and the dashboard ask for both dimensions.
        with single_metric(
            name=SKIPPED_METRIC,
            unit=MetricUnit.Count,
            value=1,
            namespace=NAMESPACE,
            default_dimensions={"service": SERVICE, "Schedule": outcome.schedule},
        ):
            pass
    else:
        logger.info(outcome.log_line(), extra={"execution_arn": outcome.execution_arn})
    return {"action": outcome.action, "execution_name": outcome.execution_name}
