"""The `replications` setting: which source prefix is kept in step with which destination.

One entry per replication (the shared shape of issue 11):

    {"name": "photos", "source": {"bucket": ..., "prefix": ..., "owner": ...},
     "destination": {...}, "options": {...job options...},
     "batch_size": 1000, "batch_window_seconds": 60, "max_concurrent_batches": 2,
     "deletes": false}

The CDK app builds, per entry, an EventBridge rule, a queue and a starter function; the
starter reads its entry back from its environment (`to_environment` / `from_environment`),
so the two cannot disagree. Everything is checked here, at synth time, with the job spec's
own validator: a replication whose job Prepare would refuse never deploys.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote_plus

from ferry.errors import ConfigError
from ferry.filters import marks_prefixes
from ferry.jobspec import as_folder, check_not_overlapping, parse_options
from ferry.pipeline.locations import ACCESS_FIELDS, Location

NAME = re.compile(r"[A-Za-z0-9-]{1,40}")  # matched whole: `$` would let a trailing newline through
FIELDS = (
    "name",
    "source",
    "destination",
    "options",
    "batch_size",
    "batch_window_seconds",
    "max_concurrent_batches",
    "deletes",
)
# Lambda's SQS event source mapping: up to 10 messages a batch without a batching window, up
# to 10,000 with one; the window is 0 to 300 seconds (Lambda developer guide,
# services-sqs-configure.html; CDK SqsEventSourceProps).
MANIFEST_NAME = "events.jsonl"  # jobs/<replication name>-<batch hash>/events.jsonl, report bucket
MAX_BATCH_SIZE, MAX_BATCH_WINDOW_SECONDS, MAX_BATCH_WITHOUT_WINDOW = 10_000, 300, 10
# The event source mapping's ScalingConfig.MaximumConcurrency: 2 to 1000 (Lambda API reference,
# ScalingConfig). Without it Lambda scales its pollers with the queue, and a burst is taken as
# many small batches at once, each a whole job; bounded, the queue holds the rest and the
# batches fill up. Lambda's smallest bound is the default: a starter handles a batch in seconds.
MIN_CONCURRENT_BATCHES, MAX_CONCURRENT_BATCHES, DEFAULT_CONCURRENT_BATCHES = 2, 1000, 2
# With deletes on, the starter applies a batch's deletions one after another, each a few
# requests (HEAD source, HEAD destination, GetItem, DeleteObject, DeleteItem): at 100 ms a
# request (another region, a role to assume) 1,000 take about 500 s of Lambda's 900 s.
MAX_BATCH_SIZE_WITH_DELETES, STARTER_TIMEOUT_WITH_DELETES_SECONDS = 1000, 900


@dataclass(frozen=True)
class Replication:
    """One configured replication (the values of its `replications[i]` entry)."""

    name: str
    source: Location
    destination: Location
    options: Mapping[str, Any] = field(default_factory=dict, compare=False)
    batch_size: int = 1000
    batch_window_seconds: int = 60
    deletes: bool = False
    max_concurrent_batches: int = DEFAULT_CONCURRENT_BATCHES

    @classmethod
    def parse(cls, data: Any, where: str) -> Replication:
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: give an object with name, source and destination")
        unknown = set(data) - set(FIELDS)
        if unknown:
            raise ConfigError(
                f"{where}: unknown field(s) {', '.join(sorted(unknown))}: known are {', '.join(FIELDS)}"
            )
        name = data.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ConfigError(f"{where}.name: {name!r} must be 1-40 letters, digits or '-'")
        where = f"{where} ({name})"
        source = Location.parse(data.get("source"), f"{where}.source")
        destination = Location.parse(data.get("destination"), f"{where}.destination")
        # Only the prefix changes: how the location is reached (role, region, endpoint, secret)
        # stays with it, for the starter's deletes and the workers' copies alike.
        source = replace(source, prefix=as_folder(source.prefix))
        destination = replace(destination, prefix=as_folder(destination.prefix))
        if (source.bucket, source.prefix) == (destination.bucket, destination.prefix):
            raise ConfigError(
                f"{where}.destination: s3://{destination.bucket}/{destination.prefix} is the source itself: "
                "every copy would be a new event for the same keys; choose another destination"
            )
        options = data.get("options") or {}
        try:
            parsed = parse_options(options)
            check_not_overlapping(
                source.bucket, source.prefix, destination.bucket, destination.prefix, parsed
            )
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}") from error
        if not parsed.policy.skip_existing:
            # A redelivered or overlapping event batch must cost a listing, not a second copy.
            raise ConfigError(
                f"{where}.options.skip_existing: a replication always skips objects already identical at "
                "the destination (events are delivered at least once); remove the option"
            )
        batch_size = _whole(data.get("batch_size", 1000), f"{where}.batch_size", 1, MAX_BATCH_SIZE)
        window = _whole(
            data.get("batch_window_seconds", 60), f"{where}.batch_window_seconds", 0, MAX_BATCH_WINDOW_SECONDS
        )
        if batch_size > MAX_BATCH_WITHOUT_WINDOW and window == 0:
            raise ConfigError(
                f"{where}.batch_window_seconds: Lambda takes more than {MAX_BATCH_WITHOUT_WINDOW} messages a "
                "batch only with a batching window: give 1 or more seconds, or a batch_size of 10 or less"
            )
        deletes = data.get("deletes", False)
        if not isinstance(deletes, bool):
            raise ConfigError(f"{where}.deletes: must be true or false")
        if deletes and batch_size > MAX_BATCH_SIZE_WITH_DELETES:
            raise ConfigError(
                f"{where}.batch_size: {batch_size} deletions one after another may outrun the starter's "
                f"{STARTER_TIMEOUT_WITH_DELETES_SECONDS} s (a few requests each); with deletes on give "
                f"{MAX_BATCH_SIZE_WITH_DELETES} or less"
            )
        concurrency = _whole(
            data.get("max_concurrent_batches", DEFAULT_CONCURRENT_BATCHES),
            f"{where}.max_concurrent_batches",
            MIN_CONCURRENT_BATCHES,
            MAX_CONCURRENT_BATCHES,
        )
        return cls(name, source, destination, dict(options), batch_size, window, deletes, concurrency)

    @property
    def marks(self) -> tuple[str, ...]:
        """Where Ferry keeps its upload marks in a bucket (filters.marks_prefixes): events for
        keys there name no object of the replication."""
        return marks_prefixes(parse_options(self.options).policy.marks_prefix)

    def job_spec(self, job_id: str, manifest_bucket: str, manifest_key: str) -> dict[str, Any]:
        """The job one drained event batch starts: the manifest's rows, copied from the source
        prefix to the destination prefix with the configured options, identical objects skipped."""
        return {
            "job_id": job_id,
            "source": {
                "bucket": self.source.bucket,
                "prefix": self.source.prefix,
                "manifest": {"bucket": manifest_bucket, "key": manifest_key, "format": "jsonl"},
            },
            "destination": {"bucket": self.destination.bucket, "prefix": self.destination.prefix},
            "options": {**self.options, "skip_existing": True},
            # jobspec.ReplicationTag: with deletes on, the copy path writes a copy record per
            # object, which is what lets a later "Object Deleted" event prove Ferry's copy.
            "replication": {"name": self.name, "deletes": self.deletes},
        }

    def to_environment(self) -> str:
        return json.dumps(
            {
                "name": self.name,
                "source": _location(self.source),
                "destination": _location(self.destination),
                "options": dict(self.options),
                "batch_size": self.batch_size,
                "batch_window_seconds": self.batch_window_seconds,
                "max_concurrent_batches": self.max_concurrent_batches,
                "deletes": self.deletes,
            },
            sort_keys=True,
        )

    @classmethod
    def from_environment(cls, text: str) -> Replication:
        return cls.parse(json.loads(text), "FERRY_REPLICATION")


def parse_replications(
    value: Any, sources: tuple[Location, ...], destinations: tuple[Location, ...]
) -> tuple[Replication, ...]:
    """The `replications` setting; each must lie inside a configured source and destination
    (the workers' IAM is built from `sources` and `destinations` only)."""
    if not isinstance(value, list):
        raise ConfigError("replications: must be a list of {name, source, destination} objects")
    found = tuple(Replication.parse(v, f"replications[{i}]") for i, v in enumerate(value))
    names = [r.name for r in found]
    for name in sorted({n for n in names if names.count(n) > 1}):
        raise ConfigError(f"replications: the name {name!r} is used twice; each replication needs its own")
    return tuple(
        replace(
            r,
            source=_reached_as_workers(r.name, "source", r.source, sources),
            destination=_reached_as_workers(r.name, "destination", r.destination, destinations),
        )
        for r in found
    )


def _reached_as_workers(name: str, side: str, loc: Location, configured: tuple[Location, ...]) -> Location:
    """The replication's location, reached as the workers reach it: they copy its jobs through
    the configured `sources`/`destinations` entry with the longest prefix covering it
    (FERRY_LOCATIONS, ferry.pipeline.reach), so the starter's deletes must go the same way.
    A replication that names no role, region, endpoint or secret takes that entry's; one that
    names others is refused rather than copied one way and deleted another."""
    covering = [c for c in configured if c.covers(loc.bucket, loc.prefix)]
    if not covering:
        plural = "sources" if side == "source" else "destinations"
        raise ConfigError(
            f"replications ({name}).{side}: s3://{loc.bucket}/{loc.prefix} is not inside any of "
            f"'{plural}': add it there too (the workers may {'read' if side == 'source' else 'write'} only those)"
        )
    entry = max(covering, key=lambda c: len(c.prefix))
    if loc.reached_otherwise and loc.access() != entry.access():
        plural = "sources" if side == "source" else "destinations"
        mine, theirs = loc.access(), entry.access()
        differing = ", ".join(k for k in ACCESS_FIELDS if mine.get(k) != theirs.get(k))
        raise ConfigError(
            f"replications ({name}).{side}: {differing} not as on the '{plural}' entry "
            f"s3://{entry.bucket}/{entry.prefix} the workers copy it through: set them there, not here"
        )
    return replace(loc, owner=loc.owner or entry.owner, **entry.access())


def _location(loc: Location) -> dict[str, Any]:
    """Every field of the location (Location.parse reads them all back): its owner and how it
    is reached, never credentials (only a secret's name)."""
    data: dict[str, Any] = {"bucket": loc.bucket, "prefix": loc.prefix}
    if loc.owner:
        data["owner"] = loc.owner
    data.update(loc.access())
    return data


def _whole(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: must be a whole number, not {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{where}: {value} is out of range ({low} to {high})")
    return value


def event_key_prefixes(prefix: str) -> list[str]:
    """The key prefixes an EventBridge rule matches a source prefix under: as written and
    URL-encoded, as an event may spell its key either way (ferry.pipeline.replication.event_keys). The
    stack's own rule and the rule `ferry policy` prints for another account's bucket use
    these, so both let the same events through."""
    return list(dict.fromkeys([quote_plus(prefix, safe="/"), prefix]))
