"""Test support: versioned buckets on the real S3 servers, histories written into them, and a
key's history read back without Ferry's code (for `--all-versions` and all_versions jobs)."""

from __future__ import annotations

import time

from conftest import S3Server

MARKER = "<delete marker>"


def versioned(server: S3Server, name: str) -> str:
    bucket = server.bucket(name)
    server.client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    return bucket


def write(server: S3Server, bucket: str, events: list[tuple[str, bytes | None]]) -> None:
    """Each event a PUT of its bytes, or (None) a DELETE. versitygw's listing times order a
    key's delete markers against its versions only to the second: it gets a pause between."""
    for key, body in events:
        if body is None:
            server.client.delete_object(Bucket=bucket, Key=key)
        else:
            server.client.put_object(Bucket=bucket, Key=key, Body=body)
        if server.name == "versitygw":
            time.sleep(1.05)


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
