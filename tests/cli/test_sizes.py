"""One rule for every size a user writes, as the `ferry` command reads it: a bare number is
bytes, and every unit is binary (K, KB and KiB are 1,024 bytes; M, MB and MiB 1,048,576...),
as the AWS CLI reads its sizes. `--min-size`, `--part-size`, `ferry estimate --avg-size` and
the others read `10MB` and `10485760` alike, and their `--help` says so."""

from __future__ import annotations

import json

import pytest

from conftest import S3Server
from ferry_process import ferry

KiB, MiB = 1024, 1024 * 1024
SIZES = {"999b": 999, "1000b": 1000, "1023b": 1023, "1kib": 1024}


@pytest.mark.parametrize(
    ("minimum", "copied"),
    [
        ("1000", ["1000b", "1023b", "1kib"]),  # a bare number is bytes
        ("1KB", ["1kib"]),  # units are binary: 1KB is 1,024 bytes
        ("1K", ["1kib"]),
        ("1KiB", ["1kib"]),
    ],
)
def test_the_size_filters_read_a_bare_number_as_bytes_and_every_unit_as_binary(
    versitygw: S3Server, vgw_buckets: tuple[str, str], minimum: str, copied: list[str]
) -> None:
    src, dst = vgw_buckets
    for key, size in SIZES.items():
        versitygw.client.put_object(Bucket=src, Key=key, Body=b"x" * size)

    run = ferry("copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--min-size", minimum)

    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(versitygw.keys(dst)) == sorted(copied)


def test_a_part_size_in_mb_is_read_as_the_filters_read_it(versitygw: S3Server, vgw_buckets, tmp_path) -> None:
    """`--part-size 5MB` was 5,000,000 bytes, below S3's 5 MiB floor, and refused, while
    `--min-size 5MB` was refused as ambiguous: both are 5 MiB now (and `--multipart-threshold
    10MB` 10 MiB, below the 11 MiB file)."""
    src, dst = vgw_buckets
    big = tmp_path / "big.bin"
    big.write_bytes(b"p" * (11 * MiB))

    run = ferry(
        "copy", str(big), f"s3://{dst}/big.bin", "--endpoint-url", versitygw.url,
        "--part-size", "5MB", "--multipart-threshold", "10MB",
    )  # fmt: skip

    assert run.returncode == 0, run.stdout + run.stderr
    first = versitygw.client.head_object(Bucket=dst, Key="big.bin", PartNumber=1)
    assert first["ContentLength"] == 5 * MiB and first["PartsCount"] == 3


def test_estimate_reads_its_sizes_by_the_same_rule() -> None:
    def estimated_bytes(size: str) -> int:
        run = ferry("estimate", "--objects", "1000", "--avg-size", size, "--json")
        assert run.returncode == 0, run.stdout + run.stderr
        return int(json.loads(run.stdout)["bytes"])

    assert estimated_bytes("1MB") == estimated_bytes("1MiB") == estimated_bytes("1M") == 1000 * MiB
    assert estimated_bytes("1000") == 1000 * 1000


@pytest.mark.parametrize(
    "command",
    [["copy"], ["sync"], ["check"], ["run"], ["estimate"], ["demo"]],
    ids=lambda c: " ".join(c),
)
def test_every_help_that_takes_a_size_says_the_rule(command: list[str]) -> None:
    run = ferry(*command, "--help")
    assert run.returncode == 0, run.stderr
    text = " ".join(run.stdout.split())
    assert "a bare number is bytes; units are binary (1MB = 1MiB)" in text, text
