"""A pipeline job run on this machine (`ferry run`): the state machines' steps, in Python,
calling the very functions the Lambda and Fargate workers call.

    Prepare            jobs.prepare (validate the spec, check access, create the job record)
    ListVersions loop  an all_versions job's keys: history_keys.list_versions_step, run after
                       run (each until `pass_seconds`), until the listing is done
    Distributed Map    item_reader.read_items + item_reader.batches (ItemReader, ItemBatcher),
                       `concurrency` batches at once (MaxConcurrency)
      child workflow   batches.copy_batch (CopyBatch); a pass that leaves work is read back
                       from the ledger (batches.resume_hand_over: ResumeHandOver, which the
                       Lambda's FerryHandOver leads to) and the next pass gets what it
                       handed over (NextPass); retried like the CopyBatch task, else
                       passes.record_failure (RecordFailedBatch); then
                       batches.copy_large_object per large object
                       (the Fargate task), else record_failure with the object (RecordFailedLargeObject)
    Finalize           `finalize_local`: the ledger's tally checked against the items read,
                       the report (summary.json, failures.jsonl), the job's status

What a machine has that Lambda has not: no 15-minute limit. A pass still ends at a deadline
(`pass_seconds`, by default Lambda's 900 s less the deadline margin), so the hand-over and
checkpoints work here as there.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ferry.engine.run.deadlines import stopping
from ferry.errors import ConfigError, FerryError
from ferry.jobspec import validate_job_spec
from ferry.limits import TiB
from ferry.pipeline.batches import (
    batch_id_for,
    copy_batch,
    copy_large_object,
    hands_work_over,
    large_object_recorded,
    resume_hand_over,
)
from ferry.pipeline.history_keys import VersionListing, completed_listing, list_versions_step
from ferry.pipeline.item_reader import batches, read_items
from ferry.pipeline.jobs import job_input, prepare, recorded_job, settle_job
from ferry.pipeline.ledger.contract import INTERRUPTED, RUNNING
from ferry.pipeline.passes import record_failure
from ferry.pipeline.run_journal import RunJournal
from ferry.pipeline.services import Services
from ferry.pipeline.settings import PipelineSettings, WorkerSettings

log = logging.getLogger(__name__)

LAMBDA_SECONDS = 900  # a CopyBatch pass on AWS lasts at most this (the Lambda timeout)


def _default(name: str) -> Any:
    return next(f.default for f in fields(PipelineSettings) if f.name == name)


def local_settings(
    *,
    max_items_per_batch: int | None = None,
    max_input_bytes_per_batch: int | None = None,
    concurrency: int = 4,
    large_object_threshold: int | None = None,
    large_object_concurrency: int | None = None,
    max_passes: int | None = None,
    memory_limit: int,
    kms_key_ids: tuple[str, ...] = (),
    table_name: str = "",
) -> WorkerSettings:
    """The workers' settings for a run on this machine: the pipeline's defaults (cdk.json's
    `ferry` context), with the few a user may change from the command line. The large-object
    threshold may go below Lambda's 16 MiB floor here: locally it only chooses the path."""
    values = {
        "max_items_per_batch": max_items_per_batch or _default("max_items_per_batch"),
        "max_input_bytes_per_batch": max_input_bytes_per_batch or _default("max_input_bytes_per_batch"),
        "large_object_threshold": large_object_threshold or _default("large_object_threshold"),
        "large_object_concurrency": large_object_concurrency or _default("fargate_max_concurrency"),
        "max_passes": max_passes or _default("max_passes"),
    }
    checks = {
        "max_items_per_batch": (1, 10_000),
        "max_input_bytes_per_batch": (1024, 256 * 1024),
        "large_object_threshold": (1, 5 * TiB),
        "large_object_concurrency": (1, 64),
        "max_passes": (1, 1000),
    }
    for name, (low, high) in checks.items():
        if not low <= values[name] <= high:
            raise ConfigError(f"--{name.replace('_', '-')}: {values[name]} is out of range ({low} to {high})")
    if not 1 <= concurrency <= 64:
        raise ConfigError(f"--batch-concurrency: {concurrency} is out of range (1 to 64)")
    return WorkerSettings(
        table_name=table_name,  # the DynamoDB ledger's, with --table (replication copy records)
        report_bucket="",
        max_concurrency=concurrency,
        tolerated_failure_percentage=100,
        deadline_margin_seconds=_default("deadline_margin_seconds"),
        checkpoint_ttl_days=_default("checkpoint_ttl_days"),
        memory_limit=memory_limit,
        copy_object_mib_per_second=_default("copy_object_mib_per_second"),
        # Locally the user's own identity decides which keys it may encrypt with.
        destination_kms_key_arns=kms_key_ids,
        **values,
    )


@dataclass
class Listing:
    """How far the reader has got: items read, the objects they hold (an all_versions job's
    item is a key with `n` versions when listed; any other item is one object), and whether
    it has read them all."""

    items: int = 0
    objects: int = 0
    complete: bool = False


def run_job(
    spec: Mapping[str, Any],
    services: Services,
    *,
    job_id: str | None = None,
    pass_seconds: float = LAMBDA_SECONDS - _default("deadline_margin_seconds"),
    large_pass_seconds: float = 90.0,
    attempts: int = 3,
    on_listed: Callable[[Listing], None] = lambda listing: None,
    journal_root: Path | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Run one job, as the parent state machine does, and return Finalize's summary. Raises
    ConfigError when Prepare refuses the job (nothing is copied then).

    With `journal_root`, each batch is journaled as it is handed out (run_journal), so that a
    run stopped early (engine.run.deadlines.stop_all: Ctrl-C, SIGTERM) can be resumed: the job is
    then recorded INTERRUPTED, not finalized, and `resume=True` (with `job_id`) replays the
    journaled batches from their ledger records and reads on from where the reader stopped."""
    if resume:
        if not job_id or journal_root is None:
            raise ConfigError("--resume needs the job's id and the folder its run journaled to")
        job = resume_job(spec, job_id, services)
    else:
        job = prepare({"spec": spec, "execution_name": job_id or new_job_id()}, services)
    journal = RunJournal.for_job(journal_root, job["job_id"]) if journal_root is not None else None
    listing_error: dict[str, str] | None = None
    if job["reader"] == "versions":
        job, listing_error = list_all_versions(job, services, pass_seconds)
        if listing_error is None and not job["histories"]["done"]:  # stopped while listing
            if journal is not None:
                if not resume:
                    journal.start()
                return interrupted(job["job_id"], services, 0)
            listing_error = {"Error": "Interrupted", "Cause": "the run was stopped before the listing ended"}
        if listing_error is not None:
            return finalize_local(job["job_id"], services, 0, listing_error=listing_error)
    if journal is not None and not resume:
        journal.start()
    settings = services.settings
    batch_input = {
        "job": {
            "job_id": job["job_id"],
            "limits": {"large_object_concurrency": settings.large_object_concurrency},
        }
    }
    listing = Listing()
    map_error: dict[str, str] | None = None
    child = _Child(services, pass_seconds, large_pass_seconds, attempts)
    with ThreadPoolExecutor(settings.max_concurrency, thread_name_prefix="ferry-batch") as pool:
        running: set[Future[None]] = set()

        def hand_out(run: Callable[[Mapping[str, Any], list[Any]], None], chunk: list[Any]) -> None:
            nonlocal running
            listing.items += len(chunk)
            listing.objects += sum(_objects_in(item) for item in chunk)
            on_listed(listing)
            if len(running) >= settings.max_concurrency:  # MaxConcurrency: read no further ahead
                _, running = wait(running, return_when=FIRST_COMPLETED)
            running.add(pool.submit(child.run_safely, run, batch_input["job"], chunk))

        try:
            last: Any = None
            if resume and journal is not None:  # the batches handed out before: each from its records
                for chunk in journal.batches():
                    hand_out(child.resume, chunk)
                    last = chunk[-1]
            after = (listing.items, last) if listing.items else None
            for chunk in batches(
                read_items(services.s3, job, after=after, reports=services.reports),
                max_items=settings.max_items_per_batch,
                max_bytes=settings.max_input_bytes_per_batch,
                batch_input=batch_input,
            ):
                if stopping():
                    break
                if journal is not None:
                    journal.handed_out(chunk)
                hand_out(child.run, chunk)
        except (FerryError, ClientError, BotoCoreError, OSError) as error:
            # The ItemReader failed mid-way: the Map stops, what it handed out still finishes,
            # and Finalize says the job FAILED with the reader's error.
            map_error = {"Error": "States.ItemReaderFailed", "Cause": str(error)}
        else:
            listing.complete = not stopping()
            on_listed(listing)
        wait(running)
    if stopping() and journal is not None and map_error is None:
        return interrupted(job["job_id"], services, listing.items)
    return finalize_local(job["job_id"], services, listing.items, map_error)


def list_all_versions(
    job: dict[str, Any], services: Services, pass_seconds: float
) -> tuple[dict[str, Any], dict[str, str] | None]:
    """The parent's ListVersions loop (AllVersionsListed sends it round until `done`): each run
    lists until `pass_seconds`, as a Lambda run until its deadline. Returns the job moved on
    and, if a run failed, its error (the state's Catch takes it to Finalize: the job FAILED).
    No limit on the runs here: only an execution's history bounds them on AWS."""
    remaining_ms = int((pass_seconds + services.settings.deadline_margin_seconds) * 1000)
    while not job["histories"]["done"] and not stopping():
        try:
            job = list_versions_step(job, services, remaining_ms=remaining_ms, bounded=False)
        except (FerryError, ClientError, BotoCoreError, OSError) as error:
            return job, {"Error": type(error).__name__, "Cause": str(error)}
    return job, None


def _objects_in(item: Any) -> int:
    """The objects one item stands for, as far as the reader knows: a history's versions."""
    versions = item.get("n") if isinstance(item, Mapping) and "k" in item and "n" in item else None
    return versions if isinstance(versions, int) and versions > 0 else 1


def resume_job(spec: Mapping[str, Any], job_id: str, services: Services) -> dict[str, Any]:
    """The Map's input for a job a run left unfinished (INTERRUPTED; or RUNNING after a crash
    of the process that ran it), once its spec is proved the one it ran with."""
    record = services.ledger.job(job_id)
    if record is None:
        raise ConfigError(
            f"--resume: no job {job_id!r} in this ledger; give the --ledger (or --table) it ran with"
        )
    if record.get("status") not in (RUNNING, INTERRUPTED):
        raise ConfigError(f"--resume: job {job_id!r} is {record.get('status')}: there is nothing to resume")
    checked = validate_job_spec({**spec, "job_id": job_id} if isinstance(spec, Mapping) else spec)
    if checked.to_dict() != record.get("spec"):
        raise ConfigError(
            f"--resume: this spec is not the one job {job_id!r} ran with; resume it with the same JOB.json"
        )
    services.ledger.mark_job(job_id, RUNNING)
    job = job_input(checked, services)
    if checked.options.all_versions:  # the keys its listing wrote; none if it never ended
        job["histories"] = (completed_listing(services.reports, job_id) or VersionListing()).to_dict()
    return job


def interrupted(job_id: str, services: Services, read: int) -> dict[str, Any]:
    """A run stopped early: the job is recorded INTERRUPTED (never left RUNNING) with what its
    batches recorded so far; nothing is finalized, so a resume can finish it."""
    services.ledger.mark_job(job_id, INTERRUPTED)
    return {"job_id": job_id, "status": INTERRUPTED, "read": read, **services.ledger.tally(job_id).to_dict()}


def new_job_id() -> str:
    """A job id for a spec without one, as an execution name would be (unique, readable)."""
    return time.strftime("run-%Y%m%d-%H%M%S-", time.gmtime()) + uuid.uuid4().hex[:6]


@dataclass
class _Child:
    """One batch's child workflow (statemachine/copy_batch.asl.json)."""

    services: Services
    pass_seconds: float
    large_pass_seconds: float
    attempts: int

    def run_safely(
        self, run: Callable[[Mapping[str, Any], list[Any]], None], job: Mapping[str, Any], items: list[Any]
    ) -> None:
        """A child that fails outside its Catch (recording a failure failed too) leaves its
        objects out of the ledger: Finalize's count check then fails the job, with both
        numbers, as it does on AWS."""
        try:
            run(job, items)
        except Exception:
            log.exception("a batch of %d objects ended without recording them", len(items))

    def run(self, job: Mapping[str, Any], items: list[Any]) -> None:
        self._passes(job, {"job": job, "items": items, "pass": 1})

    def resume(self, job: Mapping[str, Any], items: list[Any]) -> None:
        """A batch an earlier run handed out: the passes its ledger recorded are read back
        (resume_hand_over), not run again; the child goes on from the first unrecorded pass."""
        event: dict[str, Any] = {"job": job, "items": items, "pass": 1}
        while True:
            batch_id = event.get("batch_id") or batch_id_for(job["job_id"], items)
            if self.services.ledger.batch(job["job_id"], f"{batch_id}-p{event['pass']}") is None:
                self._passes(job, event)
                return
            result = resume_hand_over(event, self.services)
            if not result["remaining"]:
                self._large_objects(job, result)
                return
            event = _next_pass(job, result)

    def _passes(self, job: Mapping[str, Any], event: dict[str, Any]) -> None:
        remaining_ms = int((self.pass_seconds + self.services.settings.deadline_margin_seconds) * 1000)
        while True:  # CopyBatch (-> ResumeHandOver -> WhatIsLeft -> NextPass)
            try:
                result = self._retried(lambda e=event: copy_batch(e, self.services, remaining_ms))
            except Exception as error:  # Catch States.ALL -> RecordFailedBatch
                log.warning("batch pass failed for good, recording its objects as failed: %s", error)
                result = record_failure({**event, "error": _error(error)}, self.services)
            else:
                if hands_work_over(result):  # ResumeHandOver: the hand-over as the ledger recorded it
                    # No Catch, as on AWS: a resume that fails for good ends the child (run_safely).
                    result = self._retried(lambda e=event: resume_hand_over(e, self.services))
            if not result["remaining"] or stopping():  # stopped: a resume starts the next pass
                break
            event = _next_pass(job, result)
        if result["remaining"]:
            return
        self._large_objects(job, result)

    def _large_objects(self, job: Mapping[str, Any], result: Mapping[str, Any]) -> None:
        """CopyLargeObjects: one task per object not yet settled, large_object_concurrency at once."""
        large = [
            item
            for item in result.get("large") or []
            if not large_object_recorded(self.services, job["job_id"], result["batch_id"], item)
        ]
        if large and not stopping():
            width = self.services.settings.large_object_concurrency
            with ThreadPoolExecutor(width, thread_name_prefix="ferry-large") as pool:
                list(pool.map(lambda item: self._large(job, result["batch_id"], item), large))

    def _large(self, job: Mapping[str, Any], batch_id: str, item: Mapping[str, Any]) -> None:
        try:
            if stopping():  # not started: a resume copies it
                return
            self._retried(
                lambda: copy_large_object(
                    job["job_id"],
                    batch_id,
                    item,
                    self.services,
                    keep_going=lambda: not stopping(),
                    pass_seconds=self.large_pass_seconds,
                )
            )
        except Exception as error:  # -> RecordFailedLargeObject
            log.warning("large object failed for good, recording it as failed: %s", error)
            record_failure(
                {"job": job, "batch_id": batch_id, "large_item": item, "error": _error(error)}, self.services
            )

    def _retried(self, call: Callable[[], Any]) -> Any:
        """The task's Retry: a few attempts with backoff (each attempt resumes from the
        ledger and the checkpoints, so nothing is counted or copied twice)."""
        for attempt in range(1, self.attempts + 1):
            try:
                return call()
            except Exception:
                if attempt == self.attempts:
                    raise
                log.warning("attempt %d failed; retrying", attempt, exc_info=True)
                time.sleep(min(2.0**attempt, 10.0))
        raise AssertionError("unreachable")


def _next_pass(job: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    """NextPass: what the child's next CopyBatch pass gets."""
    return {
        "job": job,
        "items": result["remaining"],
        "large": result["large"],
        "pass": result["next_pass"],
        "batch_id": result["batch_id"],
        "counts": result["counts"],
    }


def _error(error: BaseException) -> dict[str, str]:
    """An exception as the state machine's Catch would carry it ($.error)."""
    return {"Error": type(error).__name__, "Cause": str(error)[:32_768]}


def finalize_local(
    job_id: str,
    services: Services,
    listed: int,
    map_error: Mapping[str, str] | None = None,
    *,
    listing_error: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Finalize for a local run: the items the reader listed stand in for DescribeMapRun's
    count (the check that every listed object is in the ledger), then the same report,
    status, cause and HTML page as `jobs.finalize`."""
    job, spec = recorded_job(services, job_id)
    return settle_job(job, spec, services, read=listed, map_error=map_error, listing_error=listing_error)


def job_rows(services: Services, job_id: str) -> Iterator[dict[str, Any]]:
    """Every object's result of a job, as recorded (one line of a batch report each, only
    the attempts the ledger counted): what `ferry run --report` and the HTML report list."""
    for marker in services.ledger.batches(job_id):
        if marker.get("report_key"):
            yield from services.reports.rows(marker["report_key"])
