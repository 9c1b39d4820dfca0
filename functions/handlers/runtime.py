"""What every handler shares: Powertools, the AWS clients (made once per process) and the
job/batch ids on every log line, including the engine's own `ferry.*` loggers."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import botocore.session
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
from botocore.config import Config

from .tracing import LazyTracer

if TYPE_CHECKING:
    from ferry.pipeline.services import Services

SERVICE, NAMESPACE = "ferry", "Ferry"
logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
# Powertools' Tracer, made on the first sampled invocation (tracing.py): the X-Ray SDK's
# import is not paid in the (billed) init phase, nor by processes whose requests are not traced.
tracer = LazyTracer(service=SERVICE)
copy_config_to_registered_loggers(source_logger=logger, include={"ferry"}, log_level=logging.INFO)

_RETRIES = Config(retries={"max_attempts": 10, "mode": "adaptive"})
_SESSION_LOCK = threading.Lock()


@functools.cache
def _session() -> botocore.session.Session:
    return botocore.session.get_session()


def client(service: str) -> Any:
    """A client of `service` with the handlers' retries, from one botocore session (region and
    credentials from Lambda's environment, as boto3.client finds them). botocore, not boto3:
    boto3's import brings s3transfer, and s3transfer multiprocessing, about a tenth of
    `import botocore.session`'s CPU at every cold start, for nothing the handlers use."""
    with _SESSION_LOCK:  # a botocore session is not safe to make clients from in two threads
        return _session().create_client(service, config=_RETRIES)


@functools.cache
def services() -> Services:
    """The job handlers' clients and settings. Imported here, not above: the starters
    (start_replication, start_scheduled) share this module and need none of the clients, ledger
    and settings these bring in, and a Lambda's init phase is billed (start-up cost)."""
    from ferry.models import Endpoint
    from ferry.pipeline.services import Services
    from ferry.pipeline.settings import WorkerSettings
    from ferry.s3.clients import expect_owners

    settings = WorkerSettings.from_environ()
    s3 = client("s3")
    expect_owners(s3, settings.bucket_owners)  # Prepare's checks and the batch HEADs too
    owned = Endpoint(bucket_owners=tuple(sorted(settings.bucket_owners.items())))
    return Services(
        s3=s3,
        dynamodb=client("dynamodb"),
        stepfunctions=client("stepfunctions"),
        settings=settings,
        source=owned,
        destination=owned,
    )


def tag_logs(event: Mapping[str, Any]) -> None:
    job = event.get("job") or {}
    keys = {"job_id": job.get("job_id"), "batch_id": event.get("batch_id"), "pass": event.get("pass")}
    logger.append_keys(**{k: v for k, v in keys.items() if v is not None})


Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def pass_invocation(shape: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> Callable[[Handler], Handler]:
    """How a batch pass's handler (CopyBatch, RecordFailure) is wrapped: Powertools' Lambda
    context on its log lines, its trace when sampled, its EMF metrics flushed; inside those, its
    event put in one shape by `shape` (passes.pass_event: a first pass gets the Distributed
    Map's {Items, BatchInput}; passed in, so that this module, which every handler imports,
    imports no pipeline code) and the job, batch and pass on every log line."""

    def wrap(handler: Handler) -> Handler:
        @logger.inject_lambda_context(log_event=False, clear_state=True)
        @tracer.capture_lambda_handler
        @metrics.log_metrics
        @functools.wraps(handler)
        def invocation(event: dict[str, Any], context: Any) -> dict[str, Any]:
            event = dict(shape(event))
            tag_logs(event)
            return handler(event, context)

        return invocation

    return wrap


def publish_counts(counts: Mapping[str, int]) -> None:
    """EMF metrics for one recorded pass (a retried pass that counted nothing adds zeros)."""
    for name, key in (
        ("ObjectsCopied", "copied"),
        ("ObjectsSkipped", "skipped"),
        ("ObjectsFailed", "failed"),
        ("ObjectsPending", "pending"),
    ):
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=int(counts.get(key, 0)))
    metrics.add_metric(name="BytesCopied", unit=MetricUnit.Bytes, value=int(counts.get("bytes_copied", 0)))


def publish_lags(lags: Mapping[str, list[float]]) -> None:
    """EMF metric Ferry/ReplicationLag (Seconds), one value per verified copy, with the one
    dimension Replication=<name> (no `service` dimension: alarms and dashboards name the
    replication only). EphemeralMetrics keeps these apart from the handler's own metric set,
    whose dimensions they must not share; it flushes every 100 values (EMF's limit)."""
    for name, values in lags.items():
        lag = EphemeralMetrics(namespace=NAMESPACE, service="")
        lag.add_dimension(name="Replication", value=name)
        for value in values:
            lag.add_metric(name="ReplicationLag", unit=MetricUnit.Seconds, value=value)
        lag.flush_metrics()
