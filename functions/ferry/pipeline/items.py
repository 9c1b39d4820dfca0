"""From a Distributed Map item to the object to copy and where it lands (`Planned`), and what
became of it in a pass (`ItemOutcome`).

Items come in five shapes, one per reader (an all_versions job's keys, `{"k", "n", "s"}`, are
the fifth: pipeline/history_keys.py): ListObjectsV2 entries (`Key`, `Size`, `Etag`...,
renamed `k`, `s`, `e`... by the parent's ItemSelector: ferry.listed_items),
CSV rows (header names as written: `key`, `bucket`, `version_id`), JSON Lines objects (the
same names), and S3 Inventory rows (`Bucket`, `Key` URL-encoded, `VersionId`, `IsLatest`,
`IsDeleteMarker`, `Size`...). Names are matched without regard to case or `_`, so `VersionId`,
`versionId` and `version_id` are one field.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from ferry.filters import is_ferrys_own, marks_prefixes
from ferry.jobspec import JobSpec, changes_attributes
from ferry.limits import MAX_OBJECT_SIZE
from ferry.listed_items import expand
from ferry.models import CopyResult, SourceObject, Target
from ferry.s3.listing import matches

OWN_MARK = "one of Ferry's own upload marks: never copied as an object"


@dataclass(frozen=True)
class Planned:
    """An item either becomes a copy (`obj`, `target`) or is settled without one (`skip` or
    `fail` says why), so every item listed ends in the job's counts."""

    item: Mapping[str, Any]
    obj: SourceObject | None = None
    target: Target | None = None
    skip: str | None = None
    fail: str | None = None

    @property
    def key(self) -> str:
        return self.obj.key if self.obj else str(_field(_columns(self.item), "key") or "")


@dataclass
class ItemOutcome:
    """What one planned item's copy in a pass came to: its results (an object's one, or a key's
    one per version, oldest first), or `handed_over`: the pass's deadline came first, and the
    item goes to the next pass (or the Fargate task) whole, its results here not recorded."""

    results: list[CopyResult]
    handed_over: bool = False


def plan_item(item: Mapping[str, Any], spec: JobSpec) -> Planned:
    """What to do with one item. `Planned.item` stays the item as it came (a listed one in its
    short names), so what a pass hands over is no larger than what the Map gave it."""
    where = f" (in s3://{spec.manifest.bucket}/{spec.manifest.key})" if spec.manifest else ""
    if not isinstance(item, Mapping):
        return Planned({"item": item}, fail=f"manifest row is not an object: {item!r:.200}{where}")
    if spec.reader == "versions":
        return _plan_history(item, spec)
    fields = _columns(expand(item) if spec.reader == "listing" else item)
    raw_key = _field(fields, "key")
    if not isinstance(raw_key, str) or raw_key == "":
        return Planned(item, fail=f"manifest row has no key: {dict(item)!r:.300}{where}")
    inventory = spec.reader == "inventory"
    key = unquote_plus(raw_key) if inventory else raw_key
    bucket = _field(fields, "bucket") or spec.source_bucket
    if not bucket:
        return Planned(item, fail="manifest row names no bucket and the job's source.bucket is not set")
    version_id = _field(fields, "version_id") or None
    size, wrong_size = _size(_field(fields, "size"))
    obj = SourceObject(
        bucket=str(bucket),
        key=key,
        version_id=str(version_id) if version_id else None,
        size=size,
        etag=(str(_field(fields, "etag") or "").strip('"') or None),
        storage_class=_field(fields, "storage_class") or None,
        last_modified=_time(_field(fields, "last_modified") or _field(fields, "last_modified_date")),
    )
    relative = key[len(spec.source_prefix) :] if key.startswith(spec.source_prefix) else key
    target = Target(spec.destination_bucket, spec.destination_prefix + relative)
    planned = Planned(item, obj, target)
    if is_ferrys_own(key, marks_prefixes(spec.options.policy.marks_prefix)):
        # A source that is itself a Ferry destination holds its upload marks: listed, or named
        # by a manifest or an event, they are counted, never copied (sync and check leave them out).
        return Planned(item, obj, target, skip=OWN_MARK)
    if not key.startswith(spec.source_prefix):  # only a manifest's row can be: a listing is inside
        return Planned(item, obj, target, skip=f"outside source.prefix {spec.source_prefix!r}")
    if wrong_size:  # named with the object's bucket and (decoded) key, as a failed copy is
        return Planned(item, obj, target, fail=f"manifest row: {wrong_size}")
    if inventory and _field(fields, "is_delete_marker") in ("true", True):
        return Planned(item, obj, target, skip="delete marker in the inventory: nothing to copy")
    if inventory and _field(fields, "is_latest") in ("false", False):
        return Planned(item, obj, target, skip="not the latest version in the inventory")
    if not matches(relative, spec.options.include, spec.options.exclude):
        return Planned(item, obj, target, skip="excluded by options.include / options.exclude")
    if (target.bucket, target.key) == (obj.bucket, obj.key) and not changes_attributes(spec.options.policy):
        return Planned(item, obj, target, skip="the destination is the object itself: nothing would change")
    return planned


def _plan_history(item: Mapping[str, Any], spec: JobSpec) -> Planned:
    """An all_versions job's item: one key whose whole history is copied (pipeline/history_keys.py
    writes them: `k` the key, `n` its versions, `s` their bytes). `obj` names the key, with no
    version, and the history's bytes as its size (which sends it to Lambda or Fargate)."""
    key, size = item.get("k"), item.get("s")
    if not isinstance(key, str) or not key:
        return Planned(item, fail=f"history item has no key: {dict(item)!r:.300}")
    obj = SourceObject(
        bucket=str(spec.source_bucket),
        key=key,
        size=size if isinstance(size, int) and not isinstance(size, bool) else None,
    )
    relative = key[len(spec.source_prefix) :] if key.startswith(spec.source_prefix) else key
    target = Target(spec.destination_bucket, spec.destination_prefix + relative)
    if not key.startswith(spec.source_prefix):
        return Planned(item, obj, target, skip=f"outside source.prefix {spec.source_prefix!r}")
    return Planned(item, obj, target)


def field_name(name: str) -> str:
    """A column or field name as Ferry matches it: without case, `_`, `-`, surrounding spaces
    (`bucket, key` as S3 Inventory's fileSchema is written) or a UTF-8 byte-order mark (Excel's
    "CSV UTF-8" puts one before the first column's name, and the ItemReader may keep it)."""
    return name.strip().lstrip("\ufeff").strip().replace("_", "").replace("-", "").lower()


@functools.lru_cache(maxsize=1024)
def _form(name: str) -> str:
    """field_name, remembered: a batch's rows share their few column names, and a pass plans
    thousands of rows (a million-row job, a million), so each name is put in form once."""
    return field_name(name)


def _columns(item: Mapping[str, Any]) -> dict[str, Any]:
    """The item's fields by their names' form, the first of two alike winning (`Key` before
    `key`), built once per item: plan_item looks up some ten fields in it."""
    columns: dict[str, Any] = {}
    for key, value in item.items():
        columns.setdefault(_form(str(key)), value)
    return columns


def _field(columns: Mapping[str, Any], name: str) -> Any:
    """One field of an item's `_columns`, by any spelling of its name."""
    return columns.get(_form(name))


def _size(value: Any) -> tuple[int | None, str | None]:
    """A row's size in bytes, or why the row's size cannot be one. No size (None, "") is fine:
    CopyBatch reads it from S3. A size that is not a whole number of bytes, is negative, or is
    over S3's 5 TiB object limit says the row is wrong (shifted columns, a typo, a made-up
    row): such a row fails alone, before a Fargate task is started for an impossible object."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, None
    size: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        size = int(value)
    elif isinstance(value, float) and math.isinf(value):
        size = MAX_OBJECT_SIZE + 1
    elif isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        text = value.strip()  # more digits than any size: over the limit, not converted
        size = int(text) if len(text) <= 20 else (-1 if text.startswith("-") else MAX_OBJECT_SIZE + 1)
    if size is None:
        return (
            None,
            f"size {value!r:.40} is not a whole number of bytes; give the size in bytes, or leave it empty",
        )
    if size < 0:
        return None, f"size {size} is negative; give the size in bytes, or leave it empty"
    if size > MAX_OBJECT_SIZE:
        return None, (
            f"size {value!r:.40} is over S3's 5 TiB object limit: the row is wrong; correct its "
            "size, or leave it empty for Ferry to read it from S3"
        )
    return size, None


def _time(value: Any) -> dt.datetime | None:
    """A modification time as the readers give it, in UTC; None when unreadable.

    The listObjectsV2 reader gives `LastModified` in epoch seconds (`1668699881`, Step
    Functions developer guide, input-output-itemreader.html); S3 Inventory rows give
    `LastModifiedDate` in ISO 8601 text; manifests written by hand may give either, as text.
    A time without a zone is UTC, as S3's are, so it compares with the destination's.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return _from_epoch(value)
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        if _EPOCH.match(text):
            return _from_epoch(float(text))
        try:
            moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


_EPOCH = re.compile(r"^\d+(\.\d+)?$")
_WHOLE = re.compile(r"-?[0-9]+")


def _from_epoch(seconds: float) -> dt.datetime | None:
    try:
        return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None
