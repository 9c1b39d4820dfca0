"""What a worker works with: its AWS clients, its settings, its ledger and report store, built
once per process and handed to Prepare, Finalize and each batch pass alike.

Its own module, below every step that takes it: Prepare and Finalize (`jobs`) need S3, the
ledger and the reports but never copy, so they import this and not the copy path
(`batches`, which makes the `Copier` from these clients: `batches.job_copier`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ferry.jobspec import JobSpec
from ferry.models import CopyResult, Endpoint, Target
from ferry.pipeline.job_reports import JobReports
from ferry.pipeline.ledger.contract import Ledger
from ferry.pipeline.ledger.dynamodb import DynamoLedger
from ferry.pipeline.local_reports import ReportStore
from ferry.pipeline.reach import endpoint_for, reached_otherwise
from ferry.pipeline.settings import WorkerSettings
from ferry.s3.clients import make_client

# Connections each kept client may pool: the copier's object threads (at most 128) plus its part
# threads (at most 64), as engine.strategies.copier.Copier sizes the clients it makes itself.
CLIENT_POOL = 192


@dataclass
class Services:
    """The AWS pieces a worker uses, built once per process (clients are reused)."""

    s3: Any
    dynamodb: Any
    settings: WorkerSettings
    source: Endpoint = field(default_factory=Endpoint)
    destination: Endpoint = field(default_factory=Endpoint)
    stepfunctions: Any = None  # Finalize asks the Map Run how many items it read
    # `ferry run` (one machine) gives its own ledger and report store, a client for the
    # destination's endpoint, and a hook that sees every result as it comes (its progress bar).
    ledger_store: Ledger | None = None  # default: the DynamoDB table the settings name
    report_store: ReportStore | None = None  # default: the report bucket
    destination_s3: Any = None  # default: `s3` (on AWS one identity reads and writes)
    on_result: Callable[[CopyResult], None] | None = None
    on_part: Callable[[Target, int], None] | None = None  # each landed part's bytes (the bar's)
    reads_any_region: bool = False  # `ferry run` lists and reads manifests in any region
    # S3 clients kept for the life of the process (see `client`).
    _clients: dict[Endpoint, Any] = field(default_factory=dict, repr=False, compare=False)
    _clients_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # Each job's spec, read from the ledger once per process (see `passes.job_spec`).
    _specs: dict[str, JobSpec] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ledger(self) -> Ledger:
        if self.ledger_store is not None:
            return self.ledger_store
        return DynamoLedger(self.dynamodb, self.settings.table_name)

    @property
    def reports(self) -> ReportStore:
        if self.report_store is not None:
            return self.report_store
        return JobReports(self.s3, self.settings.report_bucket)

    @property
    def dest_s3(self) -> Any:
        return self.destination_s3 if self.destination_s3 is not None else self.s3

    def endpoint(self, side: str, bucket: str, key: str = "") -> Endpoint:
        """How this worker reaches bucket/key on `side`: the configured location's role, region,
        endpoint or secret (ferry.pipeline.reach), else the worker's own `source`/`destination`."""
        if self.settings is not None:  # a test's Services may carry no settings
            configured = endpoint_for(self.settings, side, bucket, key)
            if reached_otherwise(configured):
                return configured
        return self.source if side == "source" else self.destination

    def client(self, endpoint: Endpoint) -> Any:
        """The S3 client for `endpoint`, made once per process: a Lambda container runs pass
        after pass, and a new client (a botocore session, its handlers and endpoint rules) cost
        about an eighth of the CPU of a pass of 1,000 small objects (py-spy,
        bench/results/worker_cost.md). boto3 clients are thread-safe; assumed roles' credentials
        refresh themselves. An endpoint whose keys come from a secret gets a new client each
        pass, so a rotated secret takes effect at the next pass as before."""
        if endpoint.credentials_secret:
            return make_client(endpoint, CLIENT_POOL)
        with self._clients_lock:
            if endpoint not in self._clients:
                self._clients[endpoint] = make_client(endpoint, CLIENT_POOL)
            return self._clients[endpoint]
