"""An all_versions job (`"options": {"all_versions": true}`): every version of each key under
the source prefix, oldest first, delete markers reproduced, as `ferry copy --all-versions` does
(engine/version_copy.py), run by the pipeline.

How the keys reach the Map. The Distributed Map's S3 ItemReader lists current objects only
(s3:listObjectsV2): it would leave out every key whose latest version is a delete marker, and
knows nothing of older versions. So Prepare lists the source's versions itself
(ListObjectVersions, `list_histories`) and writes the keys that have a history as a JSON Lines
manifest, `jobs/<job id>/histories.jsonl` beside the job's report, one item per key:

    {"k": "photos/a.jpg", "n": 4, "s": 18350}     key, versions and delete markers, their bytes

The Map reads it as it reads a JSON Lines manifest. A worker lists that one key's history again
on both sides and copies it whole with the engine (`copy_key_histories`), so all of a key's
versions are written by one worker, in order: the outcome does not rest on the order in which
the Map hands out items or batches, which AWS's documentation leaves open. Listing again at copy
time also means what the manifest says of a key (`n`, `s`) only sizes and routes the work: a
history larger than the Lambda threshold goes to the Fargate task whole.

Counts: every version (and delete marker) is one object of the job, copied and verified,
skipped (already held at its place in the destination's history) or failed, with its reason;
the report maps each source version to the destination version holding it. The Map's item is
the key, so the count check weighs the keys the Map read against the keys the ledger settled
(BatchCounts.items). A key that cannot be worked on at all (its batch lost, its listing refused)
is one failed object, named by its key, since its versions were never read. A re-run copies only
what the destination's history lacks.

A key handed over at a Lambda pass's deadline goes to the next pass whole: the versions an
earlier pass wrote are found there by content and counted skipped ("already there").
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ferry.counts import plural
from ferry.engine.deadlines import due
from ferry.errors import ConfigError
from ferry.filters import is_ferrys_own, marks_prefixes
from ferry.jobspec import JobSpec
from ferry.pipeline.job_reports import job_prefix
from ferry.pipeline.local_reports import ReportStore
from ferry.s3 import version_listing
from ferry.s3.listing import matches
from ferry.s3.version_listing import Wording, histories

HISTORIES_FILE = "histories.jsonl"


def histories_key(job_id: str) -> str:
    """Where Prepare writes the job's keys (the report store's key: the report bucket on AWS)."""
    return f"{job_prefix(job_id)}{HISTORIES_FILE}"


@dataclass
class Listed:
    """What Prepare's listing found: the keys written to the manifest, their versions and bytes."""

    key: str
    keys: int = 0
    versions: int = 0
    bytes: int = 0
    seconds: float = field(default=0.0, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "keys": self.keys, "versions": self.versions, "bytes": self.bytes}


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


def list_histories(
    spec: JobSpec, source_client: Any, reports: ReportStore, *, deadline: float | None = None
) -> Listed:
    """List the source's versions under the prefix and write the keys with a history (those
    options.include / options.exclude take, Ferry's own upload marks left out) to the job's
    manifest, streamed: one key's versions in memory at a time. A listing that would outlast
    `deadline` (Prepare's Lambda time) refuses the job, naming how far it got."""
    listed = Listed(histories_key(spec.job_id))
    started = time.monotonic()
    reports.put_jsonl(listed.key, _items(spec, source_client, listed, started, deadline))
    listed.seconds = time.monotonic() - started
    return listed


def _items(
    spec: JobSpec, client: Any, listed: Listed, started: float, deadline: float | None
) -> Iterator[dict[str, Any]]:
    prefix, options = spec.source_prefix, spec.options
    marks = marks_prefixes(options.policy.marks_prefix)
    for history in histories(client, str(spec.source_bucket), prefix):
        if due(deadline):
            raise ConfigError(
                f"options.all_versions: listing the versions under s3://{spec.source_bucket}/{prefix} "
                f"took longer than Prepare may run ({plural(listed.keys, 'key')} and "
                f"{plural(listed.versions, 'version')} in {time.monotonic() - started:.0f} s): split the "
                "job into jobs over narrower source.prefix values, or run it with `ferry run`"
            )
        relative = history.key[len(prefix) :]
        if is_ferrys_own(history.key, marks) or not matches(relative, options.include, options.exclude):
            continue
        size = sum(v.size or 0 for v in history.versions)
        listed.keys += 1
        listed.versions += len(history.versions)
        listed.bytes += size
        yield {"k": history.key, "n": len(history.versions), "s": size}
