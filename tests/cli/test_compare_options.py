"""`--size-only` and `--ignore-existing` (rclone's names; `--compare size` and `--compare
existence`): what is already at the destination is skipped on its size alone, or on its being
there at all, for a copy between buckets, an upload and a download alike, each skip with a true
reason; contradictory options are refused in one line before anything is written."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import S3Server
from ferry.cli.main import main

# The source's objects, and what the destination already holds under the same names: one of
# the same size with other bytes, one of another size, one missing.
SOURCE = {"same-size": b"new!", "other-size": b"longer bytes", "missing": b"fresh"}
ALREADY = {"same-size": b"old!", "other-size": b"short"}
BY_SIZE = {"same-size": "skipped", "other-size": "copied", "missing": "copied"}
BY_EXISTENCE = {"same-size": "skipped", "other-size": "skipped", "missing": "copied"}
SAME_SIZE = "same size at the destination (contents not compared)"
EXISTS = "already exists at the destination (not compared)"


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def outcomes(report: Path) -> dict[str, tuple[str, str | None]]:
    """Each object's (status, reason), by its name (the last part of its key or path)."""
    lines = [json.loads(line) for line in report.read_text().splitlines()[:-1]]
    return {line["key"].rsplit("/", 1)[-1]: (line["status"], line.get("reason")) for line in lines}


def arrange(server: S3Server, tmp_path: Path, direction: str) -> tuple[str, str, Any]:
    """SRC and DST for `direction`, and a function reading DST's bytes by name."""
    if direction == "upload":
        folder = tmp_path / "up"
        folder.mkdir()
        for name, body in SOURCE.items():
            (folder / name).write_bytes(body)
        bucket = server.bucket("dst")
        for name, body in ALREADY.items():
            server.client.put_object(Bucket=bucket, Key=f"in/{name}", Body=body)
        return str(folder) + "/", f"s3://{bucket}/in/", lambda name: _object(server, bucket, f"in/{name}")
    bucket = server.bucket("src")
    for name, body in SOURCE.items():
        server.client.put_object(Bucket=bucket, Key=f"out/{name}", Body=body)
    if direction == "download":
        folder = tmp_path / "down"
        folder.mkdir()
        for name, body in ALREADY.items():
            (folder / name).write_bytes(body)
        return f"s3://{bucket}/out/", str(folder), lambda name: (folder / name).read_bytes()
    dst = server.bucket("dst")
    for name, body in ALREADY.items():
        server.client.put_object(Bucket=dst, Key=f"in/{name}", Body=body)
    return f"s3://{bucket}/out/", f"s3://{dst}/in/", lambda name: _object(server, dst, f"in/{name}")


def _object(server: S3Server, bucket: str, key: str) -> bytes:
    return server.client.get_object(Bucket=bucket, Key=key)["Body"].read()


@pytest.mark.parametrize("direction", ["buckets", "upload", "download"])
@pytest.mark.parametrize(
    ("flags", "expected", "reason"),
    [
        (["--size-only"], BY_SIZE, SAME_SIZE),
        (["--compare", "size"], BY_SIZE, SAME_SIZE),
        (["--ignore-existing"], BY_EXISTENCE, EXISTS),
        (["--compare", "existence"], BY_EXISTENCE, EXISTS),
    ],
)
def test_what_the_destination_holds_is_skipped_by_size_or_by_being_there(
    versitygw: S3Server, tmp_path: Path, direction: str, flags: list[str], expected: dict, reason: str
) -> None:
    src, dst, read = arrange(versitygw, tmp_path, direction)
    report = tmp_path / "r.jsonl"

    code, out, err = call("copy", src, dst, "--endpoint-url", versitygw.url, *flags, "--report", str(report))

    assert code == 0, (out, err)
    got = outcomes(report)
    assert {name: status for name, (status, _) in got.items()} == expected
    for name, status in expected.items():
        if status == "skipped":
            assert got[name][1] == reason, got[name]
            assert read(name) == ALREADY[name]  # left as it was
        else:
            assert read(name) == SOURCE[name]


def test_sync_takes_them_too(versitygw: S3Server, tmp_path: Path) -> None:
    src, dst, read = arrange(versitygw, tmp_path, "buckets")
    code, out, err = call("sync", src, dst, "--endpoint-url", versitygw.url, "--ignore-existing", "--json")
    assert code == 0, err
    assert (json.loads(out)["copied"], json.loads(out)["skipped"]) == (1, 2)
    assert read("other-size") == ALREADY["other-size"]


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--size-only", "--ignore-existing"], "--size-only and --ignore-existing"),
        (["--size-only", "--no-skip-existing"], "--size-only and --no-skip-existing"),
        (["--ignore-existing", "--no-skip-existing"], "--ignore-existing and --no-skip-existing"),
        (["--size-only", "--compare", "checksum"], "--size-only and --compare checksum"),
        (["--ignore-existing", "--compare", "size"], "--ignore-existing and --compare size"),
        (["--compare", "existence", "--no-skip-existing"], "--compare existence and --no-skip-existing"),
    ],
)
def test_contradictory_choices_are_refused_in_one_line(
    versitygw: S3Server, tmp_path: Path, flags: list[str], said: str
) -> None:
    src, dst, read = arrange(versitygw, tmp_path, "buckets")
    code, out, err = call("copy", src, dst, "--endpoint-url", versitygw.url, *flags)
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert err.startswith("ferry: error: ") and said in err, err
    assert read("same-size") == ALREADY["same-size"] and read("other-size") == ALREADY["other-size"]


@pytest.mark.parametrize("flag", ["--size-only", "--ignore-existing"])
def test_all_versions_refuses_them(versitygw: S3Server, flag: str) -> None:
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    code, out, err = call(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--all-versions", flag
    )
    assert code == 1 and err.count("\n") == 1, err
    assert flag in err and "--all-versions" in err, err


@pytest.mark.parametrize("compare", ["size", "existence"])
def test_a_job_spec_takes_them_as_options_compare_but_not_with_all_versions(
    tmp_path: Path, compare: str
) -> None:
    spec = {
        "source": {"bucket": "src-b"},
        "destination": {"bucket": "dst-b"},
        "options": {"compare": compare},
    }
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec))
    code, out, err = call("job", "validate", str(path))
    assert code == 0, err
    assert json.loads(out)["options"]["compare"] == compare

    spec["options"]["all_versions"] = True
    path.write_text(json.dumps(spec))
    code, out, err = call("job", "validate", str(path))
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith("ferry: error: options.compare: ") and "all_versions" in err, err


@pytest.mark.parametrize("direction", ["buckets", "download"])
@pytest.mark.parametrize("flag", ["--size-only", "--ignore-existing"])
def test_a_large_source_the_destination_already_holds_is_skipped_without_a_head(
    versitygw: S3Server, quirks: Any, tmp_path: Path, direction: str, flag: str
) -> None:
    """The listing's size decides these compares: an object above the multipart threshold, in
    parts, that the destination already holds at the same size is skipped without the HEAD a
    copy of it needs (one request per object, on every rerun of a sync). One of another size is
    still HEADed and copied."""
    src = versitygw.bucket("src")
    sizes = {"same": 6 * 2**20, "other": 6 * 2**20 + 1}
    for name, size in sizes.items():
        key = f"out/{name}"
        upload = versitygw.client.create_multipart_upload(Bucket=src, Key=key)["UploadId"]
        parts = []
        for number, (start, end) in enumerate([(0, 5 * 2**20), (5 * 2**20, size)], 1):
            answer = versitygw.client.upload_part(
                Bucket=src, Key=key, UploadId=upload, PartNumber=number, Body=b"s" * (end - start)
            )
            parts.append({"PartNumber": number, "ETag": answer["ETag"]})
        versitygw.client.complete_multipart_upload(
            Bucket=src, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
        )
    if direction == "download":
        folder = tmp_path / "down"
        folder.mkdir()
        (folder / "same").write_bytes(b"d" * sizes["same"])
        (folder / "other").write_bytes(b"d" * sizes["same"])
        dst = str(folder)
    else:
        bucket = versitygw.bucket("dst")
        for name in sizes:
            versitygw.client.put_object(Bucket=bucket, Key=f"in/{name}", Body=b"d" * sizes["same"])
        dst = f"s3://{bucket}/in/"
    proxy = quirks(versitygw)
    report = tmp_path / "r.jsonl"

    code, out, err = call(
        "copy", f"s3://{src}/out/", dst, "--endpoint-url", proxy.url, flag,
        "--multipart-threshold", "5MiB", "--report", str(report),
    )  # fmt: skip

    assert code == 0, (out, err)
    got = outcomes(report)
    expected_other = "skipped" if flag == "--ignore-existing" else "copied"
    assert (got["same"][0], got["other"][0]) == ("skipped", expected_other), got
    heads = [seen.path for seen in proxy.requests("HEAD") if seen.path.startswith(f"/{src}/")]
    assert f"/{src}/out/same" not in heads, heads
