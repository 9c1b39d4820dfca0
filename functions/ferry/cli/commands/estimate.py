"""`ferry estimate`: what a pipeline job will cost, and how long it will take, before it runs.

Either from numbers (`--objects N --avg-size SIZE`) or from a listing of the source
(`ferry estimate s3://bucket/prefix`, or the source of a job spec, `--spec JOB.json`, whose
globs and options apply as `ferry run` would apply them), which reads every object's real size, storage class and
ETag (whose `-N` gives a multipart source's part count) into a bounded histogram: millions of
keys cost memory for a few hundred bins, not a list. The model is ferry.costs.estimate; the prices
are ferry.costs.prices (one dated table).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from typing import IO, Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ferry.cli.shared.clients import ClientMaker
from ferry.cli.shared.parsing import EXIT_OK, read_json_file
from ferry.costs.estimate import Estimate, estimate
from ferry.costs.inputs import Assumptions, LambdaQuota, PipelineShape
from ferry.costs.workload import Workload
from ferry.counts import plural
from ferry.errors import ConfigError, describe
from ferry.jobspec import JobSpec, parse_job_spec
from ferry.limits import format_size, parse_size
from ferry.models import CopyPolicy, Endpoint
from ferry.quotas.lambda_concurrency import AccountConcurrency, read_account_concurrency
from ferry.s3.clients import make_client, session_for
from ferry.s3.listing import matches, parse_s3_url


def run_estimate(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    spec = _read_spec(args.spec) if args.spec else None
    if spec and args.src:
        raise ConfigError("give either SRC or --spec FILE, not both")
    assumptions = _assumptions(args, spec.options.policy if spec else None)
    shape = PipelineShape.from_cdk_json(args.settings) if args.settings else PipelineShape()
    listed = _what_to_list(args, spec)
    if listed:
        if args.objects is not None or args.avg_size:
            raise ConfigError(
                f"give either {'--spec' if spec else 'SRC'} or --objects and --avg-size, not both"
            )
        work = _listed_workload(args, stderr, listed)
    else:
        work = _numbered_workload(args, spec)
    if args.per_day <= 0:
        raise ConfigError(f"--per-day {args.per_day}: must be 1 or more")
    quota = lambda_quota(args)
    result = estimate(work, shape, assumptions, objects_per_day=args.per_day, lambda_quota=quota)
    if args.json:
        where = {"source": _source_text(spec), "destination": _destination_text(spec)} if spec else {}
        stdout.write(json.dumps({**result.to_dict(), **where}, indent=2) + "\n")
    else:
        if spec:
            stdout.write(f"job {args.spec}: {_source_text(spec)} to {_destination_text(spec)}\n")
        stdout.write(render(result))
    return EXIT_OK


# One quick try: the estimate is made offline too, with the default quota and a note saying so.
_QUOTA_CALL = Config(connect_timeout=5, read_timeout=10, retries={"total_max_attempts": 1})


def lambda_quota(args: argparse.Namespace) -> LambdaQuota:
    """The account's Lambda concurrency (GetAccountSettings with the user's own credentials:
    --profile, in --region or the profile's region), which Prepare caps each job's Map by;
    `--lambda-concurrency N` instead of asking. Where the account cannot be asked (offline, no
    credentials, not allowed), the default quota, and the estimate says why."""
    if args.lambda_concurrency is not None:
        if args.lambda_concurrency < 1:
            raise ConfigError(f"--lambda-concurrency {args.lambda_concurrency}: must be 1 or more")
        given = args.lambda_concurrency
        return LambdaQuota(AccountConcurrency(given, given), source="given")
    try:
        client = session_for(Endpoint(profile=args.profile, region=args.region)).create_client(
            "lambda", config=_QUOTA_CALL
        )
        account = read_account_concurrency(client)
    except ClientError as error:
        message = error.response.get("Error", {}).get("Message") or "no message"
        return LambdaQuota(why_not=f"{error.response.get('Error', {}).get('Code')}: {message}"[:300])
    except (BotoCoreError, KeyError, TypeError, ValueError) as error:
        return LambdaQuota(why_not=str(error)[:300])
    return LambdaQuota(account, source="account", where=client.meta.region_name)


def _read_spec(path: str) -> JobSpec:
    """The job spec `ferry run` and `ferry job start --spec` take, checked as Prepare checks it."""
    return parse_job_spec(read_json_file(path), default_job_id="estimate")


def _assumptions(args: argparse.Namespace, policy: CopyPolicy | None) -> Assumptions:
    """The options given here, else the spec's, else the engine's defaults (as `ferry job
    start --spec` puts the options given on top of the spec's)."""
    policy = policy or CopyPolicy()
    part_size = parse_size(args.source_part_size)
    return Assumptions(
        mode=args.mode or policy.mode.value,
        cross_region=args.cross_region,
        storage_class=args.storage_class or policy.storage_class,
        restore=args.restore or policy.restore,
        # Tags given in the spec replace the source's: none are read, as with --no-tags.
        preserve_tags=not args.no_tags and policy.preserve_tags and policy.tags is None,
        skip_existing=not args.no_skip_existing and policy.skip_existing,
        source_part_size=part_size,
        source_multipart_threshold=part_size,
        source_full_checksum=args.full_object_checksums,
        multipart_threshold=policy.multipart_threshold,
    )


@dataclass(frozen=True)
class _Listed:
    """Where to list, and which of the keys listed count (globs on the key relative to prefix)."""

    bucket: str
    prefix: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


def _what_to_list(args: argparse.Namespace, spec: JobSpec | None) -> _Listed | None:
    if args.src:
        url = parse_s3_url(args.src, "SRC")
        return _Listed(url.bucket, url.key)
    if spec and not spec.manifest and spec.source_bucket:
        options = spec.options
        return _Listed(spec.source_bucket, spec.source_prefix, options.include, options.exclude)
    return None


def _numbered_workload(args: argparse.Namespace, spec: JobSpec | None) -> Workload:
    if args.objects is None or not args.avg_size:
        if spec:  # a manifest: its rows are not listed here
            raise ConfigError(
                f"--spec {args.spec}: a manifest job's objects are not listed here: "
                "give --objects N and --avg-size SIZE too"
            )
        raise ConfigError(
            "give SRC (s3://bucket/prefix), --spec FILE, or both --objects N and --avg-size SIZE"
        )
    if args.objects < 0:
        raise ConfigError(f"--objects {args.objects}: must be 0 or more")
    return Workload.uniform(args.objects, parse_size(args.avg_size), args.source_storage_class.upper())


def _source_text(spec: JobSpec) -> str:
    if spec.manifest:
        return f"the {spec.manifest.format} manifest s3://{spec.manifest.bucket}/{spec.manifest.key}"
    return f"s3://{spec.source_bucket}/{spec.source_prefix}"


def _destination_text(spec: JobSpec) -> str:
    return f"s3://{spec.destination_bucket}/{spec.destination_prefix}"


def _listed_workload(args: argparse.Namespace, stderr: IO[str], listed: _Listed) -> Workload:
    endpoint = Endpoint(
        endpoint_url=args.endpoint_url,
        region=args.region,
        profile=args.profile,
        role_arn=args.role_arn,
        requester_pays=args.requester_pays,
    )
    client = ClientMaker(make_client).checked(endpoint, listed.bucket, "source", region_flag="--region")
    work = Workload()
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=listed.bucket, Prefix=listed.prefix)
    with _progress(stderr, quiet=args.quiet) as advance:
        try:
            for page in pages:
                for item in page.get("Contents", []):
                    if matches(str(item["Key"])[len(listed.prefix) :], listed.include, listed.exclude):
                        work.add_listed(item)
                        advance(int(item.get("Size") or 0))
        except ClientError as error:
            raise ConfigError(
                describe(
                    error, side="source", action="s3:ListBucket", bucket=listed.bucket, region_flag="--region"
                )
            ) from error
    return work


class _progress:
    """A rich progress bar on a terminal (objects and bytes listed); nothing in pipes or logs."""

    def __init__(self, stream: IO[str], *, quiet: bool) -> None:
        self.enabled = not quiet and hasattr(stream, "isatty") and stream.isatty()
        self.stream = stream
        self.objects = 0
        self.bytes = 0

    def __enter__(self) -> Any:
        if not self.enabled:
            return self._count
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            SpinnerColumn(),
            TextColumn("listing: {task.fields[listed]}, {task.fields[size]}"),
            TimeElapsedColumn(),
            console=Console(file=self.stream),
            transient=True,
        )
        self._bar.start()
        self._task = self._bar.add_task("listing", total=None, listed=plural(0, "object"), size="0 B")
        return self._advance

    def _count(self, size: int) -> None:
        self.objects += 1
        self.bytes += size

    def _advance(self, size: int) -> None:
        self._count(size)
        if self.objects % 1000 == 1:
            self._show()

    def _show(self, refresh: bool = False) -> None:
        listed = plural(self.objects, "object", thousands=True)
        self._bar.update(self._task, listed=listed, size=format_size(self.bytes), refresh=refresh)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:  # the last count, whatever the step of the updates
            self._show(refresh=True)
            self._bar.stop()


def _usd(value: float) -> str:
    if value == 0:
        return "$0"
    if value < 0.0001:
        return "<$0.0001"
    if value < 0.01:
        return f"${value:.4f}"
    return f"${value:,.2f}"


def _qty(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:,.2f}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 72 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def render_rate_limits(result: Estimate) -> list[str]:
    """Each limit at the rate asked for (`--per-day`), the lowest marked as the one that binds."""
    limits = result.rate_limits
    assert limits is not None
    binding = limits.binding
    out = [
        f"at {plural(limits.objects_per_day, 'object', thousands=True)} a day "
        f"({_rate(limits.objects_per_second)}/s) on one stack, "
        "objects/s each limit allows:"
    ]
    for limit in limits.limits:
        mark = "  <- binds" if limit is binding else ""
        out.append(f"  {limit.what:<68} {_rate(limit.objects_per_second):>12}  needs {limit.needs}{mark}")
    return out


def _rate(per_second: float) -> str:
    """Objects a second: whole numbers, or the first three figures of a rate under ten, without
    an exponent (objects of terabytes go at thousandths of one a second, a few a day at
    hundred-thousandths)."""
    if per_second >= 10 or per_second <= 0 or not math.isfinite(per_second):
        return f"{per_second:,.0f}"
    return f"{per_second:.{max(0, 2 - math.floor(math.log10(per_second)))}f}"


def render(result: Estimate) -> str:
    """The plain table: each line, each service's subtotal, the total, the alternatives."""
    out = [
        f"{plural(result.objects, 'object', thousands=True)}, {format_size(result.bytes)}: "
        f"{plural(result.batches, 'batch', thousands=True)} of up to {result.items_per_batch}, "
        f"{plural(result.passes, 'CopyBatch pass', thousands=True)}, {result.large_objects:,} on Fargate",
        "",
        f"{'service':<16} {'what':<46} {'quantity':>16}  {'cost':>12}",
    ]
    service = None
    for line in result.lines:
        name = line.service if line.service != service else ""
        service = line.service
        out.append(f"{name:<16} {line.what:<46} {_qty(line.quantity):>16}  {_usd(line.usd):>12}")
    out.append(f"{'':<16} {'total':<46} {'':>16}  {_usd(result.total):>12}")
    out.append("")
    out.append("by service: " + ", ".join(f"{k} {_usd(v)}" for k, v in result.by_service().items()))
    out.append(
        f"orchestration (Lambda, Step Functions, DynamoDB, Fargate, the pipeline's listings and reports): "
        f"{_usd(result.orchestration)}, {_usd(result.orchestration_per_million)} per million objects"
    )
    if result.rate_limits is not None:
        out.extend(["", *render_rate_limits(result)])
    out.append("")
    out.append("the same job elsewhere:")
    for name, lines in result.alternatives.items():
        total = sum(x.usd for x in lines)
        detail = "; ".join(f"{x.what} {_usd(x.usd)}" for x in lines)
        out.append(f"  {name:<28} {_usd(total):>12}  ({detail})")
    fast, slow = result.duration_seconds
    out.append("")
    out.append(f"duration: {_duration(fast)} to {_duration(slow)}")
    out.append("")
    out.append("assuming:")
    out.extend(f"  - {note}" for note in result.assumptions)
    return "\n".join(out) + "\n"
