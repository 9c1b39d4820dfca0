"""`--bwlimit SIZE` from the outside: every body byte a streamed copy, an upload or a download
moves passes the one shared limiter (counted by watching it, not by timing the run), the
copies still arrive verified; a server-side copy moves no bytes here, is not limited, and the
summary says so; a rate that is no rate is refused in one line before anything is written."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from conftest import S3Server
from ferry.cli.main import main
from ferry.engine.run import bandwidth

MiB = 1024 * 1024
SMALL_PARTS = ["--multipart-threshold", "5MiB", "--part-size", "5MiB"]
OBJECTS = {"big.bin": os.urandom(6 * MiB + 17), "a.txt": b"a" * 1000, "b.txt": os.urandom(70_000)}
TOTAL = sum(len(body) for body in OBJECTS.values())
# Besides the objects, a multipart copy writes Ferry's mark of its upload into the destination
# (a JSON object of a few hundred bytes): a body through the same client, limited too.
MARK = 1024


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def charged(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the run's limiters were charged, and at what rate they were made."""
    seen: dict[str, Any] = {"bytes": 0, "rates": set()}
    take, init = bandwidth.Bandwidth.take, bandwidth.Bandwidth.__init__

    def counting_take(self: bandwidth.Bandwidth, n: int) -> None:
        seen["bytes"] += n
        take(self, n)

    def noting_init(self: bandwidth.Bandwidth, rate: int, **kwargs: Any) -> None:
        seen["rates"].add(rate)
        init(self, rate, **kwargs)

    monkeypatch.setattr(bandwidth.Bandwidth, "take", counting_take)
    monkeypatch.setattr(bandwidth.Bandwidth, "__init__", noting_init)
    return seen


def seed(server: S3Server) -> str:
    src = server.bucket("src")
    for key, body in OBJECTS.items():
        server.client.put_object(Bucket=src, Key=f"d/{key}", Body=body)
    return src


def test_a_streamed_copy_passes_every_byte_it_reads_and_writes_through_the_limit(
    versitygw: S3Server, charged: dict[str, Any]
) -> None:
    src, dst = seed(versitygw), versitygw.bucket("dst")
    code, out, err = call(
        "copy", f"s3://{src}/d/", f"s3://{dst}/", "--endpoint-url", versitygw.url, "--mode", "stream",
        "--bwlimit", "1GiB", *SMALL_PARTS, "--json",
    )  # fmt: skip
    assert code == 0, err
    summary = json.loads(out)
    assert summary["copied"] == 3 and "unverified" not in summary["verified_by"], summary
    for key, body in OBJECTS.items():
        assert versitygw.client.get_object(Bucket=dst, Key=key)["Body"].read() == body
    assert charged["rates"] == {1024 * MiB}
    # Each object byte read from the source and written, and the one multipart copy's mark.
    assert 0 < charged["bytes"] - 2 * TOTAL <= MARK, charged


def test_an_upload_and_a_download_pass_every_byte_through_the_limit(
    versitygw: S3Server, tmp_path: Path, charged: dict[str, Any]
) -> None:
    folder = tmp_path / "up"
    folder.mkdir()
    for name, body in OBJECTS.items():
        (folder / name).write_bytes(body)
    bucket = versitygw.bucket("b")
    code, out, err = call(
        "copy", str(folder), f"s3://{bucket}/in/", "--endpoint-url", versitygw.url, "--bwlimit", "512MiB",
        *SMALL_PARTS,
    )  # fmt: skip
    assert code == 0, err
    uploaded = charged["bytes"]
    assert 0 < uploaded - TOTAL <= MARK, charged  # each file's bytes, and the multipart one's mark

    down = tmp_path / "down"
    code, out, err = call(
        "copy", f"s3://{bucket}/in/", str(down), "--endpoint-url", versitygw.url, "--bwlimit", "536870912",
        *SMALL_PARTS,
    )  # fmt: skip
    assert code == 0, err
    assert {p.name: p.read_bytes() for p in down.iterdir()} == OBJECTS
    assert charged["bytes"] - uploaded == TOTAL  # a download writes no mark: its bytes alone
    assert charged["rates"] == {512 * MiB}


def test_a_server_side_copy_moves_no_bytes_here_is_not_limited_and_the_summary_says_so(
    versitygw: S3Server, charged: dict[str, Any]
) -> None:
    src, dst = seed(versitygw), versitygw.bucket("dst")
    code, out, err = call(
        "copy", f"s3://{src}/d/", f"s3://{dst}/", "--endpoint-url", versitygw.url, "--bwlimit", "1MiB"
    )
    assert code == 0, err
    assert "3 copied" in out
    assert charged["bytes"] == 0
    assert (
        "  note: 3 objects were copied server-side, inside the store: no byte passed through this "
        "machine, so --bwlimit did not slow them (--mode stream sends every byte through it)"
    ) in out.splitlines(), out


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("0", "--bwlimit 0: give a rate above 0 bytes per second, e.g. 10MiB"),
        ("0MiB", "--bwlimit 0MiB: give a rate above 0 bytes per second, e.g. 10MiB"),
        ("-5", "--bwlimit: cannot read size '-5'"),
        ("fast", "--bwlimit: cannot read size 'fast'"),
        ("10XB", "--bwlimit: cannot read size '10XB'"),
    ],
)
@pytest.mark.parametrize("command", ["copy", "sync"])
def test_a_rate_that_is_no_rate_is_refused_before_anything_is_written(
    versitygw: S3Server, command: str, value: str, said: str
) -> None:
    src, dst = seed(versitygw), versitygw.bucket("dst")
    code, out, err = call(
        command, f"s3://{src}/d/", f"s3://{dst}/", "--endpoint-url", versitygw.url, f"--bwlimit={value}"
    )
    assert code == 1 and out == "" and err.count("\n") == 1, (out, err)
    assert err.startswith(f"ferry: error: {said}"), err
    assert versitygw.keys(dst) == []


def test_the_run_is_paced_at_the_rate_given(versitygw: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's limiter gets a clock that stands still and a sleep that only records: every
    take must then be asked to wait for all the bytes before it, so the last wait asked for is
    (all bytes - one second's burst) / rate, whichever thread took last."""
    sleeps: list[float] = []
    made: list[bandwidth.Bandwidth] = []
    init = bandwidth.Bandwidth.__init__

    def still_clock(self: bandwidth.Bandwidth, rate: int, **kwargs: Any) -> None:
        init(self, rate, clock=lambda: 0.0, sleep=sleeps.append)
        made.append(self)

    monkeypatch.setattr(bandwidth.Bandwidth, "__init__", still_clock)
    src, dst = seed(versitygw), versitygw.bucket("dst")
    code, out, err = call(
        "copy", f"s3://{src}/d/", f"s3://{dst}/", "--endpoint-url", versitygw.url, "--mode", "stream",
        "--bwlimit", "64KiB", *SMALL_PARTS,
    )  # fmt: skip
    assert code == 0, err
    (limit,) = made
    assert limit.rate == limit.burst == 64 * 1024
    assert limit.taken >= 2 * TOTAL
    assert max(sleeps) == pytest.approx((limit.taken - limit.burst) / limit.rate)
    assert versitygw.client.get_object(Bucket=dst, Key="big.bin")["Body"].read() == OBJECTS["big.bin"]
