"""Every version of every key under a prefix, each key's history oldest first: what
`ferry copy --all-versions` reproduces.

ListObjectVersions answers keys in order and, for each key, its versions and delete markers
newest first (S3 API reference, ListObjectVersions). botocore parses the two kinds into two
lists, which loses how they interleave; the answer's own XML keeps it, so a parse hook notes
the order of the `Version` and `DeleteMarker` elements and the two lists are merged back by it.

Not every server interleaves them, or times them consistently: versitygw writes a page's
delete markers first, then its versions (each kind in key order, each key newest first), and
gives versions LastModified times that do not order them against the markers. So each
history is ranked newest first by what every server gets right, in this order: the entry
marked IsLatest; then LastModified, to the second (some servers keep no finer time for
versions); then the answer's own order, which also keeps each kind's own newest-first
order. On S3 and MinIO that is exactly the answer's order.
"""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ferry.errors import ConfigError, describe

_ORDER = "FerryVersionOrder"  # where the parse hook leaves the elements' order in a response
_HOOK_ID = "ferry-version-order"
_KINDS = ("Version", "DeleteMarker")


@dataclass(frozen=True)
class Version:
    """One version of a key, or one delete marker, as ListObjectVersions shows it."""

    key: str
    version_id: str
    delete_marker: bool
    last_modified: dt.datetime | None
    size: int | None = None
    etag: str | None = None  # without quotes
    storage_class: str | None = None
    is_latest: bool = False


@dataclass(frozen=True)
class History:
    """Every version of one key, oldest first."""

    key: str
    versions: tuple[Version, ...]


def histories(client: Any, bucket: str, prefix: str, *, side: str = "source") -> Iterator[History]:
    """Each key under `prefix` with its history, in key order; one key's versions in memory
    at a time."""
    current: list[Version] = []
    for version in list_versions(client, bucket, prefix, side=side):
        if current and version.key != current[0].key:
            yield _history(current)
            current = []
        current.append(version)
    if current:
        yield _history(current)


def key_history(client: Any, bucket: str, key: str, *, side: str = "source") -> History:
    """One key's history (a listing by its name also lists longer keys: they are left out)."""
    versions = [v for v in list_versions(client, bucket, key, side=side, stop_after=key) if v.key == key]
    return _history(versions) if versions else History(key, ())


def list_versions(
    client: Any, bucket: str, prefix: str, *, side: str = "source", stop_after: str | None = None
) -> Iterator[Version]:
    """Every version and delete marker under `prefix`, in the answer's order (keys in order,
    each newest first as the server gives it)."""
    for page in version_pages(client, bucket, prefix, side=side):
        for version in page.versions:
            if stop_after is not None and version.key > stop_after:
                return
            yield version


@dataclass(frozen=True)
class VersionPage:
    """One ListObjectVersions answer: its entries in key order, and where the next page starts
    (`next_key_marker` None: this was the last page)."""

    versions: tuple[Version, ...]
    next_key_marker: str | None = None
    next_version_id_marker: str | None = None


def version_pages(
    client: Any,
    bucket: str,
    prefix: str,
    *,
    key_marker: str | None = None,
    version_id_marker: str | None = None,
    side: str = "source",
) -> Iterator[VersionPage]:
    """The answers page by page (up to 1,000 entries each), from the given markers on: a
    listing too long for one run goes on in the next from the last page's markers."""
    _note_element_order(client)
    params: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    if key_marker:
        params["KeyMarker"] = key_marker
        if version_id_marker:
            params["VersionIdMarker"] = version_id_marker
    while True:
        try:
            page = client.list_object_versions(**params)
        except ClientError as error:
            raise ConfigError(
                describe(error, side=side, action="s3:ListBucketVersions", bucket=bucket)
            ) from error
        # Keys in order: a server that writes a page's delete markers before its versions
        # (versitygw) is put back into key order; one key's entries keep the answer's order.
        versions = tuple(sorted(_in_answer_order(page), key=lambda v: v.key))
        next_key = page.get("NextKeyMarker") if page.get("IsTruncated") else None
        if not next_key:
            yield VersionPage(versions)
            return
        next_version = page.get("NextVersionIdMarker") or None
        yield VersionPage(versions, next_key, next_version)
        params["KeyMarker"], params["VersionIdMarker"] = next_key, next_version
        if next_version is None:
            params.pop("VersionIdMarker")


def _history(versions: list[Version]) -> History:
    """Ranked newest first (IsLatest, the second, the answer's order: see the module), then
    reversed."""
    ranked = sorted(
        enumerate(versions), key=lambda iv: (not iv[1].is_latest, -_second(iv[1].last_modified), iv[0])
    )
    return History(versions[0].key, tuple(v for _, v in reversed(ranked)))


def _second(moment: dt.datetime | None) -> float:
    return float(int(moment.timestamp())) if moment is not None else 0.0


def _in_answer_order(page: dict[str, Any]) -> Iterator[Version]:
    versions = iter(page.get("Versions", []))
    markers = iter(page.get("DeleteMarkers", []))
    order = page.get(_ORDER)
    if order is None:  # no hook ran (a stub): versions, then markers; the times order them
        order = ["Version"] * len(page.get("Versions", [])) + ["DeleteMarker"] * len(
            page.get("DeleteMarkers", [])
        )
    for kind in order:
        item = next(versions if kind == "Version" else markers, None)
        if item is not None:
            yield _version(item, kind == "DeleteMarker")


def _version(item: dict[str, Any], marker: bool) -> Version:
    return Version(
        key=item["Key"],
        version_id=str(item.get("VersionId") or "null"),
        delete_marker=marker,
        last_modified=item.get("LastModified"),
        size=None if marker else item.get("Size"),
        etag=None if marker else (item.get("ETag") or "").strip('"') or None,
        storage_class=None if marker else item.get("StorageClass"),
        is_latest=bool(item.get("IsLatest")),
    )


def _note_element_order(client: Any) -> None:
    """Register, once per client, the hook that records the answer's element order."""
    client.meta.events.register("before-parse.s3.ListObjectVersions", _record_order, unique_id=_HOOK_ID)


def _record_order(response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any) -> None:
    body = response_dict.get("body")
    if not body or response_dict.get("status_code", 200) >= 300:
        return
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return
    kinds = [child.tag.rsplit("}", 1)[-1] for child in root]
    customized_response_dict[_ORDER] = [kind for kind in kinds if kind in _KINDS]


@dataclass(frozen=True)
class Wording:
    """How a door names what a refusal is about: `ferry copy` says `--all-versions: the
    source bucket`; a job spec `source.bucket: bucket` (the field, then what it names)."""

    option: str
    source: str
    destination: str


def check_versioning(
    source_client: Any, source: str, prefix: str, dest_client: Any, dest: str, wording: Wording
) -> None:
    """Refuse, in one line, what would make the copy of a history meaningless or impossible:
    a destination that does not keep versions (each version written would replace the last),
    and a source that never kept any (it holds its current objects only). A source whose
    versioning is suspended still holds its histories. Then the source must list them."""
    status = _versioning(dest_client, dest, "destination")
    if status != "Enabled":
        raise ConfigError(
            f"{wording.destination} {dest!r} does not keep versions (versioning is {status}): "
            f"enable versioning on it, or copy the latest versions without {wording.option}"
        )
    if _versioning(source_client, source, "source") == "never enabled":
        raise ConfigError(
            f"{wording.source} {source!r} has never kept versions (versioning never enabled): it "
            f"holds its current objects only; copy them without {wording.option}"
        )
    try:
        source_client.list_object_versions(Bucket=source, Prefix=prefix, MaxKeys=1)
    except (ClientError, BotoCoreError) as error:
        raise ConfigError(
            f"source: cannot list the versions of s3://{source}/{prefix}: "
            + describe(error, side="source", action="s3:ListBucketVersions", bucket=source)
        ) from error


def _versioning(client: Any, bucket: str, side: str) -> str:
    try:
        return str(client.get_bucket_versioning(Bucket=bucket).get("Status") or "never enabled")
    except (ClientError, BotoCoreError) as error:
        raise ConfigError(
            f"{side}: cannot read the versioning of bucket {bucket!r}: "
            + describe(error, side=side, action="s3:GetBucketVersioning", bucket=bucket)
        ) from error
