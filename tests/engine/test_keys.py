"""Awkward object keys survive a copy exactly: encoded characters, unicode, length, slashes.

Each key is copied server-side and streamed, then listed back from the destination and
compared byte for byte with the source key. versitygw (a POSIX file-system backend) is used
wherever it stores the key as given; the keys it refuses or rewrites go to moto, and each
says how versitygw treated it.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import pytest

from ferry import Copier, CopyPolicy, SourceObject, Status, Target

MiB = 1024 * 1024

# 1,024 bytes (S3's limit) in five path segments of 204 bytes: versitygw stores each segment as
# a directory or file name, and refuses a single segment over 255 bytes (see LONG_FLAT_KEY).
LONG_SEGMENTED_KEY = "/".join(c * 204 for c in "abcde")
# One 1,024-byte segment. versitygw answers PutObject with `KeyTooLongError: Your key is too
# long.` for any segment over 255 bytes (a file-name limit of its POSIX backend), so: moto.
LONG_FLAT_KEY = "L" * 1020 + ".txt"
assert len(LONG_SEGMENTED_KEY.encode()) == len(LONG_FLAT_KEY.encode()) == 1024

KEYS: list[tuple[str, str, str, bytes]] = [
    # (test id, key, server fixture, body)
    ("spaces", "with space/a file name.txt", "versitygw", b"spaces"),
    ("plus", "plus+sign+c++.txt", "versitygw", b"plus"),
    ("percent", "percent%20not-a-space%2F%.txt", "versitygw", b"percent"),
    ("question-mark", "question?mark=1&x=2.txt", "versitygw", b"query"),
    ("hash", "hash#fragment.txt", "versitygw", b"hash"),
    ("unicode", "données/日本語 ü.txt", "versitygw", "unicode ✓".encode()),
    ("all-at-once", "mix ?#+%&=;@$,~!'()*[] é/x.txt", "versitygw", b"mixed"),
    ("1024-bytes-segmented", LONG_SEGMENTED_KEY, "versitygw", b"long"),
    ("1024-bytes-one-segment", LONG_FLAT_KEY, "motoserver", b"long flat"),
    # An empty "folder" marker: versitygw stores it as a directory and lists it back as given
    # (but cannot CopyObject it: see VERSITYGW_CANNOT_COPY).
    ("trailing-slash-empty", "folder marker/", "versitygw", b""),
    # With content, versitygw refuses PutObject of a key ending in '/' with
    # `DirectoryObjectContainsData: Directory object contains data payload.`: moto.
    ("trailing-slash-with-data", "not a folder/", "motoserver", b"data under a slash"),
    # versitygw accepts `double//slash.txt` but stores and lists it as `double/slash.txt`
    # (its file system collapses the empty segment), so the key would not survive: moto.
    ("double-slash", "double//slash.txt", "motoserver", b"double"),
    ("leading-slash", "/rooted.txt", "motoserver", b"rooted"),
    ("dot-segments", "a/./b/../c.txt", "motoserver", b"dots"),
]

# versitygw answers CopyObject of an empty directory object (key ending in '/'), with or without
# any of the optional headers, with `DirectoryObjectContainsData: Directory object contains data
# payload.`, although PutObject of the same empty marker succeeds: server-side copies of these
# keys run on moto instead.
VERSITYGW_CANNOT_COPY = {"folder marker/"}


def _server(request: pytest.FixtureRequest, name: str, mode: str, key: str) -> Any:
    if name == "versitygw" and mode == "server-side" and key in VERSITYGW_CANNOT_COPY:
        name = "motoserver"
    return request.getfixturevalue(name)


@pytest.mark.parametrize("mode", ["server-side", "stream"])
@pytest.mark.parametrize("key,server_name,body", [k[1:] for k in KEYS], ids=[k[0] for k in KEYS])
def test_awkward_key_is_copied_and_listed_back_exactly(request, mode, key, server_name, body):
    server = _server(request, server_name, mode, key)
    src, dst = server.bucket("src"), server.bucket("dst")
    server.client.put_object(Bucket=src, Key=key, Body=body, Metadata={"k": "v"}, Tagging="kind=awkward")
    assert server.keys(src) == [key], f"{server.name} does not keep this key as given"

    with Copier(server.endpoint, server.endpoint, CopyPolicy(mode=mode)) as copier:
        result = copier.copy(SourceObject(src, key), Target(dst, key))

    assert result.status == Status.COPIED, result.reason
    assert result.dest_key == key
    assert server.keys(dst) == [key]
    assert server.client.get_object(Bucket=dst, Key=key)["Body"].read() == body
    assert server.client.head_object(Bucket=dst, Key=key)["Metadata"] == {"k": "v"}
    tags = server.client.get_object_tagging(Bucket=dst, Key=key)["TagSet"]
    assert tags == [{"Key": "kind", "Value": "awkward"}]


@pytest.mark.parametrize("mode", ["server-side", "stream"])
@pytest.mark.parametrize("server_name", ["versitygw", "motoserver"])
def test_batch_of_awkward_keys_lands_under_the_same_keys(request, mode, server_name):
    server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), server.bucket("dst")
    keys = {key: body for _, key, name, body in KEYS if name == server_name}
    if server_name == "versitygw" and mode == "server-side":
        keys = {k: v for k, v in keys.items() if k not in VERSITYGW_CANNOT_COPY}
    for key, body in keys.items():
        server.client.put_object(Bucket=src, Key=key, Body=body)

    with Copier(server.endpoint, server.endpoint, CopyPolicy(mode=mode)) as copier:
        results = copier.copy_batch([(SourceObject(src, k), Target(dst, k)) for k in server.keys(src)])

    assert [r.status for r in results] == [Status.COPIED] * len(keys), [r.reason for r in results]
    assert sorted(server.keys(dst)) == sorted(keys)
    for key, body in keys.items():
        assert server.client.get_object(Bucket=dst, Key=key)["Body"].read() == body


def _upload_in_parts(client: Any, bucket: str, key: str, data: bytes, part_size: int = 5 * MiB) -> str:
    upload = client.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm="SHA256")
    parts = []
    for number, start in enumerate(range(0, len(data), part_size), start=1):
        response = client.upload_part(
            Bucket=bucket,
            Key=key,
            UploadId=upload["UploadId"],
            PartNumber=number,
            Body=data[start : start + part_size],
            ChecksumAlgorithm="SHA256",
        )
        parts.append(
            {"PartNumber": number, "ETag": response["ETag"], "ChecksumSHA256": response["ChecksumSHA256"]}
        )
    client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload["UploadId"], MultipartUpload={"Parts": parts}
    )
    return client.head_object(Bucket=bucket, Key=key)["ETag"]


@pytest.mark.parametrize(
    "mode,strategy", [("server-side", "server-side-multipart"), ("stream", "stream-multipart")]
)
def test_awkward_key_survives_a_multipart_copy(versitygw, mode, strategy):
    """Ranged GETs, UploadPartCopy's copy-source header and every part request carry the key."""
    key = "données/日本語 ü+%20?#&.bin"
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    data = os.urandom(6 * MiB)
    etag = _upload_in_parts(versitygw.client, src, key, data)

    with Copier(
        versitygw.endpoint, versitygw.endpoint, CopyPolicy(mode=mode, multipart_threshold=5 * MiB)
    ) as c:
        result = c.copy(SourceObject(src, key), Target(dst, key))

    assert result.status == Status.COPIED, result.reason
    assert result.strategy == strategy
    assert versitygw.keys(dst) == [key]
    body = versitygw.client.get_object(Bucket=dst, Key=key)["Body"].read()
    assert hashlib.sha256(body).digest() == hashlib.sha256(data).digest()
    assert versitygw.client.head_object(Bucket=dst, Key=key)["ETag"] == etag
