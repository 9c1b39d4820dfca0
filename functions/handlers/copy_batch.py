"""Lambda: one pass over a batch, until the deadline the Lambda's remaining time sets.

A pass that leaves work for another pass or for Fargate raises FerryHandOver once it is
recorded; the child workflow's Catch (ResumeHandOver) calls this function again with the
error in `handed_over`, and gets the recorded pass's result back from the ledger."""

from __future__ import annotations

from typing import Any

from ferry.pipeline.batches import (
    HAND_OVER_FIELD,
    HAND_OVER_METRIC,
    FerryHandOver,
    copy_batch,
    hand_over_message,
    hands_work_over,
    pass_event,
    resume_hand_over,
)

from .runtime import metrics, pass_invocation, publish_counts, publish_lags, services


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Raises FerryHandOver outside Powertools' decorators: a hand-over is the state machine's
    signal, not a fault, so the tracer neither logs it as an error nor marks the trace, and the
    Cause the Catch keeps beside the batch's items holds one frame of stack trace."""
    result = _invocation(event, context)
    if HAND_OVER_FIELD not in event and hands_work_over(result):
        raise FerryHandOver(hand_over_message(result))
    return result


@pass_invocation(pass_event)
def _invocation(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if HAND_OVER_FIELD in event:
        return resume_hand_over(event, services())
    result = copy_batch(event, services(), context.get_remaining_time_in_millis())
    publish_counts(result.pop("pass_counts"))
    publish_lags(result.pop("replication_lag", {}))
    if hands_work_over(result):  # `handler` raises FerryHandOver: counted in Lambda's Errors too
        metrics.add_metric(name=HAND_OVER_METRIC, unit="Count", value=1)
    return result
