"""The pipeline's settings: one set of values read by the CDK app and by the workers.

The CDK app builds `PipelineSettings` from `cdk.json` context and writes the values into the
state machine (batch sizes, concurrency) and into every worker's environment
(`worker_environment`). The workers read them back with `WorkerSettings.from_environ`. Nothing
is configured twice, so the ASL and the Python code cannot disagree about a threshold.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ferry.errors import ConfigError
from ferry.limits import GiB, MiB, format_size, parse_size
from ferry.pipeline.locations import Location

if TYPE_CHECKING:  # read where the settings are parsed (the CDK app), not by the workers that import this
    from ferry.pipeline.replication.config import Replication
    from ferry.pipeline.scheduled import Schedule

ARCHITECTURES = ("arm64", "x86_64")
RUNTIMES = ("python3.12", "python3.13")
# The tag the stack puts on every role it creates, valued with the stack's name: other
# accounts' policies (`ferry policy`) name the stack's roles by it (aws:PrincipalTag), because
# CloudFormation shortens a long stack name inside the role names it generates.
STACK_ROLE_TAG = "FerryStack"
# Step Functions fails a state whose input or output exceeds 256 KiB as UTF-8 (uncatchable
# States.DataLimitExceeded). The child workflow's largest state is a failed CopyBatch pass: the
# batch's items (at most MaxInputBytesPerBatch; `remaining` and `large` are subsets of them)
# plus the Catch's $.error, whose Cause may hold 32,768 characters and Error 256 (Step
# Functions API, TaskFailedEventDetails), at most 3 UTF-8 bytes each in the state's JSON, plus
# the job id, counts and the Lambda response envelope. The batch cap leaves room for all of it.
STATE_PAYLOAD_LIMIT = 256 * 1024
ERROR_ALLOWANCE = 3 * (32_768 + 256)
ENVELOPE_ALLOWANCE = 8 * 1024
MAX_BATCH_INPUT_BYTES = 150 * 1024
assert MAX_BATCH_INPUT_BYTES <= STATE_PAYLOAD_LIMIT - ERROR_ALLOWANCE - ENVELOPE_ALLOWANCE
# Step Functions keeps at most 25,000 history events per STANDARD execution, and the child
# workflow (statemachine/copy_batch.asl.json) is one per batch. Its large objects do not count
# here: CopyLargeObjects is a Distributed Map, each object a child execution with its own
# history (CopyLargeObject, up to 7 attempts, and RecordFailedLargeObject, up to 37 with its
# throttle retry: 2 + 2 + 4 x 7 + 2 + 4 x 37 = 182 events at most), and the batch's history pays
# 6 events for the Map Run however many objects it holds. What grows is the pass loop. A Task
# writes 2 events (entered, exited) plus at most 4 per attempt (scheduled, started, submitted,
# succeeded or failed); its attempts are 1 plus each Retrier's MaxAttempts. Today's Retry
# blocks give, per pass:
#   CopyBatch       1 + 30 (Lambda.TooManyRequestsException) + 3 (Sandbox.Timedout) + 6 (the
#                   Lambda service errors) = 40 attempts: 162
#   ResumeHandOver  1 + 30 + 6 = 37 attempts: 150 (RecordFailedBatch, the other way round, the same)
#   WhatIsLeft, NextPass (Choice, Pass): 2 + 2
# so 316 events a pass at worst, every attempt of every task retried to the end. With the
# execution's 2, the Map Run's 6 and BatchDone's 2, less the last pass's NextPass, 75 passes
# come to 316 x 75 + 8 = 23,708 events, inside the 25,000 with 1,292 to spare (a pass with no
# retry writes 28, so 75 passes usually write about 2,100).
# tests/pipeline/test_child_history.py works the worst case out again from the rendered ASL's
# Retry blocks, at this bound and at the largest batch the settings accept.
MAX_PASSES = 75
FARGATE_SIZES = {  # vCPU units -> memory MiB Fargate accepts (a subset, the useful ones)
    256: (512, 1024, 2048),
    512: (1024, 2048, 3072, 4096),
    1024: (2048, 3072, 4096, 5120, 6144, 7168, 8192),
    2048: tuple(range(4096, 16385, 1024)),
    4096: tuple(range(8192, 30721, 1024)),
    8192: tuple(range(16384, 61441, 4096)),
    16384: tuple(range(32768, 122881, 8192)),
}


@dataclass(frozen=True)
class PipelineSettings:
    """Everything `cdk deploy` can be told. Field names are the keys of the `ferry` context."""

    sources: tuple[Location, ...]
    destinations: tuple[Location, ...]
    manifests: tuple[Location, ...] = ()
    source_kms_key_arns: tuple[str, ...] = ()
    destination_kms_key_arns: tuple[str, ...] = ()
    manifest_kms_key_arns: tuple[str, ...] = ()  # SSE-KMS manifests and S3 Inventory files
    secret_kms_key_arns: tuple[str, ...] = ()  # customer keys encrypting credentials_secret secrets
    # One full vCPU (aws-limits.md): a CopyBatch worker is one Python process, which uses at most
    # one (the GIL), so more memory buys CPU it cannot use (bench/results/worker_cost.md).
    lambda_memory_mb: int = 1769
    lambda_architecture: str = "arm64"
    lambda_runtime: str = "python3.13"
    # Batches as large as the payload allows: Step Functions bills per transition, so per
    # batch; the byte cap decides how many items (MAX_BATCH_INPUT_BYTES above), not a count.
    max_items_per_batch: int = 10_000
    max_input_bytes_per_batch: int = MAX_BATCH_INPUT_BYTES
    max_concurrency: int = 100  # Prepare lowers it to what the account's Lambda concurrency allows
    # Reserved concurrency for the CopyBatch and RecordFailure functions (0: none, they share
    # the account's unreserved pool). AWS refuses a reservation that leaves fewer than 100
    # unreserved, so accounts whose quota is 100 or less can reserve nothing (docs/aws/deploy.md).
    copy_reserved_concurrency: int = 0
    record_failure_reserved_concurrency: int = 0
    tolerated_failure_percentage: int = 5
    large_object_threshold: int = 10 * GiB
    deadline_margin_seconds: int = 90
    # Lambda passes a batch goes round at most; the last hands what is left to Fargate.
    max_passes: int = 50
    copy_object_mib_per_second: int = 16  # cross-region-safe; see ferry.engine.strategies.copier
    fargate_cpu: int = 2048
    fargate_memory_mb: int = 4096
    fargate_spot: bool = True
    # The lean request path for small objects' requests (ferry.s3.lean_s3); false sends every
    # request through botocore, as `ferry copy --no-lean-requests` does.
    lean_requests: bool = True
    fargate_max_concurrency: int = 2  # per batch: all batches together run up to max_concurrency x this
    vpc_id: str | None = None
    report_retention_days: int = 90
    checkpoint_ttl_days: int = 7
    log_retention_days: int = 30
    schedules: tuple[Schedule, ...] = ()  # recurring syncs (ferry.pipeline.scheduled)
    alarm_email: str | None = None  # subscribed to an SNS topic Ferry creates for its alarms
    alarm_topic_arn: str | None = None  # an existing SNS topic the alarms notify
    alarm_oldest_event_seconds: int = 900  # age of the oldest queued S3 event that alarms
    alarm_replication_lag_seconds: int = 900  # replication lag p99 that alarms
    replications: tuple[Replication, ...] = ()  # see ferry.pipeline.replication.config
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        _check_range("lambda_memory_mb", self.lambda_memory_mb, 512, 10240)
        _check_choice("lambda_architecture", self.lambda_architecture, ARCHITECTURES)
        _check_choice("lambda_runtime", self.lambda_runtime, RUNTIMES)
        _check_range("max_items_per_batch", self.max_items_per_batch, 1, 10_000)
        if not 1024 <= self.max_input_bytes_per_batch <= MAX_BATCH_INPUT_BYTES:
            raise ConfigError(
                f"max_input_bytes_per_batch: {self.max_input_bytes_per_batch} is out of range (1KiB to "
                f"150KiB): a batch plus a failed pass's error (up to 32 KiB of cause) must stay under "
                "Step Functions' 256 KiB state payload limit"
            )
        _check_range("max_concurrency", self.max_concurrency, 1, 10_000)
        _check_range("copy_reserved_concurrency", self.copy_reserved_concurrency, 0, 10_000)
        _check_range(
            "record_failure_reserved_concurrency", self.record_failure_reserved_concurrency, 0, 1_000
        )
        _check_range("tolerated_failure_percentage", self.tolerated_failure_percentage, 0, 100)
        _check_range("large_object_threshold", self.large_object_threshold, 16 * MiB, 5 * 1024 * GiB)
        _check_range("deadline_margin_seconds", self.deadline_margin_seconds, 10, 600)
        if not 1 <= self.max_passes <= MAX_PASSES:
            raise ConfigError(
                f"max_passes: {self.max_passes} is out of range (1 to {MAX_PASSES}): more Lambda passes "
                "than that could outgrow a batch's Step Functions history (25,000 events); what the last "
                "pass leaves goes to the Fargate task, which has no time limit"
            )
        _check_range("copy_object_mib_per_second", self.copy_object_mib_per_second, 1, 10_000)
        _check_range("fargate_max_concurrency", self.fargate_max_concurrency, 1, 1000)
        _check_range("checkpoint_ttl_days", self.checkpoint_ttl_days, 1, 365)
        _check_range("report_retention_days", self.report_retention_days, 1, 3650)
        _check_range("alarm_oldest_event_seconds", self.alarm_oldest_event_seconds, 60, 14 * 86400)
        _check_range("alarm_replication_lag_seconds", self.alarm_replication_lag_seconds, 1, 14 * 86400)
        if self.alarm_email is not None and not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", self.alarm_email):
            raise ConfigError(f"alarm_email: {self.alarm_email!r} is not an email address")
        if self.alarm_topic_arn is not None and not re.fullmatch(
            r"arn:[a-z-]+:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_.-]{1,256}", self.alarm_topic_arn
        ):
            raise ConfigError(
                f"alarm_topic_arn: {self.alarm_topic_arn!r} is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)"
            )
        if self.fargate_memory_mb not in FARGATE_SIZES.get(self.fargate_cpu, ()):
            raise ConfigError(
                f"fargate_cpu {self.fargate_cpu} with fargate_memory_mb {self.fargate_memory_mb} is not a "
                "Fargate task size: see https://docs.aws.amazon.com/AmazonECS/latest/developerguide/fargate-tasks-services.html"
            )
        if not self.sources and not self.manifests:
            raise ConfigError("sources: name at least one source bucket (and prefix) the workers may read")
        if not self.destinations:
            raise ConfigError("destinations: name at least one destination bucket (and prefix) to write")
        self.bucket_owners  # noqa: B018 - refuses a bucket given two owners

    @property
    def bucket_owners(self) -> dict[str, str]:
        """Each configured bucket that names its owner -> that account id (one per bucket)."""
        owners: dict[str, str] = {}
        for loc in (*self.sources, *self.destinations, *self.manifests):
            if loc.owner is None:
                continue
            known = owners.setdefault(loc.bucket, loc.owner)
            if known != loc.owner:
                raise ConfigError(
                    f"bucket {loc.bucket!r} is given two owners, {known} and {loc.owner}: a bucket has one owner"
                )
        return owners

    @classmethod
    def from_context(cls, data: Mapping[str, Any]) -> PipelineSettings:
        """Read the `ferry` context of cdk.json (sizes may be written `10GiB`)."""
        if not isinstance(data, Mapping):
            raise ConfigError("the 'ferry' context in cdk.json must be an object")
        known = {f.name for f in fields(cls)} - {"extra"}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(
                f"unknown setting(s) {', '.join(sorted(unknown))} in the 'ferry' context: known are {', '.join(sorted(known))}"
            )
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name == "replications":
                continue  # parsed below, once the locations they must lie in are known
            if name in ("sources", "destinations", "manifests"):
                if not isinstance(value, list):
                    raise ConfigError(f"{name}: must be a list of {{bucket, prefix}} objects")
                values[name] = tuple(Location.parse(v, f"{name}[{i}]") for i, v in enumerate(value))
            elif name in (
                "source_kms_key_arns",
                "destination_kms_key_arns",
                "manifest_kms_key_arns",
                "secret_kms_key_arns",
            ):
                if not isinstance(value, list) or not all(
                    isinstance(v, str) and v.startswith("arn:") for v in value
                ):
                    raise ConfigError(f"{name}: must be a list of KMS key ARNs (arn:aws:kms:...)")
                values[name] = tuple(value)
            elif name in ("large_object_threshold", "max_input_bytes_per_batch"):
                values[name] = parse_size(value) if isinstance(value, str) else _int(name, value)
            elif name in ("fargate_spot", "lean_requests"):
                if not isinstance(value, bool):
                    raise ConfigError(f"{name}: must be true or false")
                values[name] = value
            elif name == "schedules":
                continue  # below: a spec is checked against the configured locations
            elif name in (
                "lambda_architecture",
                "lambda_runtime",
                "vpc_id",
                "alarm_email",
                "alarm_topic_arn",
            ):
                if value is not None and not isinstance(value, str):
                    raise ConfigError(f"{name}: must be a string")
                values[name] = value
            else:
                values[name] = _int(name, value)
        # Here, not above: a worker reads WorkerSettings from this module, and a Lambda's init
        # (billed) need not load the schedules' and replications' parsers (zoneinfo among them).
        from ferry.pipeline.replication.config import parse_replications
        from ferry.pipeline.scheduled import parse_schedules

        if "schedules" in data:
            values["schedules"] = parse_schedules(
                data["schedules"], values.get("sources", ()), values.get("destinations", ())
            )
        if "replications" in data:
            values["replications"] = parse_replications(
                data["replications"], values.get("sources", ()), values.get("destinations", ())
            )
        return cls(**values)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> PipelineSettings:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise ConfigError(f"cannot read settings file {str(path)!r}: {error}") from error
        return cls.from_context(data)

    @property
    def lambda_memory_limit(self) -> int:
        """Object bytes a streaming copy may hold in a batch Lambda: a third of its memory,
        leaving room for the runtime, boto3 and the batch's bookkeeping."""
        return self.lambda_memory_mb * MiB // 3

    @property
    def fargate_memory_limit(self) -> int:
        return self.fargate_memory_mb * MiB // 2

    def worker_environment(self, *, fargate: bool = False) -> dict[str, str]:
        """The environment every worker gets; `WorkerSettings.from_environ` reads it back.

        The state machine takes its batch sizes and concurrency from Prepare's output
        (`MaxItemsPerBatchPath` and the like), which Prepare reads from this environment.
        """
        return {
            "FERRY_MAX_ITEMS_PER_BATCH": str(self.max_items_per_batch),
            "FERRY_MAX_INPUT_BYTES_PER_BATCH": str(self.max_input_bytes_per_batch),
            "FERRY_MAX_CONCURRENCY": str(self.max_concurrency),
            "FERRY_COPY_RESERVED_CONCURRENCY": str(self.copy_reserved_concurrency),
            "FERRY_TOLERATED_FAILURE_PERCENTAGE": str(self.tolerated_failure_percentage),
            "FERRY_LARGE_OBJECT_CONCURRENCY": str(self.fargate_max_concurrency),
            "FERRY_LARGE_OBJECT_THRESHOLD": str(self.large_object_threshold),
            "FERRY_DEADLINE_MARGIN_SECONDS": str(self.deadline_margin_seconds),
            "FERRY_MAX_PASSES": str(self.max_passes),
            "FERRY_COPY_OBJECT_MIB_PER_SECOND": str(self.copy_object_mib_per_second),
            "FERRY_CHECKPOINT_TTL_DAYS": str(self.checkpoint_ttl_days),
            "FERRY_MEMORY_LIMIT": str(self.fargate_memory_limit if fargate else self.lambda_memory_limit),
            # ferry.s3.lean_s3.LEAN_ENV, spelled out: importing lean_s3 here would load botocore into `cdk synth`
            "FERRY_LEAN_REQUESTS": "1" if self.lean_requests else "0",
            "FERRY_BUCKET_OWNERS": json.dumps(self.bucket_owners, sort_keys=True),
            # The keys the workers may encrypt with (the stack grants kms:GenerateDataKey on
            # them): an SSE-KMS source keeps its key only if it is one, and Prepare refuses a
            # job's kms_key_id that is not. Comma-separated (an ARN has no comma).
            "FERRY_DESTINATION_KMS_KEY_ARNS": ",".join(self.destination_kms_key_arns),
            # How to reach the locations the workers do not reach as themselves (roles to assume,
            # regions, endpoints, the names of credential secrets): see ferry.pipeline.reach.
            "FERRY_LOCATIONS": json.dumps(self.reached_locations(), sort_keys=True),
        }

    def reached_locations(self) -> list[dict[str, str]]:
        """Each source and destination reached otherwise: side, bucket, prefix and how."""
        return [
            {"side": side, "bucket": loc.bucket, "prefix": loc.prefix, **loc.access()}
            for side, locations in (("source", self.sources), ("destination", self.destinations))
            for loc in locations
            if loc.reached_otherwise
        ]

    @property
    def role_arns(self) -> tuple[str, ...]:
        """The roles the workers assume (the stack grants sts:AssumeRole on exactly these)."""
        return tuple(sorted({loc.role_arn for loc in (*self.sources, *self.destinations) if loc.role_arn}))

    @property
    def credentials_secrets(self) -> tuple[str, ...]:
        """The secrets the workers read (the stack grants GetSecretValue on exactly these)."""
        return tuple(
            sorted(
                {
                    loc.credentials_secret
                    for loc in (*self.sources, *self.destinations)
                    if loc.credentials_secret
                }
            )
        )

    @property
    def capacity_provider(self) -> str:
        return "FARGATE_SPOT" if self.fargate_spot else "FARGATE"

    def describe(self) -> str:
        return (
            f"batches of up to {self.max_items_per_batch} objects, {self.max_concurrency} at once; "
            f"objects above {format_size(self.large_object_threshold)} go to Fargate"
        )


@dataclass(frozen=True)
class WorkerSettings:
    """What a worker reads from its environment: its resources' names and the limits."""

    table_name: str
    report_bucket: str
    max_items_per_batch: int
    max_input_bytes_per_batch: int
    max_concurrency: int
    tolerated_failure_percentage: int
    large_object_concurrency: int
    large_object_threshold: int
    deadline_margin_seconds: int
    max_passes: int
    checkpoint_ttl_days: int
    memory_limit: int
    copy_object_mib_per_second: int
    copy_reserved_concurrency: int = 0  # the CopyBatch function's reservation (Prepare's cap)
    bucket_owners: dict[str, str] = field(default_factory=dict)  # bucket -> ExpectedBucketOwner
    destination_kms_key_arns: tuple[str, ...] = ()
    locations: tuple[dict[str, str], ...] = ()  # PipelineSettings.reached_locations

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> WorkerSettings:
        env = os.environ if environ is None else environ
        names = {
            f.name: f"FERRY_{f.name.upper()}"
            for f in fields(cls)
            if f.name not in ("bucket_owners", "locations")
        }
        names["table_name"] = "FERRY_TABLE"
        missing = [var for var in names.values() if var not in env]
        if missing:
            raise ConfigError(f"worker environment lacks {', '.join(missing)}: deploy it with the CDK app")
        values: dict[str, Any] = {}
        for name, var in names.items():
            if name in ("table_name", "report_bucket"):
                values[name] = env[var]
            elif name == "destination_kms_key_arns":
                values[name] = tuple(arn for arn in env[var].split(",") if arn)
            else:
                values[name] = int(env[var])
        values["bucket_owners"] = json.loads(env.get("FERRY_BUCKET_OWNERS") or "{}")
        values["locations"] = tuple(json.loads(env.get("FERRY_LOCATIONS") or "[]"))
        return cls(**values)

    def batching(self) -> dict[str, int]:
        """What the state machine reads with `MaxItemsPerBatchPath` and the like."""
        return {
            "max_items_per_batch": self.max_items_per_batch,
            "max_input_bytes_per_batch": self.max_input_bytes_per_batch,
            "max_concurrency": self.max_concurrency,
            "tolerated_failure_percentage": self.tolerated_failure_percentage,
            "large_object_concurrency": self.large_object_concurrency,
        }


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name}: must be a whole number, not {value!r}")
    return value


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ConfigError(f"{name}: {value} is out of range ({low} to {high})")


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name}: {value!r} is not one of {', '.join(choices)}")
