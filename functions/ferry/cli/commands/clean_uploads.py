"""`ferry clean-uploads s3://bucket[/prefix]`: abort the multipart uploads Ferry left behind.

A copy killed mid-way (SIGKILL, a lost machine, a Lambda timeout) leaves its upload open, and
S3 charges for its parts until someone aborts it. The next copy of the same object resumes
it; one that never comes leaves it for this command. Only uploads carrying Ferry's mark
(engine/records/upload_marks.py) are touched: an upload someone else started is never aborted. Marks
whose upload already ended are deleted too.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import IO, Any

from ferry.cli.shared.clients import ClientMaker
from ferry.cli.shared.parsing import EXIT_FAILED, EXIT_OK
from ferry.counts import plural
from ferry.engine.records.upload_marks import (
    FerryUpload,
    MarkLeftover,
    UploadMark,
    abort_ferry_upload,
    default_retention,
    delete_leftover,
    delete_mark,
    mark_leftovers,
    scan_marks,
)
from ferry.errors import ConfigError, describe
from ferry.jobspec import as_folder
from ferry.models import Endpoint
from ferry.s3.clients import make_client
from ferry.s3.listing import parse_s3_url

_AGE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_age(text: str) -> timedelta:
    """`30m`, `24h`, `7d`, `90s`, `0`: how old an upload must be before it is aborted."""
    match = _AGE.match(text.strip().lower())
    if not match:
        raise ConfigError(
            f"--older-than {text!r} is not an age: write a number and a unit, such as 30m, 24h or 7d"
        )
    return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])


def check_marks_prefix(prefix: str) -> str:
    """A folder in the destination bucket: `ops/marks` means `ops/marks/`."""
    if not prefix or prefix.startswith("/"):
        raise ConfigError(
            f"--marks-prefix {prefix!r} must be a folder in the bucket, such as .ferry/uploads/"
        )
    return as_folder(prefix)


@dataclass
class Cleaning:
    """What one run found and did, for the text and JSON output alike."""

    bucket: str
    prefix: str
    older_than: timedelta
    dry_run: bool
    aborted: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)
    marks_deleted: list[dict[str, Any]] = field(default_factory=list)
    leftovers_deleted: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "bucket": self.bucket,
            "prefix": self.prefix,
            "older_than_seconds": int(self.older_than.total_seconds()),
            "dry_run": self.dry_run,
            "aborted": self.aborted,
            "kept": self.kept,
            "marks_deleted": self.marks_deleted,
            "leftovers_deleted": self.leftovers_deleted,
            "errors": self.errors,
        }


def _entry(key: str, upload_id: str, started: datetime, mark: UploadMark) -> dict[str, Any]:
    return {
        "key": key,
        "upload_id": upload_id,
        "started": started.astimezone(UTC).isoformat(),
        "job_id": mark.job_id,
        "source": f"s3://{mark.source_bucket}/{mark.source_key}",
    }


def clean(
    client: Any, bucket: str, prefix: str, older_than: timedelta, *, dry_run: bool, marks_prefix: str
) -> Cleaning:
    """Abort Ferry's uploads older than `older_than` and delete marks of ended uploads."""
    result = Cleaning(bucket, prefix, older_than, dry_run)
    cutoff = datetime.now(UTC) - older_than
    for mark, upload in scan_marks(client, bucket, key_prefix=prefix, marks_prefix=marks_prefix):
        if upload is None:
            # The mark outlived its upload; its own time says when it was written (after Create).
            if mark.created <= cutoff:
                _act(
                    result,
                    result.marks_deleted,
                    _entry(mark.dest_key, mark.upload_id, mark.created, mark),
                    lambda m=mark: delete_mark(
                        client,
                        bucket,
                        m.dest_key,
                        m.upload_id,
                        marks_prefix=marks_prefix,
                        stored_as=m.stored_as,
                    ),
                )
            continue
        entry = _entry(upload.key, upload.upload_id, upload.initiated, mark)
        if upload.initiated > cutoff:
            result.kept.append(entry)
            continue
        _act(result, result.aborted, entry, lambda u=upload: _abort(client, bucket, u, marks_prefix))
    _clean_leftovers(client, result, marks_prefix)
    return result


def _leftover_entry(leftover: MarkLeftover) -> dict[str, Any]:
    return {
        "key": leftover.dest_key,
        "mark": leftover.key,
        "version_id": leftover.version_id,
        "delete_marker": leftover.delete_marker,
        "last_modified": leftover.last_modified.astimezone(UTC).isoformat(),
    }


def _clean_leftovers(client: Any, result: Cleaning, marks_prefix: str) -> None:
    """Delete what plain deletes of marks left (versions first, then the delete markers above
    them); a marker whose key still holds a version that could not be deleted is kept."""
    try:
        leftovers = mark_leftovers(client, result.bucket, key_prefix=result.prefix, marks_prefix=marks_prefix)
    except Exception as error:
        result.errors.append(
            {
                "key": marks_prefix,
                "error": describe(
                    error,
                    side="destination",
                    action="s3:ListBucketVersions",
                    bucket=result.bucket,
                    key=marks_prefix,
                    region_flag="--region",
                ),
            }
        )
        return
    refused: set[str] = set()
    for leftover in leftovers:
        if leftover.delete_marker and leftover.key in refused:
            continue
        before = len(result.errors)
        _act(
            result,
            result.leftovers_deleted,
            _leftover_entry(leftover),
            lambda f=leftover: delete_leftover(client, result.bucket, f),
            permission="s3:DeleteObjectVersion",
        )
        if len(result.errors) > before:
            refused.add(leftover.key)
    if refused:
        _explain_retention(client, result)


def _explain_retention(client: Any, result: Cleaning) -> None:
    """S3 refuses to delete a version under Object Lock retention with AccessDenied, as it
    refuses an identity without the permission: where the bucket locks new versions, say so."""
    try:
        retention = default_retention(client, result.bucket)
    except Exception:  # noqa: BLE001 - the refusal itself is already reported
        return
    if retention is None:
        return
    note = (
        f" (s3://{result.bucket} keeps every new version under Object Lock, {retention}: such a "
        "version can be deleted once its retention ends; run this again then)"
    )
    for entry in result.errors:
        if "version_id" in entry:
            entry["error"] += note


def _abort(client: Any, bucket: str, upload: FerryUpload, marks_prefix: str) -> None:
    abort_ferry_upload(client, bucket, upload, marks_prefix=marks_prefix)


def _act(
    result: Cleaning,
    done: list[dict[str, Any]],
    entry: dict[str, Any],
    action: Any,
    *,
    permission: str = "s3:AbortMultipartUpload / s3:DeleteObjectVersion",
) -> None:
    if result.dry_run:
        done.append(entry)
        return
    try:
        action()
    except Exception as error:
        entry["error"] = describe(
            error,
            side="destination",
            action=permission,
            bucket=result.bucket,
            key=entry.get("mark") or entry["key"],
            region_flag="--region",
        )
        result.errors.append(entry)
        return
    done.append(entry)


def run_clean_uploads(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    url = parse_s3_url(args.url, "the location")
    older_than = parse_age(args.older_than)
    marks_prefix = check_marks_prefix(args.marks_prefix)
    endpoint = Endpoint(endpoint_url=args.endpoint_url, region=args.region, profile=args.profile)
    client = ClientMaker(make_client).checked(endpoint, url.bucket, "destination", region_flag="--region")
    result = clean(client, url.bucket, url.key, older_than, dry_run=args.dry_run, marks_prefix=marks_prefix)
    if args.json:
        stdout.write(json.dumps(result.to_dict()) + "\n")
    else:
        _print(result, stdout)
    for entry in result.errors:
        stderr.write(f"ferry: error: {_named(result.bucket, entry)}: {entry['error']}\n")
    return EXIT_FAILED if result.errors else EXIT_OK


def _named(bucket: str, entry: dict[str, Any]) -> str:
    """What an error entry is about: an upload, or a leftover version or marker of a mark."""
    if "upload_id" in entry:
        return f"s3://{bucket}/{entry['key']} (upload {entry['upload_id']})"
    if "version_id" in entry:
        what = "delete marker" if entry["delete_marker"] else "version"
        return f"s3://{bucket}/{entry['mark']} ({what} {entry['version_id']})"
    return f"s3://{bucket}/{entry['key']}"


def _print(result: Cleaning, out: IO[str]) -> None:
    verb = "would abort" if result.dry_run else "aborted"
    for entry in result.aborted:
        out.write(
            f"{verb} s3://{result.bucket}/{entry['key']} (upload {entry['upload_id']}, started {entry['started']})\n"
        )
    mark_verb = "would delete" if result.dry_run else "deleted"
    for entry in result.marks_deleted:
        out.write(
            f"{mark_verb} the mark of ended upload {entry['upload_id']} of s3://{result.bucket}/{entry['key']}\n"
        )
    for entry in result.leftovers_deleted:
        what = "delete marker" if entry["delete_marker"] else "version"
        out.write(f"{mark_verb} the {what} {entry['version_id']} of s3://{result.bucket}/{entry['mark']}\n")
    hours = result.older_than.total_seconds() / 3600
    leftovers = ""
    if result.leftovers_deleted:
        leftovers = (
            f", {plural(len(result.leftovers_deleted), 'leftover')} of deleted marks {mark_verb} "
            "(versions and delete markers)"
        )
    out.write(
        f"{len(result.aborted)} of Ferry's uploads {verb}, {len(result.kept)} kept (started less than "
        f"{hours:g} h ago), {plural(len(result.marks_deleted), 'stale mark')} {mark_verb}{leftovers}"
        f"{', ' + str(len(result.errors)) + ' failed' if result.errors else ''}\n"
    )
