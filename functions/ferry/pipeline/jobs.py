"""A pipeline job's start and end: `prepare` before any fan-out, `finalize` after the Map.

Prepare refuses a job early and clearly: a wrong field, a source that cannot be listed or
read, a destination that cannot be written. Finalize turns the ledger into the job's report
and its status: SUCCEEDED (every object copied or skipped), PARTIAL (some failed or pending),
FAILED (nothing copied, or the Map itself failed).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

from botocore.exceptions import BotoCoreError, ClientError

from ferry.counts import plural
from ferry.errors import ConfigError, describe, error_code, explain_bare
from ferry.filters import Filters
from ferry.jobspec import JobSpec, SpecError, parse_job_spec, validate_job_spec
from ferry.models import check_server_side_reach
from ferry.pipeline.abandoned_uploads import abort_abandoned_uploads
from ferry.pipeline.count_check import (
    CountCheck,
    batches_recorded,
    check_listed,
    check_map_run,
    map_run_counts,
)
from ferry.pipeline.history_keys import VersionListing, check_versioning, source_client
from ferry.pipeline.job_reports import job_prefix
from ferry.pipeline.job_stats import first_failures, job_stats
from ferry.pipeline.manifest_check import check_manifest
from ferry.pipeline.map_runs import MapRunRecord, job_map_runs, lambda_error_message
from ferry.pipeline.reach import reached_otherwise
from ferry.pipeline.recording import record_lost_batch
from ferry.pipeline.scheduled import is_scheduled_fire
from ferry.pipeline.services import Services
from ferry.pipeline.settings import WorkerSettings
from ferry.quotas.lambda_concurrency import (
    AccountConcurrency,
    ConcurrencyCap,
    cap_max_concurrency,
    unknown_account,
)
from ferry.reports.report_html import render_report_html
from ferry.s3.clients import make_client
from ferry.s3.listing import S3Url, nothing_matched


class AccessCheckFailed(ConfigError):
    """The job cannot work: the pipeline's identity cannot list, read or write what it names."""


def prepare(
    event: Mapping[str, Any],
    services: Services,
    *,
    account: Callable[[], AccountConcurrency] | None = None,
) -> dict[str, Any]:
    """Check the job, record it, and say where the Map reads its items (an all_versions job's
    keys are listed next, by the ListVersions loop: pipeline/history_keys.py). `account` reads
    the account's Lambda concurrency, to which the Map's MaxConcurrency is lowered
    (`concurrency_cap`); none on a machine, where no Lambda runs."""
    spec = validate_job_spec(event.get("spec"), default_job_id=event.get("execution_name"))
    check_server_side_reach_of(spec, services)
    check_reader_region(spec, services)
    check_access(spec, services, empty_source_ok=is_scheduled_fire(event))
    if spec.manifest:  # read through once, so a manifest the ItemReader would choke on is refused now
        check_manifest(services.s3, spec.manifest.bucket, spec.manifest.key, spec.manifest.format)
    services.ledger.create_job(spec.job_id, spec.to_dict(), execution_arn=event.get("execution_arn"))
    job = job_input(spec, services)
    if account is not None:
        cap = concurrency_cap(services.settings, account)
        job["limits"]["max_concurrency"] = cap.max_concurrency  # the Maps' MaxConcurrencyPath
        job["concurrency"] = cap.to_dict()
    return job


def concurrency_cap(settings: WorkerSettings, account: Callable[[], AccountConcurrency]) -> ConcurrencyCap:
    """The Map's MaxConcurrency for this job: the max_concurrency setting lowered to what the
    account's Lambda concurrency lets the copies take and still leave slots to RecordFailure,
    Finalize and the account's other functions (ferry.quotas.lambda_concurrency). An account that
    cannot be asked leaves the setting as it is, said in the job's report; the state machine's
    throttle retries then wait for slots."""
    asked = settings.max_concurrency
    try:
        known = account()
    except (ClientError, BotoCoreError, KeyError, TypeError, ValueError) as error:
        return unknown_account(asked, f"lambda:GetAccountSettings: {error}")
    return cap_max_concurrency(asked, known, copy_reserved=settings.copy_reserved_concurrency)


def job_input(spec: JobSpec, services: Services) -> dict[str, Any]:
    """What Prepare hands the Map: where the items are read from, the batching limits, the
    job's report prefix (and, for a resumed local run, the same again)."""
    job: dict[str, Any] = {
        "job_id": spec.job_id,
        "reader": spec.reader,
        "spec": spec.to_dict(),
        "limits": services.settings.batching(),
        "report_prefix": job_prefix(spec.job_id),
    }
    if spec.options.all_versions:  # the keys the ListVersions loop lists (pipeline/history_keys.py)
        job["histories"] = VersionListing().to_dict()
    elif spec.manifest:
        job["manifest"] = {"bucket": spec.manifest.bucket, "key": spec.manifest.key}
    else:
        job["listing"] = {"bucket": spec.source_bucket, "prefix": spec.source_prefix}
    return job


def check_server_side_reach_of(spec: JobSpec, services: Services) -> None:
    """options.mode server-side between two endpoints: every batch would fail on it."""
    source = services.endpoint("source", spec.source_bucket or "", spec.source_prefix)
    destination = services.endpoint("destination", spec.destination_bucket, spec.destination_prefix)
    check_server_side_reach(spec.options.policy.mode, source, destination, "options.mode")


def check_reader_region(spec: JobSpec, services: Services) -> None:
    """The Distributed Map's ItemReader reads only buckets in the state machine's own region,
    while botocore follows S3's redirect, so every other check here would pass. Refuse the job
    with where it can run. Only what the ItemReader reads must be local: the workers copy
    from and to any region. `ferry run` reads the items itself, from any region; an
    all_versions job's items are the parts its ListVersions loop writes in the stack's report
    bucket."""
    if services.reads_any_region or spec.options.all_versions:
        return
    stack = os.environ.get("AWS_REGION") or services.s3.meta.region_name
    if not spec.manifest:
        check_listable(spec, services, stack)
    if spec.manifest:
        bucket, field, instead = spec.manifest.bucket, "source.manifest.bucket", "copy the manifest to"
    else:
        bucket, field, instead = str(spec.source_bucket), "source.bucket", "give a manifest in"
    region = bucket_region(services.s3, bucket)
    if region and stack and region != stack:
        raise AccessCheckFailed(
            f"{field}: bucket {bucket!r} is in {region}; the stack runs in {stack}: "
            f"deploy Ferry in {region}, or {instead} a bucket in {stack}"
        )


def check_listable(spec: JobSpec, services: Services, stack: str | None) -> None:
    """A source reached through another endpoint or partition cannot be listed by the
    ItemReader (it lists S3 in the stack's own partition and region, as the state machine's
    role): such a job needs a manifest. A configured source region other than the stack's
    is refused here too, without asking S3."""
    bucket = str(spec.source_bucket)
    source = services.endpoint("source", bucket, spec.source_prefix)
    elsewhere = None
    if source.endpoint_url:
        elsewhere = f"reached through {source.endpoint_url}"
    elif source.region and stack and source.region != stack:
        elsewhere = f"configured in {source.region}"
    if elsewhere:
        raise AccessCheckFailed(
            f"source.bucket: bucket {bucket!r} is {elsewhere}; the Distributed Map lists only S3 "
            f"buckets in the stack's region ({stack}): give a manifest (source.manifest) in a bucket "
            f"in {stack} naming the keys to copy, or deploy Ferry where the bucket is"
        )


def destination_client(spec: JobSpec, services: Services) -> Any:
    """The client the workers write the job's destination with: the stack's own, or one for
    the configured role, region, endpoint or secret (so Prepare checks what they will do)."""
    endpoint = services.endpoint("destination", spec.destination_bucket, spec.destination_prefix)
    # services.dest_s3: `ferry run`'s destination client (its own profile, say); `s3` on AWS.
    return make_client(endpoint, pool_size=4) if reached_otherwise(endpoint) else services.dest_s3


def bucket_region(s3: Any, bucket: str) -> str | None:
    """The bucket's region from HeadBucket's `x-amz-bucket-region` header, which S3 sends
    whether or not the caller may list the bucket; None when S3 does not say (no such bucket)."""
    try:
        response = s3.head_bucket(Bucket=bucket)
    except ClientError as error:
        response = error.response
    except BotoCoreError:
        return None
    headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    return response.get("BucketRegion") or headers.get("x-amz-bucket-region")


def check_access(spec: JobSpec, services: Services, *, empty_source_ok: bool = False) -> None:
    """Ask S3 the questions the Map will ask, once, before anything is copied. A listing
    job's source with no object under its prefix is refused as `ferry copy` refuses it (far
    more often a mistyped prefix than a wish; the job id stays free), unless
    `empty_source_ok`: a schedule's nightly sync may find nothing there tonight."""
    s3 = services.s3
    if spec.manifest:
        m = spec.manifest
        _ask(
            lambda: s3.head_object(Bucket=m.bucket, Key=m.key),
            f"source.manifest: cannot read s3://{m.bucket}/{m.key}",
            action="s3:GetObject",
            bucket=m.bucket,
            key=m.key,
            explain=lambda: s3.get_object(Bucket=m.bucket, Key=m.key, Range="bytes=0-0")["Body"].close(),
            missing=f"source.manifest: s3://{m.bucket}/{m.key} does not exist: check source.manifest.bucket and .key",
        )
        if m.format == "inventory":
            _check_inventory(s3, m.bucket, m.key)
    if spec.options.all_versions:  # the versions are listed as the workers reach the source
        check_versioning(spec, source_client(spec, services), destination_client(spec, services))
    elif spec.source_bucket:
        bucket, prefix = spec.source_bucket, spec.source_prefix
        source = services.endpoint("source", bucket, prefix)
        # A listing job's ItemReader lists as the stack (check_listable refuses any other
        # way); a manifest's source reached otherwise is checked as the workers reach it.
        lister = make_client(source, pool_size=4) if spec.manifest and reached_otherwise(source) else s3
        first = _ask(
            lambda: lister.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1),
            f"source: cannot list s3://{bucket}/{prefix}",
            action="s3:ListBucket",
            bucket=bucket,
        )
        if not spec.manifest and not empty_source_ok and not first.get("Contents"):
            raise AccessCheckFailed(f"source: {nothing_matched(lister, S3Url(bucket, prefix), Filters())}")
    probe = f"{spec.destination_prefix}.ferry-write-check"
    s3 = destination_client(spec, services)
    _ask_to_write(
        s3,
        spec.destination_bucket,
        probe,
        f"destination: cannot write s3://{spec.destination_bucket}/{spec.destination_prefix}",
        action="s3:PutObject",
    )
    _check_write_options(spec, s3, probe)
    _check_kms_key(spec, services)


def _check_write_options(spec: JobSpec, s3: Any, probe: str) -> None:
    """Ask the destination once, before the fan-out, whether it takes what every write will
    carry: a storage class an S3-compatible store lacks, or tags on a store without tagging,
    would otherwise fail every object alike. One multipart upload per option given, opened and
    aborted at once, so a refusal names the option."""
    policy = spec.options.policy
    asked: list[tuple[str, dict[str, Any]]] = []
    if policy.storage_class:
        asked.append(("options.storage_class", {"StorageClass": policy.storage_class}))
    if policy.tags:
        asked.append(("options.tags", {"Tagging": urlencode(sorted(policy.tags.items()))}))
    if policy.metadata:
        asked.append(("options.metadata", {"Metadata": policy.metadata}))
    bucket = spec.destination_bucket
    for field, args in asked:
        try:
            upload = s3.create_multipart_upload(Bucket=bucket, Key=probe, **args)
        except ClientError as error:
            raise SpecError(
                f"{field}: the destination s3://{bucket}/ refuses it ({error_code(error)}: "
                f"{error.response.get('Error', {}).get('Message') or 'no message'}); change or remove it"
            ) from error
        s3.abort_multipart_upload(Bucket=bucket, Key=probe, UploadId=upload["UploadId"])


def _check_kms_key(spec: JobSpec, services: Services) -> None:
    """A job's kms_key_id must be one the workers may encrypt with, and must work there.

    The stack grants kms:GenerateDataKey only on `destination_kms_key_arns` (IAM matches the
    key's ARN), so any other key would fail every object after the fan-out. A multipart upload
    opened with the key (and aborted) makes S3 ask KMS for a data key at once: it proves the
    grant, the key policy and that the key lives in the destination's region.
    """
    key_id = spec.options.policy.dest_kms_key_id
    if not key_id:
        return
    configured = services.settings.destination_kms_key_arns
    if key_id not in configured:
        listed = ", ".join(configured) if configured else "none"
        raise AccessCheckFailed(
            f"options.kms_key_id: {key_id} is not among the keys the workers may encrypt with "
            f"(destination_kms_key_arns: {listed}); give one of those key ARNs, or add this "
            "key's ARN to destination_kms_key_arns in cdk.json and deploy again"
        )
    _ask_to_write(
        destination_client(spec, services),
        spec.destination_bucket,
        f"{spec.destination_prefix}.ferry-kms-check",
        f"options.kms_key_id: cannot encrypt s3://{spec.destination_bucket}/{spec.destination_prefix} with {key_id}",
        action="s3:PutObject with SSE-KMS",
        ServerSideEncryption="aws:kms",
        SSEKMSKeyId=key_id,
    )


def _ask_to_write(s3: Any, bucket: str, probe: str, what: str, *, action: str, **upload: Any) -> None:
    """One destination write check: a multipart upload at `probe` (with the `upload` arguments)
    started and aborted at once proves the write without leaving an object; a refusal becomes
    one sentence (`_ask`)."""

    def open_and_abort() -> None:
        started = s3.create_multipart_upload(Bucket=bucket, Key=probe, **upload)
        s3.abort_multipart_upload(Bucket=bucket, Key=probe, UploadId=started["UploadId"])

    _ask(open_and_abort, what, action=action, bucket=bucket, key=probe, side="destination")


def _check_inventory(s3: Any, bucket: str, key: str) -> None:
    try:
        manifest = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except ValueError as error:
        raise AccessCheckFailed(
            f"source.manifest: s3://{bucket}/{key} is not an S3 Inventory manifest.json (not JSON)"
        ) from error
    fmt = manifest.get("fileFormat") if isinstance(manifest, dict) else None
    if fmt != "CSV":
        raise AccessCheckFailed(
            f"source.manifest: the inventory is {fmt or 'not an inventory manifest'}; Step Functions reads CSV inventories only (configure the inventory with the CSV format)"
        )
    schema = str(manifest.get("fileSchema") or "")
    if "Key" not in [name.strip() for name in schema.split(",")]:
        raise AccessCheckFailed(
            f"source.manifest: s3://{bucket}/{key}: the inventory's fileSchema has no Key column "
            f"(it reads '{schema[:200]}'): configure the inventory with the Key field, or give another manifest.json"
        )


def _ask(
    call: Any,
    what: str,
    *,
    action: str,
    bucket: str,
    key: str | None = None,
    side: str = "source",
    explain: Callable[[], object] | None = None,
    missing: str | None = None,
) -> Any:
    """Make one check's request, and return its answer; a refusal becomes one sentence. `explain` asks again, when
    `call` is a HEAD, with a request whose error has a body (see `errors.explain_bare`).
    `missing` is the sentence for a key that is not there: checked before the job starts, it
    does not exist (errors.describe's "no longer exists" is for an object listed, then gone)."""
    try:
        return call()
    except ClientError as bare:
        error = (explain_bare(bare, explain) if explain else bare) or bare
        if missing and error_code(error) in ("NoSuchKey", "404", "NotFound"):
            raise AccessCheckFailed(missing) from error
        raise AccessCheckFailed(
            f"{what}: {describe(error, side=side, action=action, bucket=bucket, key=key)}"
        ) from error
    except BotoCoreError as error:
        raise AccessCheckFailed(f"{what}: {error}") from error


def finalize(event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """Account for every object the Map read, then write the report and set the status.

    The ledger knows what the workers recorded; the Map Run's own record (ResultWriter's
    FAILED and PENDING files, DescribeMapRun's counts) knows what they never got to.
    Objects of a lost batch are recorded as failed with the error that lost them; counts
    that still do not add up fail the job with the numbers (see count_check.py: the outcome
    does not rest on what DescribeMapRun's itemCounts counts)."""
    job, spec = recorded_job(services, event["job"]["job_id"])
    runs = job_map_runs(
        services.s3,
        services.stepfunctions,
        services.settings.report_bucket,
        written=(event.get("map") or {}).get("results"),
        execution_arn=job.get("execution_arn"),
    )
    lost = _record_lost_batches(runs, spec, services)
    recorded = batches_recorded(services.ledger, job["job_id"])  # after the lost batches are recorded
    counts = map_run_counts(services.stepfunctions, [run.map_run_arn for run in runs])
    return settle_job(
        job,
        spec,
        services,
        check=lambda items: check_map_run(items, recorded, counts, noun=item_noun(spec)),
        lost=lost,
        map_error=event.get("map_error"),
        listing_error=event.get("listing_error"),
        map_run=event.get("map"),
        concurrency=(event.get("job") or {}).get("concurrency"),
    )


def recorded_job(services: Services, job_id: str) -> tuple[dict[str, Any], JobSpec]:
    """The job's ledger record (with its id) and its spec, parsed here once: every Finalize
    (the state machine's and `ferry run`'s) starts from these, and what it calls takes the spec."""
    job = services.ledger.job(job_id)
    if job is None:
        raise ConfigError(f"job {job_id!r} has no record in the ledger")
    return {**job, "job_id": job_id}, parse_job_spec(job["spec"])


def settle_job(
    job: Mapping[str, Any],
    spec: JobSpec,
    services: Services,
    *,
    read: int | None = None,
    check: Callable[[int], CountCheck] | None = None,
    lost: int = 0,
    map_error: Mapping[str, Any] | None = None,
    listing_error: Mapping[str, Any] | None = None,
    map_run: Any = None,
    concurrency: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The end of every Finalize (the state machine's and `ferry run`'s): the ledger's tally
    checked (`check`, given the ledger's objects; else against the `read` items), the report
    files, the job's status and its cause. `job` and `spec`: the job's record and its spec,
    parsed once (`recorded_job`). `listing_error`: an all_versions job's listing failed
    (history_keys.py), so no Map ran: the job is FAILED with that error.
    `concurrency`: Prepare's cap of the Map's MaxConcurrency; the report says it when it
    lowered the setting, or could not decide."""
    job_id = job["job_id"]
    ledger, reports = services.ledger, services.reports
    cleanup = abort_abandoned_uploads(destination_client(spec, services), spec)
    tally = ledger.tally(job_id)
    counts = tally.counts.to_dict()
    # The Map's items as the ledger settled them: objects, or an all_versions job's keys.
    counted = check(tally.items) if check else check_listed(tally.items, read, noun=item_noun(spec))
    dry_run, written = spec.options.policy.dry_run, job["spec"]  # as Prepare stored it
    summary: dict[str, Any] = {
        "job_id": job_id,
        "status": _status(counts, map_error or listing_error, bool(counted.problems), dry_run=dry_run),
        **counts,
        "batches": tally.batches,
        "lost_in_unfinished_batches": lost,
        "objects_read_by_map": counted.objects_read,
        "abandoned_uploads_aborted": cleanup.aborted,
        "started_at": job.get("started_at"),
        "source": written["source"],
        "destination": written["destination"],
        **job_stats(ledger, job_id, job.get("started_at")),
    }
    summary["bytes_per_second"] = counts["bytes_copied"] // summary["seconds"] if summary["seconds"] else 0
    if spec.options.all_versions:  # its objects are versions and delete markers, of these keys
        summary["all_versions"], summary["keys"] = True, tally.items
    if dry_run:
        summary["dry_run"] = True
    if cleanup.error:
        summary["abandoned_uploads_error"] = cleanup.error
    if cleanup.marks_deleted:
        summary["marks_of_ended_uploads_deleted"] = cleanup.marks_deleted
    if counted.details is not None:
        summary["map_run_counts"] = counted.details
    if counted.problems:
        summary["count_problems"] = counted.problems
    if map_error:
        summary["map_error"] = {"error": map_error.get("Error"), "cause": str(map_error.get("Cause"))[:1000]}
    if listing_error:
        summary["listing_error"] = {
            "error": listing_error.get("Error"),
            "cause": lambda_error_message(listing_error.get("Cause")),
        }
    if map_run:
        summary["map_run"] = map_run
    if concurrency and concurrency.get("note"):
        summary["concurrency"] = dict(concurrency)
    summary_key, failures_key = reports.put_final(job_id, summary, ledger.failures(job_id))
    summary["report"] = reports.url(summary_key)
    summary["failures_report"] = reports.url(failures_key)
    summary["report_html"] = reports.url(_put_html(summary, services))
    ledger.finish_job(job_id, summary["status"], summary, tally)
    if summary["status"] != "SUCCEEDED":
        summary["cause"] = _cause(summary)
    return summary


def item_noun(spec: JobSpec) -> str:
    """What one of the Map's items is: an object, or in an all_versions job a key."""
    return "key" if spec.options.all_versions else "object"


def _put_html(summary: Mapping[str, Any], services: Services) -> str:
    """report.html beside summary.json: the summary with the first failures listed."""
    job_id = summary["job_id"]
    failures = first_failures(services.ledger, job_id)
    page = render_report_html(
        {**summary, "failures": failures, "failures_more": summary["failed"] - len(failures)}
    )
    return services.reports.put_html(job_id, page)


def _record_lost_batches(runs: list[MapRunRecord], spec: JobSpec, services: Services) -> int:
    """Record as failed the objects of children that ended without recording them; returns
    how many objects are counted failed that way."""
    lost = 0
    for run in runs:
        for child in run.unfinished:
            if child.items is None:  # the input was left out: the count check below says so
                continue
            recorded = record_lost_batch(services, spec, child.items, child.reason)
            if recorded is not None:
                lost += recorded.counts.failed
    return lost


def _status(counts: Mapping[str, int], map_error: Any, miscounted: bool, *, dry_run: bool = False) -> str:
    """A dry run's objects end pending (what it would copy or restore): it succeeded when
    none failed."""
    if map_error or miscounted:
        return "FAILED"
    if counts["failed"] == 0 and (counts["pending"] == 0 or dry_run):
        return "SUCCEEDED"
    if counts["copied"] + counts["skipped"] == 0:
        return "FAILED"
    return "PARTIAL"


def _cause(summary: Mapping[str, Any]) -> str:
    """One paragraph for the execution's failure: what went wrong first, then the counts."""
    parts = []
    if summary.get("listing_error"):
        error = summary["listing_error"]
        parts.append(f"listing the source's versions stopped: {error['error']}: {error['cause']}")
    if summary.get("map_error"):
        parts.append(f"the Distributed Map stopped: {summary['map_error']['error']}")
    parts.extend(summary.get("count_problems") or [])
    objects = summary["objects"]
    counted = (
        f"{summary['failed']} of {plural(objects, 'object')} failed, {summary['pending']} pending "
        f"({summary['copied']} copied, {summary['skipped']} skipped)"
    )
    if summary.get("lost_in_unfinished_batches"):
        counted += f"; {summary['lost_in_unfinished_batches']} of the failures are objects of batches that did not finish"
    parts.append(counted)
    parts.append(f"failures: {summary['failures_report']}; summary: {summary['report']}")
    return "; ".join(parts)
