"""tests/virtual_s3.py keeps versions as S3 does where a bucket enables them, and nothing changes
where none does: the all_versions tests at S3's limits rest on both."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from botocore.exceptions import ClientError

from conftest import VirtualS3

MiB = 1024 * 1024


def versioned(server: VirtualS3, name: str) -> str:
    bucket = server.bucket(name)
    server.client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    return bucket


def listed(client: Any, bucket: str, **page: Any) -> list[tuple[str, str, bool, bool]]:
    """(key, version id, delete marker, is latest), every page followed by its markers. botocore
    answers versions and delete markers in two lists: each key's latest entry is put first and
    its versions keep the answer's order, which is the whole order where a key's one delete
    marker is its latest."""
    out: list[tuple[str, str, bool, bool]] = []
    params: dict[str, Any] = {"Bucket": bucket, **page}
    while True:
        answer = client.list_object_versions(**params)
        entries = [(v, False) for v in answer.get("Versions", [])] + [
            (m, True) for m in answer.get("DeleteMarkers", [])
        ]
        entries.sort(key=lambda em: (em[0]["Key"], not em[0]["IsLatest"]))
        out += [(e["Key"], e["VersionId"], marker, e["IsLatest"]) for e, marker in entries]
        if not answer["IsTruncated"]:
            return out
        params["KeyMarker"], params["VersionIdMarker"] = (
            answer["NextKeyMarker"],
            answer["NextVersionIdMarker"],
        )


def code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def test_a_versioned_bucket_keeps_each_write_and_delete_as_a_version_and_lists_them_in_pages(
    virtual_s3: VirtualS3,
) -> None:
    s3 = virtual_s3.client
    plain, bucket = virtual_s3.bucket("plain"), virtual_s3.bucket("versioned")
    assert "VersionId" not in s3.put_object(Bucket=plain, Key="k", Body=b"before")
    assert "Status" not in s3.get_bucket_versioning(Bucket=plain)
    s3.put_object(Bucket=bucket, Key="a", Body=b"written before versioning")
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"

    big = virtual_s3.make(bucket, "a", "seed", [5 * MiB, 5 * MiB])
    small = s3.put_object(Bucket=bucket, Key="a", Body=b"small")
    marker = s3.delete_object(Bucket=bucket, Key="a")
    b1 = s3.put_object(Bucket=bucket, Key="b", Body=b"b1")["VersionId"]

    assert marker["DeleteMarker"] is True
    ids = ["null", big["VersionId"], small["VersionId"], marker["VersionId"]]
    assert len(set(ids)) == 4
    whole = [("a", v, v == ids[3], v == ids[3]) for v in reversed(ids)] + [("b", b1, False, True)]
    assert listed(s3, bucket) == whole
    assert listed(s3, bucket, MaxKeys=2) == whole  # pages joined at (key, version id) markers
    assert listed(s3, bucket, KeyMarker="a") == whole[4:]
    assert listed(s3, bucket, KeyMarker="a", VersionIdMarker=ids[2]) == whole[2:]
    assert listed(s3, plain) == [("k", "null", False, True)]

    with pytest.raises(ClientError) as hidden:
        s3.head_object(Bucket=bucket, Key="a")
    assert code(hidden) == "404"
    with pytest.raises(ClientError) as on_marker:
        s3.head_object(Bucket=bucket, Key="a", VersionId=ids[3])
    assert code(on_marker) == "405"
    head = s3.head_object(Bucket=bucket, Key="a", VersionId=ids[1], PartNumber=2)
    assert (head["VersionId"], head["PartsCount"], head["ContentLength"]) == (ids[1], 2, 5 * MiB)
    got = s3.get_object(Bucket=bucket, Key="a", VersionId="null")
    assert (got["VersionId"], got["Body"].read()) == ("null", b"written before versioning")

    s3.delete_object(Bucket=bucket, Key="a", VersionId=ids[3])  # the marker, gone outright
    s3.delete_object(Bucket=bucket, Key="b", VersionId=b1)
    assert s3.get_object(Bucket=bucket, Key="a")["Body"].read() == b"small"
    assert listed(s3, bucket) == [("a", v, False, v == ids[2]) for v in reversed(ids[:3])]
    assert virtual_s3.keys(bucket) == ["a"]


def test_copies_read_the_version_their_copy_source_names_and_write_a_new_one(virtual_s3: VirtualS3) -> None:
    s3 = virtual_s3.client
    src, dst = versioned(virtual_s3, "src"), versioned(virtual_s3, "dst")
    old = virtual_s3.make(src, "k", "seed", [5 * MiB, 1024])
    s3.put_object(Bucket=src, Key="k", Body=b"newer")
    source = {"Bucket": src, "Key": "k", "VersionId": old["VersionId"]}

    whole = s3.copy_object(Bucket=dst, Key="whole", CopySource=source, CopySourceIfMatch=f'"{old["ETag"]}"')
    upload = s3.create_multipart_upload(Bucket=dst, Key="parts")["UploadId"]
    part = s3.upload_part_copy(
        Bucket=dst,
        Key="parts",
        UploadId=upload,
        PartNumber=1,
        CopySource=source,
        CopySourceRange="bytes=0-1023",
    )
    done = s3.complete_multipart_upload(
        Bucket=dst,
        Key="parts",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["CopyPartResult"]["ETag"]}]},
    )

    bytes_of_old = s3.get_object(Bucket=src, Key="k", VersionId=old["VersionId"])["Body"].read()
    assert len(bytes_of_old) == old["Size"]
    assert whole["CopySourceVersionId"] == part["CopySourceVersionId"] == old["VersionId"]
    assert whole["CopyObjectResult"]["ETag"] == f'"{hashlib.md5(bytes_of_old).hexdigest()}"'
    assert s3.get_object(Bucket=dst, Key="whole", VersionId=whole["VersionId"])["Body"].read() == bytes_of_old
    assert (
        s3.get_object(Bucket=dst, Key="parts", VersionId=done["VersionId"])["Body"].read()
        == bytes_of_old[:1024]
    )
    assert [e[1] for e in listed(s3, dst)] == [done["VersionId"], whole["VersionId"]]
