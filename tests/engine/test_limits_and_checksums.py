"""S3's size limits and Ferry's part plans; checksum arithmetic checked against real bytes and versitygw."""

from __future__ import annotations

import base64
import hashlib
import math
import os
import random

import pytest

from ferry import ConfigError, CopyPolicy
from ferry.engine.proofs import checksums as cs
from ferry.limits import (
    MAX_PARTS,
    GiB,
    MiB,
    TiB,
    check_part_size,
    choose_part_size,
    parse_size,
    parts_from_sizes,
    uniform_parts,
)

# -- sizes as people write them ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("8MiB", 8 * 1024**2),
        ("16MB", 16 * 1024**2),  # every unit binary, as the AWS CLI reads 16MB
        ("5G", 5 * 1024**3),
        ("1048576", 1048576),
        ("0", 0),
        ("512KiB", 512 * 1024),
        ("64kb", 64 * 1024),
        ("3Mi", 3 * 1024**2),
        ("2P", 2 * 1024**5),
        ("1.5GiB", 3 * 512 * 1024**2),
        (" 2 TiB ", 2 * 1024**4),
        ("7B", 7),
    ],
)
def test_sizes_are_read_the_way_people_write_them(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "text", ["", "MiB", "eight MiB", "8 MiBs", "8XB", "-5MiB", "5 M i B", "1e6", "0x10", "5BB", "5KBB"]
)
def test_unreadable_sizes_are_a_config_error(text):
    with pytest.raises(ConfigError, match="cannot read size"):
        parse_size(text)


# -- part sizes --------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [5 * MiB, 5 * MiB + 1, 8 * MiB, 5 * GiB])
def test_part_sizes_s3_accepts_pass(size):
    assert check_part_size(size) == size


@pytest.mark.parametrize("size", [0, 1, 5 * MiB - 1, 5 * GiB + 1, 6 * GiB])
def test_part_sizes_s3_refuses_are_a_config_error(size):
    with pytest.raises(ConfigError, match="5 MiB to 5 GiB"):
        check_part_size(size)
    with pytest.raises(ConfigError):
        CopyPolicy(part_size=size)


@pytest.mark.parametrize("threshold", [5 * MiB - 1, 5 * GiB + 1])
def test_multipart_threshold_outside_5MiB_to_5GiB_is_a_config_error(threshold):
    with pytest.raises(ConfigError, match="multipart threshold"):
        CopyPolicy(multipart_threshold=threshold)


def test_5TiB_object_fits_in_10000_parts_of_at_least_525MiB():
    part = choose_part_size(5 * TiB, 8 * MiB)
    assert part >= 525 * MiB
    assert part % MiB == 0
    assert math.ceil(5 * TiB / part) <= MAX_PARTS
    plan = uniform_parts(5 * TiB, part)
    assert len(plan) <= MAX_PARTS
    assert plan[-1].end == 5 * TiB


@pytest.mark.parametrize("size", [80 * GiB, 1 * TiB, 5 * TiB - 1, 5 * TiB])
@pytest.mark.parametrize("preferred", [5 * MiB, 8 * MiB, 256 * MiB])
def test_large_objects_never_need_more_than_10000_parts(size, preferred):
    part = choose_part_size(size, preferred)
    assert 5 * MiB <= part <= 5 * GiB
    assert part >= preferred
    assert math.ceil(size / part) <= MAX_PARTS


@pytest.mark.parametrize("size", [0, 1, 5 * MiB, 100 * MiB, 10 * GiB])
@pytest.mark.parametrize("preferred", [5 * MiB, 8 * MiB, 64 * MiB])
def test_preferred_part_size_is_kept_when_the_object_fits(size, preferred):
    assert choose_part_size(size, preferred) == preferred


def test_preferred_part_size_below_5MiB_is_raised_to_the_minimum():
    assert choose_part_size(20 * MiB, 1 * MiB) == 5 * MiB


@pytest.mark.parametrize(
    "size,part_size",
    [
        (0, 5 * MiB),
        (1, 5 * MiB),
        (5 * MiB, 5 * MiB),
        (5 * MiB + 1, 5 * MiB),
        (17 * MiB + 3, 5 * MiB),
        (10**9, 7 * MiB),
    ],
)
def test_uniform_parts_cover_the_object_exactly(size, part_size):
    parts = uniform_parts(size, part_size)
    assert [p.number for p in parts] == list(range(1, len(parts) + 1))
    assert parts[0].start == 0
    assert parts[-1].end == size
    for before, after in zip(parts, parts[1:], strict=False):
        assert before.end == after.start
        assert before.size == part_size
    assert 0 < parts[-1].size <= part_size or size == 0
    assert sum(p.size for p in parts) == size
    assert parts[0].http_range == f"bytes=0-{min(part_size, size) - 1}"


def test_uniform_parts_refuse_a_plan_over_10000_parts():
    with pytest.raises(ConfigError, match="10,000"):
        uniform_parts(10_001 * 5 * MiB, 5 * MiB)


def test_parts_from_sizes_follow_each_other():
    parts = parts_from_sizes([5 * MiB, 7 * MiB, 3])
    assert [(p.number, p.start, p.end) for p in parts] == [
        (1, 0, 5 * MiB),
        (2, 5 * MiB, 12 * MiB),
        (3, 12 * MiB, 12 * MiB + 3),
    ]


# -- checksum arithmetic -------------------------------------------------------------------------


def _uneven_split(data: bytes, rng: random.Random, pieces: int) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(data)), pieces - 1))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "CRC64NVME"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_combined_part_crcs_equal_the_crc_of_the_whole(algorithm, seed):
    rng = random.Random(seed)
    data = rng.randbytes(rng.randint(50_000, 300_000))
    pieces = _uneven_split(data, rng, rng.randint(2, 9))
    assert len({len(p) for p in pieces}) > 1
    parts = [(cs.b64(cs.digest(algorithm, piece)), len(piece)) for piece in pieces]
    assert cs.combine(algorithm, parts) == cs.b64(cs.digest(algorithm, data))


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "CRC64NVME"])
def test_combine_of_one_part_or_of_empty_parts(algorithm):
    data = os.urandom(1000)
    value = cs.b64(cs.digest(algorithm, data))
    assert cs.combine(algorithm, [(value, len(data))]) == value
    empty = cs.b64(cs.digest(algorithm, b""))
    assert cs.combine(algorithm, []) == empty
    assert cs.combine(algorithm, [(empty, 0), (value, len(data)), (empty, 0)]) == value


def test_known_checksum_values():
    # Standard check values of the string "123456789".
    assert cs.digest("CRC32", b"123456789").hex() == "cbf43926"
    assert cs.digest("CRC32C", b"123456789").hex() == "e3069283"
    assert cs.digest("CRC64NVME", b"123456789").hex() == "ae8b14860a799888"
    assert cs.digest("SHA256", b"") == hashlib.sha256(b"").digest()
    assert cs.digest("SHA1", b"abc") == hashlib.sha1(b"abc").digest()


def test_checksums_read_from_responses():
    full = cs.from_response({"ChecksumCRC64NVME": "AAAAAAAAAAA=", "ChecksumType": "FULL_OBJECT"})
    assert full == cs.Checksum("CRC64NVME", "AAAAAAAAAAA=", "FULL_OBJECT")
    assert full.is_full_object and full.parts_count is None
    composite = cs.from_response({"ChecksumSHA256": "abc=-12"})
    assert composite is not None
    assert composite.type == "COMPOSITE" and not composite.is_full_object and composite.parts_count == 12
    assert cs.from_response({"ETag": '"x"'}) is None


def test_composite_checksum_and_etag_equal_what_versitygw_reports(versitygw):
    bucket = versitygw.bucket()
    client = versitygw.client
    data = os.urandom(13 * MiB + 11)
    sizes = [5 * MiB, 6 * MiB, 2 * MiB + 11]  # unequal parts, as any uploader may choose
    upload = client.create_multipart_upload(
        Bucket=bucket, Key="composite.bin", ChecksumAlgorithm="CRC32C", ChecksumType="COMPOSITE"
    )
    part_crcs, part_md5s, completed, offset = [], [], [], 0
    for number, size in enumerate(sizes, start=1):
        piece = data[offset : offset + size]
        offset += size
        crc = cs.b64(cs.digest("CRC32C", piece))
        response = client.upload_part(
            Bucket=bucket,
            Key="composite.bin",
            UploadId=upload["UploadId"],
            PartNumber=number,
            Body=piece,
            ChecksumCRC32C=crc,
        )
        assert response["ChecksumCRC32C"] == crc
        part_crcs.append(crc)
        part_md5s.append(hashlib.md5(piece).digest())
        completed.append({"PartNumber": number, "ETag": response["ETag"], "ChecksumCRC32C": crc})
    client.complete_multipart_upload(
        Bucket=bucket, Key="composite.bin", UploadId=upload["UploadId"], MultipartUpload={"Parts": completed}
    )

    head = client.head_object(Bucket=bucket, Key="composite.bin", ChecksumMode="ENABLED")
    assert head["ChecksumType"] == "COMPOSITE"
    assert head["ChecksumCRC32C"] == cs.composite("CRC32C", part_crcs)
    assert head["ChecksumCRC32C"].endswith("-3")
    assert head["ETag"].strip('"') == cs.multipart_etag(part_md5s)
    # The composite value is not the whole object's CRC, which combine() gives instead.
    whole = cs.combine("CRC32C", list(zip(part_crcs, sizes, strict=True)))
    assert whole == base64.b64encode(cs.digest("CRC32C", data)).decode()
    assert not head["ChecksumCRC32C"].startswith(whole)


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "CRC64NVME"])
def test_a_running_crc_over_chunks_of_any_kind_is_awscrts_crc_of_the_whole(algorithm: str) -> None:
    """The CRCs computed as bytes pass (zlib-ng's CRC32, awscrt's others) are the values S3
    computes: held to awscrt's over the whole, fed as bytes, bytearrays and memoryviews cut at
    uneven places, empty chunks included."""
    import random

    from awscrt import checksums as crt

    from ferry.engine.proofs.checksums import Running, b64, digest

    data = random.Random(7).randbytes(3 * 1024 * 1024 + 17)
    whole = {"CRC32": crt.crc32, "CRC32C": crt.crc32c, "CRC64NVME": crt.crc64nvme}[algorithm](data)
    running, at, kinds = Running(algorithm), 0, (bytes, bytearray, memoryview)
    for n, size in enumerate([0, 1, 4095, 1024 * 1024, 7, 0, 2 * 1024 * 1024]):
        running.update(kinds[n % 3](data[at : at + size]))
        at += size
    running.update(memoryview(data)[at:])
    expected = whole.to_bytes(8 if algorithm == "CRC64NVME" else 4, "big")
    assert running.value() == b64(expected) and digest(algorithm, data) == expected
