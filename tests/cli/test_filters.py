"""The filters `ferry copy`, `ferry sync` and `ferry check` share, as a user meets them: sizes
read by the rule every size option follows (tests/cli/test_sizes.py), ages as rclone reads
them, a list of keys, and filtered-out objects counted nowhere."""

from __future__ import annotations

import datetime as dt
import io
import json
import time

import pytest

from conftest import S3Server
from ferry.cli.main import main
from ferry_process import ferry


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def put(server: S3Server, bucket: str, objects: dict[str, bytes]) -> None:
    for key, body in objects.items():
        server.client.put_object(Bucket=bucket, Key=key, Body=body)


SIZES = {"k/999b": b"x" * 999, "k/1kib": b"x" * 1024, "k/2kib": b"x" * 2048, "k/3kib": b"x" * 3072}


@pytest.mark.parametrize(
    ("flags", "copied"),
    [
        (["--min-size", "1K"], ["1kib", "2kib", "3kib"]),  # inclusive: 1 KiB itself passes
        (["--max-size", "2KiB"], ["1kib", "2kib", "999b"]),  # inclusive
        (["--min-size", "1024", "--max-size", "2048"], ["1kib", "2kib"]),  # a bare number is bytes
        (["--min-size", "1000B", "--max-size", "1Ki"], ["1kib"]),
        (["--min-size", "1KB", "--max-size", "2KB"], ["1kib", "2kib"]),  # units are binary
    ],
    ids=["min", "max", "bare-bytes", "bytes", "kb-binary"],
)
def test_sizes_are_inclusive_and_read_by_the_one_rule(versitygw, vgw_buckets, flags, copied) -> None:
    src, dst = vgw_buckets
    put(versitygw, src, SIZES)
    code, out, err = call(
        "copy", f"s3://{src}/k/", f"s3://{dst}/", "--endpoint-url", versitygw.url, "--json", *flags
    )
    assert code == 0, err
    assert sorted(versitygw.keys(dst)) == copied
    summary = json.loads(out)
    # Filtered-out objects are no objects of the copy: not skipped, not counted at all.
    assert (summary["objects"], summary["copied"], summary["skipped"]) == (len(copied), len(copied), 0)


def test_ages_cut_at_last_modified_by_duration_or_date(versitygw, vgw_buckets, tmp_path) -> None:
    src, dst = vgw_buckets
    put(versitygw, src, {"old": b"1"})
    time.sleep(1.5)  # LastModified is whole seconds on some servers
    between = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    time.sleep(1.5)
    put(versitygw, src, {"new": b"2"})
    where = ("--endpoint-url", versitygw.url)

    assert call("copy", f"s3://{src}", f"s3://{dst}/newer/", *where, "--max-age", between)[0] == 0
    assert call("copy", f"s3://{src}", f"s3://{dst}/older/", *where, "--min-age", between)[0] == 0
    assert call("copy", f"s3://{src}", f"s3://{dst}/none/", *where, "--min-age", "1h")[0] == 0
    assert call("copy", f"s3://{src}", f"s3://{dst}/all/", *where, "--max-age", "1d")[0] == 0
    assert sorted(versitygw.keys(dst)) == ["all/new", "all/old", "newer/new", "older/old"]


def test_files_from_copies_only_the_keys_it_lists(versitygw, vgw_buckets, tmp_path) -> None:
    src, dst = vgw_buckets
    put(versitygw, src, {"in/a.txt": b"a", "in/b.txt": b"b", "in/sub/c.txt": b"c", "in/d.txt": b"d"})
    listed = tmp_path / "keys.txt"
    listed.write_text("# what to copy\n\na.txt\n  sub/c.txt  \nnot-there.txt\n", encoding="utf-8")
    code, out, err = call(
        "copy", f"s3://{src}/in", f"s3://{dst}/out", "--endpoint-url", versitygw.url,
        "--files-from", str(listed), "--json",
    )  # fmt: skip
    assert code == 0, err
    assert sorted(versitygw.keys(dst)) == ["out/a.txt", "out/sub/c.txt"]
    assert json.loads(out)["objects"] == 2


def test_files_from_reads_a_leading_slash_as_srcs_root_and_says_which_names_match_nothing(
    versitygw, vgw_buckets, tmp_path
) -> None:
    """rclone reads `/empty.txt` in a --files-from file as `empty.txt` below SRC. A name that
    matches no object is not dropped without a word: the summary counts and names them, and
    the report's summary lists them all."""
    src, dst = vgw_buckets
    put(versitygw, src, {"in/a.txt": b"a", "in/empty.txt": b"", "in/sub/c.txt": b"c"})
    listed = tmp_path / "keys.txt"
    listed.write_text("/empty.txt\na.txt\nnot-there.txt\n/sub/c.txt\n/gone/d.txt\n", encoding="utf-8")
    report = tmp_path / "report.jsonl"

    run = ferry(
        "copy", f"s3://{src}/in", f"s3://{dst}/out", "--endpoint-url", versitygw.url,
        "--files-from", str(listed), "--report", str(report),
    )  # fmt: skip

    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(versitygw.keys(dst)) == ["out/a.txt", "out/empty.txt", "out/sub/c.txt"]
    assert "3 objects: 3 copied" in run.stdout
    assert (
        "  note: 2 of the 5 names --files-from lists match no object: gone/d.txt, not-there.txt"
        in run.stdout.splitlines()
    ), run.stdout
    summary = json.loads(report.read_text().splitlines()[-1])["summary"]
    assert summary["files_from"] == {"names": 5, "unmatched": ["gone/d.txt", "not-there.txt"]}
    # ferry check, with the same list, compares the same keys and says the same of the others.
    check = ferry(
        "check", f"s3://{src}/in", f"s3://{dst}/out", "--endpoint-url", versitygw.url,
        "--files-from", str(listed),
    )  # fmt: skip
    assert check.returncode == 0 and "3 keys: 3 identical" in check.stdout, check.stdout + check.stderr
    assert "  note: 2 of the 5 names --files-from lists match no object: gone/d.txt, not-there.txt" in (
        check.stdout.splitlines()
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--min-size", "10XB"], "--min-size: cannot read size '10XB'"),
        (["--max-size", "lots"], "--max-size: cannot read size 'lots'"),
        (["--min-age", "yesterday"], "--min-age 'yesterday': write a duration such as 30m"),
        (["--min-size", "2M", "--max-size", "1M"], "--min-size 2.0 MiB is above --max-size 1.0 MiB"),
        (["--min-age", "1d", "--max-age", "2d2"], "--max-age '2d2': write a duration"),
        (["--min-age", "7d", "--max-age", "1d"], "leave no time between them"),
        (["--files-from", "{tmp}/missing.txt"], "cannot read --files-from"),
        (["--files-from", "{tmp}/latin1.txt"], "is not UTF-8 (byte 0xe9 on line 2)"),
    ],
)
@pytest.mark.parametrize("command", ["copy", "sync", "check"])
def test_a_bad_filter_is_one_line_exit_1_and_nothing_written(
    versitygw, vgw_buckets, tmp_path, command, flags, message
) -> None:
    src, dst = vgw_buckets
    put(versitygw, src, {"a": b"a"})
    (tmp_path / "latin1.txt").write_bytes("a\ncaf\xe9\n".encode("latin-1"))
    argv = [f.format(tmp=tmp_path) for f in flags]
    code, out, err = call(command, f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, *argv)
    assert code == 1
    assert err.startswith("ferry: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert message in err, err
    assert versitygw.keys(dst) == []
