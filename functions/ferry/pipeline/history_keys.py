"""An all_versions job (`"options": {"all_versions": true}`): every version of each key under
the source prefix, oldest first, delete markers reproduced, as `ferry copy --all-versions` does
(engine/versions/version_copy.py), run by the pipeline.

How the keys reach the Map. The Distributed Map's S3 ItemReader lists current objects only
(s3:listObjectsV2): it would leave out every key whose latest version is a delete marker, and
knows nothing of older versions. So the pipeline lists the source's versions itself
(ListObjectVersions) and writes the keys that have a history as JSON Lines, one item per key:

    {"k": "photos/a.jpg", "n": 4, "s": 18350}     key, versions and delete markers, their bytes

ListObjectVersions answers 1,000 versions a page, so a bucket of tens of millions of versions
takes longer to list than one Lambda run (15 minutes). The listing is a loop of runs in the
parent state machine (ListVersions, then the Choice AllVersionsListed): each run (`list_run`)
lists page after page from where the last one stopped until its deadline (at least one page,
so every run moves on), writes the keys it finished as one part file, and hands on the
ListObjectVersions markers of its last page. Prepare only checks the job (versioning on both
sides, the source's versions listable) and starts the loop; `ferry run` runs the same loop.

A key's versions stay together: a key is written when its last version is listed, with all
its versions counted (`n`) whatever page or run they came in. The key the last page of a run
ends in may go on in the next page, so it is carried to the next run (`pending`, with its
counts so far) rather than written. Each key is written once, by the run that saw its end.

Which parts the Map reads. Each run writes its part and a manifest under names of its own
(`jobs/<id>/histories/<run>-<token>.jsonl` and `...-manifest.csv`): the manifest is the one
the run started from (its key in the state) plus the new part's S3 URI, one a line, the form
of an Athena data manifest. The Map reads the last run's manifest (ItemReader `ReaderConfig`
`ManifestType: ATHENA_DATA`, `InputType: JSONL`: every part it names, in order). So a run
that is retried (Step Functions retries a Lambda service error, which may come after the
function ran, or while it still runs) writes new files beside the first attempt's, and only
the attempt whose result the state machine took is chained in: no key twice, none lost.
The listing's end state is also kept as `jobs/<id>/histories/listed.json`, from which a
`ferry run --resume` reads the keys again.

A worker lists that one key's history again on both sides and copies it whole with the engine
(`copy_key_histories`), so all of a key's versions are written by one worker, in order: the
outcome does not rest on the order in which the Map hands out items or batches, which AWS's
documentation leaves open. Listing again at copy time also means what the manifest says of a
key (`n`, `s`) only sizes and routes the work: a history larger than the Lambda threshold goes
to the Fargate task whole.

Counts: every version (and delete marker) is one object of the job, copied and verified,
skipped (already held at its place in the destination's history) or failed, with its reason;
the report maps each source version to the destination version holding it. The Map's item is
the key, so the count check weighs the keys the Map read against the keys the ledger settled
(BatchCounts.items). A key that cannot be worked on at all (its batch lost, its listing refused)
is one failed object, named by its key, since its versions were never read. A re-run copies only
what the destination's history lacks. A listing that fails (the source refuses a page, or the
loop would outgrow the execution's history) fails the job with that reason: nothing is copied.

A key handed over at a Lambda pass's deadline goes to the next pass whole: the versions an
earlier pass wrote are found there by content and counted skipped ("already there").
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ferry.counts import plural
from ferry.engine.run.deadlines import deadline_in, due
from ferry.errors import ConfigError, FerryError
from ferry.filters import is_ferrys_own, marks_prefixes
from ferry.jobspec import JobSpec, parse_job_spec
from ferry.pipeline.job_reports import job_prefix
from ferry.pipeline.local_reports import ReportStore
from ferry.pipeline.reach import reached_otherwise
from ferry.pipeline.services import Services
from ferry.s3 import version_listing
from ferry.s3.clients import make_client
from ferry.s3.listing import matches
from ferry.s3.version_listing import Version, Wording, version_pages

# The most ListVersions runs one job may take. Each run costs the parent execution's history
# at most 8 events (TaskStateEntered, TaskScheduled, TaskStarted, TaskSubmitted, TaskSucceeded,
# TaskStateExited, then the Choice's ChoiceStateEntered and ChoiceStateExited), and each
# retried attempt 4 more (TaskScheduled, TaskStarted, TaskSubmitted, TaskFailed). The task's
# Retry allows 30 attempts more for a throttled invoke and 6 for a Lambda service error: at
# worst 8 + 36 x 4 = 152 events a run, so 160 runs stay within 24,320 of the execution's
# 25,000 events even if every run were retried to the end (1,280 if none is), leaving the rest
# for Prepare, the Map and Finalize (tests/pipeline/test_version_listing_runs.py derives this
# from the ASL). Each run lists until its deadline (the Lambda's 15 minutes less the deadline
# margin: 810 s), so runs are few: at a slow 1 s per ListObjectVersions page of 1,000
# versions, a run lists 810,000 versions and 160 runs 130 million; at a more usual 0.1-0.2 s
# a page, 4-8 million a run, 0.6-1.3 billion a job. A job that needs more runs fails with that
# reason before the limit (`ListingTooLong`).
MAX_LISTING_RUNS = 160


def histories_prefix(job_id: str) -> str:
    """Where the runs write the job's keys (the report store's keys: the report bucket on AWS)."""
    return f"{job_prefix(job_id)}histories/"


def listed_key(job_id: str) -> str:
    """The listing's end state, written by its last run (what a resumed `ferry run` reads)."""
    return f"{histories_prefix(job_id)}listed.json"


class ListingTooLong(FerryError):
    """The job's listing would take more runs than one execution's history holds."""


@dataclass
class Pending:
    """The key the last page listed ended in: its versions so far, and their bytes."""

    key: str
    versions: int = 0
    bytes: int = 0

    def add(self, version: Version) -> None:
        self.versions += 1
        self.bytes += version.size or 0

    def item(self) -> dict[str, Any]:
        return {"k": self.key, "n": self.versions, "s": self.bytes}

    @classmethod
    def from_item(cls, item: Mapping[str, Any] | None) -> Pending | None:
        return cls(str(item["k"]), int(item["n"]), int(item["s"])) if item else None


@dataclass
class VersionListing:
    """How far a job's version listing has got: what the parent carries from one ListVersions
    run to the next (`job.histories`), and what the Choice after each run reads (`done`,
    `keys`) and the Map then (`manifest`)."""

    runs: int = 0
    key_marker: str | None = None
    version_id_marker: str | None = None
    pending: dict[str, Any] | None = None  # Pending.item() of the key the last run ended in
    keys: int = 0  # written to the parts so far, and their versions and bytes
    versions: int = 0
    bytes: int = 0
    manifest: str | None = None  # the report store's key of the manifest naming every part
    done: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VersionListing:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def check_versioning(spec: JobSpec, source_client: Any, dest_client: Any) -> None:
    """version_listing.check_versioning, worded as the job spec is."""
    wording = Wording("options.all_versions", "source.bucket: bucket", "destination.bucket: bucket")
    version_listing.check_versioning(
        source_client,
        str(spec.source_bucket),
        spec.source_prefix,
        dest_client,
        spec.destination_bucket,
        wording,
    )


def source_client(spec: JobSpec, services: Services) -> Any:
    """The client the source's versions are listed with: the stack's own, or one for the
    configured role, region, endpoint or secret, as the workers reach it."""
    endpoint = services.endpoint("source", str(spec.source_bucket), spec.source_prefix)
    return make_client(endpoint, pool_size=4) if reached_otherwise(endpoint) else services.s3


def list_versions_step(
    job: Mapping[str, Any],
    services: Services,
    *,
    remaining_ms: int | None = None,
    bounded: bool = True,
) -> dict[str, Any]:
    """ListVersions: one run of the job's listing, until `remaining_ms` (less the deadline
    margin) runs out; the job with its listing moved on (`histories`). `bounded`: at most
    MAX_LISTING_RUNS runs; not on a machine, where no execution history bounds the loop."""
    listing = VersionListing.from_dict(job.get("histories") or {})
    if listing.done:  # a state machine redriven after the last run: nothing more to list
        return dict(job)
    spec = parse_job_spec(job["spec"])
    if bounded and listing.runs >= MAX_LISTING_RUNS:
        raise ListingTooLong(
            f"options.all_versions: listing the versions under s3://{spec.source_bucket}/{spec.source_prefix} "
            f"took {plural(listing.runs, 'run')} of 15 minutes ({plural(listing.keys, 'key')} and "
            f"{plural(listing.versions, 'version')} listed), more than one execution's history holds: "
            "split the job into jobs over narrower source.prefix values, or run it with `ferry run`"
        )
    deadline = None
    if remaining_ms is not None:
        deadline = deadline_in(remaining_ms / 1000 - services.settings.deadline_margin_seconds)
    listed = list_run(spec, source_client(spec, services), services.reports, listing, deadline=deadline)
    return {**job, "histories": listed.to_dict()}


def list_run(
    spec: JobSpec, client: Any, reports: ReportStore, listing: VersionListing, *, deadline: float | None
) -> VersionListing:
    """List pages from where `listing` stopped until `deadline` (at least one page) or the end;
    write the keys finished (those options.include / options.exclude take, Ferry's own upload
    marks left out) as a part, streamed (no key's versions held, only their counts), and a
    manifest naming every part so far; return the listing moved on."""
    token = uuid.uuid4().hex[:12]  # this attempt's own names: a retried run writes beside it
    walk = _Walk(spec, listing)
    items = walk.items(client, deadline)
    first = next(items, None)
    manifest = listing.manifest
    if first is not None:
        name = f"{histories_prefix(spec.job_id)}{listing.runs:05d}-{token}"
        reports.put_jsonl(f"{name}.jsonl", itertools.chain([first], items))
        earlier = reports.text(listing.manifest) if listing.manifest else ""
        manifest = f"{name}-manifest.csv"
        reports.put_text(manifest, earlier + reports.url(f"{name}.jsonl") + "\n")
    moved = VersionListing(
        runs=listing.runs + 1,
        key_marker=walk.key_marker,
        version_id_marker=walk.version_id_marker,
        pending=walk.pending.item() if walk.pending else None,
        keys=listing.keys + walk.keys,
        versions=listing.versions + walk.versions,
        bytes=listing.bytes + walk.bytes,
        manifest=manifest,
        done=walk.done,
    )
    if moved.done:
        reports.put_text(listed_key(spec.job_id), json.dumps(moved.to_dict()) + "\n")
    return moved


@dataclass
class _Walk:
    """One run's way through the pages: the keys it finished and where it stopped."""

    spec: JobSpec
    start: VersionListing
    key_marker: str | None = None
    version_id_marker: str | None = None
    pending: Pending | None = None
    done: bool = False
    keys: int = 0
    versions: int = 0
    bytes: int = 0
    marks: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        self.key_marker, self.version_id_marker = self.start.key_marker, self.start.version_id_marker
        self.pending = Pending.from_item(self.start.pending)
        self.marks = marks_prefixes(self.spec.options.policy.marks_prefix)

    def items(self, client: Any, deadline: float | None) -> Iterator[dict[str, Any]]:
        """The items of the keys whose last version this run lists, in key order."""
        spec = self.spec
        pages = version_pages(
            client,
            str(spec.source_bucket),
            spec.source_prefix,
            key_marker=self.key_marker,
            version_id_marker=self.version_id_marker,
        )
        for page in pages:
            for version in page.versions:
                if self.pending is not None and version.key != self.pending.key:
                    yield from self._finished(self.pending)
                    self.pending = None
                if self.pending is None:
                    self.pending = Pending(version.key)
                self.pending.add(version)
            self.key_marker, self.version_id_marker = page.next_key_marker, page.next_version_id_marker
            if page.next_key_marker is None:
                self.done = True
                break
            if due(deadline):  # the next page is the next run's
                return
        if self.pending is not None:  # the listing's end: its last key is whole
            yield from self._finished(self.pending)
            self.pending = None

    def _finished(self, history: Pending) -> Iterator[dict[str, Any]]:
        relative = history.key[len(self.spec.source_prefix) :]
        options = self.spec.options
        if is_ferrys_own(history.key, self.marks) or not matches(relative, options.include, options.exclude):
            return
        self.keys += 1
        self.versions += history.versions
        self.bytes += history.bytes
        yield history.item()


def history_items(reports: ReportStore, manifest: str) -> Iterator[dict[str, Any]]:
    """The items of every part the manifest names, in order: what the Map reads."""
    for part in part_keys(reports, manifest):
        yield from reports.rows(part)


def part_keys(reports: ReportStore, manifest: str) -> list[str]:
    """The report store's keys of the parts a manifest names (it holds their URLs)."""
    base = reports.url("")
    keys = []
    for line in reports.text(manifest).splitlines():
        if not line.strip():
            continue
        if not line.startswith(base):
            raise ConfigError(f"{reports.url(manifest)}: {line!r} is not one of the job's parts")
        keys.append(line[len(base) :].lstrip("/"))
    return keys


def completed_listing(reports: ReportStore, job_id: str) -> VersionListing | None:
    """The job's listing as its last run left it, or None if it never ended (a run stopped
    while listing: a resume lists again)."""
    try:
        return VersionListing.from_dict(json.loads(reports.text(listed_key(job_id))))
    except (OSError, ClientError, BotoCoreError, ValueError):
        return None
