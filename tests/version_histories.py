"""Test support: versioned buckets on the real S3 servers, histories written into them, and a
key's history read back without Ferry's code (for `--all-versions` and all_versions jobs)."""

from __future__ import annotations

import time
from typing import Any

from conftest import S3Server
from ferry.models import DEFAULT_MARKS_PREFIX

MARKER = "<delete marker>"
_LAST_WRITTEN: dict[tuple[str, str, str], float] = {}  # (server, bucket, key) -> when last written


def versioned(server: S3Server, name: str) -> str:
    bucket = server.bucket(name)
    server.client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    return bucket


def write(server: S3Server, bucket: str, events: list[tuple[str, bytes | None]]) -> None:
    """Each event a PUT of its bytes, or (None) a DELETE. versitygw's listing times order a
    key's delete markers against its versions only to the second: a key written again within
    the second waits out the rest of it first (other keys are written meanwhile)."""
    for key, body in events:
        written = _LAST_WRITTEN.get((server.url, bucket, key))
        if server.name == "versitygw" and written is not None:
            time.sleep(max(0.0, written + 1.05 - time.monotonic()))
        if body is None:
            server.client.delete_object(Bucket=bucket, Key=key)
        else:
            server.client.put_object(Bucket=bucket, Key=key, Body=body)
        _LAST_WRITTEN[(server.url, bucket, key)] = time.monotonic()


def history(server: S3Server, bucket: str, key: str) -> list[str]:
    """The key's history oldest first, each version's bytes or MARKER, read from the server
    and ordered without Ferry's code: versitygw's version ids are ULIDs, which sort in the
    order they were made; MinIO's times are to the millisecond."""
    answer = server.client.list_object_versions(Bucket=bucket, Prefix=key)
    entries = [(v, False) for v in answer.get("Versions", [])] + [
        (m, True) for m in answer.get("DeleteMarkers", [])
    ]
    entries = [(e, marker) for e, marker in entries if e["Key"] == key]
    if server.name == "versitygw":
        entries.sort(key=lambda em: em[0]["VersionId"])
    else:
        entries.sort(key=lambda em: (em[0]["LastModified"], em[0]["IsLatest"]))
    out = []
    for entry, marker in entries:
        if marker:
            out.append(MARKER)
        else:
            body = server.client.get_object(Bucket=bucket, Key=key, VersionId=entry["VersionId"])[
                "Body"
            ].read()
            out.append(body.decode())
    return out


def put_in_parts(client: Any, bucket: str, key: str, data: bytes, part_size: int) -> str:
    """Write `data` as a multipart object of `part_size` parts (no checksum), so a copy goes in
    parts too; returns the version id (None on an unversioned bucket)."""
    upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    parts = []
    for number, start in enumerate(range(0, len(data), part_size), 1):
        body = data[start : start + part_size]
        etag = client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body)[
            "ETag"
        ]
        parts.append({"PartNumber": number, "ETag": etag})
    done = client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
    )
    return done.get("VersionId")


def ferrys_history(
    server: S3Server, bucket: str, prefix: str = DEFAULT_MARKS_PREFIX
) -> list[tuple[str, str]]:
    """Every version and delete marker under Ferry's marks prefix, as (key, "version" or
    "delete marker"): what a run left in the bucket's history."""
    found: list[tuple[str, str]] = []
    for page in server.client.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
        found += [(v["Key"], "version") for v in page.get("Versions", [])]
        found += [(m["Key"], "delete marker") for m in page.get("DeleteMarkers", [])]
    return found
