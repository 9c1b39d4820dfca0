"""What an estimate is made for: the deployed pipeline's settings (`PipelineShape`, whose defaults
equal `PipelineSettings`', a test keeps them equal), the account's Lambda concurrency, the
rates one worker copies at, and how the job copies and what its source looks like."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferry.errors import ConfigError
from ferry.limits import (
    DEFAULT_MULTIPART_THRESHOLD,
    GiB,
    KiB,
    MiB,
    parse_size,
)
from ferry.quotas.lambda_concurrency import (
    DEFAULT_ACCOUNT_CONCURRENCY,
    AccountConcurrency,
)

LAMBDA_TIMEOUT_SECONDS = 900  # CopyBatch (cdk/ferry_cdk/stack.py: 15 minutes)

# CPU seconds one CopyBatch worker spends per small object copied server-side, whole passes
# included (listing, copies, report, ledger): measured by `make bench-worker-cost` on versitygw
# and MinIO (bench/results/worker_cost.md; the worse of the two). A worker whose threads hide
# S3's latency is CPU-bound; one Python process uses at most one vCPU (the GIL), which Lambda
# gives at ONE_VCPU_MB and proportionally less below.
MEASURED_CPU_PER_SMALL_OBJECT = 0.00038
ONE_VCPU_MB = 1769


@dataclass(frozen=True)
class PipelineShape:
    """The deployed pipeline's settings the cost depends on (the `ferry` context of cdk.json)."""

    max_items_per_batch: int = 10_000
    max_input_bytes_per_batch: int = 150 * KiB
    max_concurrency: int = 100
    copy_reserved_concurrency: int = 0
    record_failure_reserved_concurrency: int = 0
    lambda_memory_mb: int = 1769
    lambda_architecture: str = "arm64"
    large_object_threshold: int = 10 * GiB
    deadline_margin_seconds: int = 90
    fargate_cpu: int = 2048
    fargate_memory_mb: int = 4096
    fargate_spot: bool = True
    fargate_max_concurrency: int = 2

    @classmethod
    def from_context(cls, data: Mapping[str, Any]) -> PipelineShape:
        """The fields above from a `ferry` context (sizes may be written `10GiB`); other keys
        are the pipeline's business and are ignored here (`cdk synth` checks them)."""
        values: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            if name not in data:
                continue
            value = data[name]
            if name in ("max_input_bytes_per_batch", "large_object_threshold") and isinstance(value, str):
                value = parse_size(value)
            values[name] = value
        return cls(**values)

    @classmethod
    def from_cdk_json(cls, path: str) -> PipelineShape:
        try:
            with open(path, encoding="utf-8") as file:
                context = json.load(file)["context"]["ferry"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ConfigError(
                f"cannot read the 'ferry' context of {path!r} ({error}): name a cdk.json with --settings"
            ) from error
        return cls.from_context(context)

    @property
    def usable_pass_seconds(self) -> float:
        return LAMBDA_TIMEOUT_SECONDS - self.deadline_margin_seconds

    def memory_limit(self, on_fargate: bool) -> int:
        """Object bytes a streaming copy may hold in a worker, as the pipeline sets it
        (PipelineSettings.lambda_memory_limit, fargate_memory_limit): a third of a CopyBatch
        Lambda's memory, half a Fargate task's."""
        return self.fargate_memory_mb * MiB // 2 if on_fargate else self.lambda_memory_mb * MiB // 3


@dataclass(frozen=True)
class LambdaQuota:
    """The account's Lambda concurrency the estimate is made for, and where it comes from:
    read from the account (GetAccountSettings), given by the user, or the default assumed
    (`why_not` says why the account's could not be read)."""

    account: AccountConcurrency = AccountConcurrency(DEFAULT_ACCOUNT_CONCURRENCY, DEFAULT_ACCOUNT_CONCURRENCY)
    source: str = "default"  # "account", "given" or "default"
    where: str = ""  # the region it was read in
    why_not: str | None = None

    @property
    def label(self) -> str:
        said = {"account": "the account's quota", "given": "as given"}.get(self.source, "the account default")
        return f"{self.account.limit:,}, {said}"

    @property
    def note(self) -> str:
        limit, unreserved = self.account.limit, self.account.unreserved
        if self.source == "account":
            where = f" in {self.where}" if self.where else ""
            return (
                f"Lambda concurrency: the account's quota{where}, {limit:,} ({unreserved:,} unreserved), "
                "read with Lambda GetAccountSettings"
            )
        if self.source == "given":
            return f"Lambda concurrency: {limit:,}, as given (--lambda-concurrency)"
        why = (
            f"the account's could not be read ({self.why_not})"
            if self.why_not
            else "the account's was not read"
        )
        return (
            f"Lambda concurrency: the default quota, {limit:,}, assumed: {why}; new accounts get as little "
            "as 10 (give --lambda-concurrency N)"
        )


@dataclass(frozen=True)
class Rates:
    """Objects and bytes per second one worker with a whole vCPU copies: (slow, fast). Small
    objects copied server-side are bound by the worker's CPU: fast is the rate the CPU measured
    locally allows (MEASURED_CPU_PER_SMALL_OBJECT), slow half of it for what was not measured
    (S3's latency on AWS, TLS). Streamed objects and bytes per second are assumed, not measured.
    The expected case is their geometric mean."""

    server_side_objects: tuple[float, float] = (
        0.5 / MEASURED_CPU_PER_SMALL_OBJECT,
        1.0 / MEASURED_CPU_PER_SMALL_OBJECT,
    )
    stream_objects: tuple[float, float] = (15.0, 50.0)
    server_side_bytes: tuple[float, float] = (100.0 * MiB, 400.0 * MiB)
    stream_bytes: tuple[float, float] = (40.0 * MiB, 120.0 * MiB)
    measured: bool = False


@dataclass(frozen=True)
class Assumptions:
    """How the job copies and what the source looks like."""

    mode: str = "auto"  # auto copies server-side on one endpoint (within AWS: always)
    cross_region: bool = False
    storage_class: str | None = None  # destination class asked for (--storage-class)
    restore: str | None = None  # bulk | standard | expedited: archived objects restored first
    preserve_tags: bool = True
    skip_existing: bool = True
    source_part_size: int = 8 * MiB
    source_multipart_threshold: int = 8 * MiB
    # Objects written since S3's default checksums (CRC64NVME, FULL_OBJECT) carry one; older
    # ones only an MD5 ETag. A multipart source with a full-object CRC is copied in one
    # CopyObject (up to 5 GiB) or one GET and PUT (streamed, up to the multipart threshold).
    source_full_checksum: bool = False
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD  # the engine's, for streaming
    memory_limit: int = 1769 * MiB // 3  # a CopyBatch Lambda's (PipelineSettings.lambda_memory_limit)
    # On AWS every object is encrypted (SSE-S3 at least) and CopyObject's answer proves a copy
    # made from the listing. S3-compatible servers that report no encryption get a HEAD after.
    head_after_listed_copy: bool = False

    @property
    def server_side(self) -> bool:
        return self.mode in ("auto", "server-side")
