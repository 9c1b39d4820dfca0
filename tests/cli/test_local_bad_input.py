"""Bad local paths given to `ferry copy`: each answer is one line on stderr (`ferry: error: ...`)
naming what is wrong, exit code 1, no traceback, and nothing written: no object in the bucket,
no file or folder on disk. Permissions are checked as an unprivileged user (root reads
everything), so those cases run `ferry` as `nobody` where this machine allows it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import S3Server

FERRY = str(Path(sys.executable).with_name("ferry"))
NOBODY = 65534


def ferry(server: S3Server, *args: str, as_nobody: bool = False) -> subprocess.CompletedProcess[str]:
    command = [FERRY, "copy", *args, "--endpoint-url", server.url]
    if as_nobody:
        command = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def assert_one_line(run: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stderr.startswith("ferry: error: ") and run.stderr.count("\n") == 1, run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
    for part in parts:
        assert part in run.stderr


def snapshot(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def bucket(versitygw: S3Server) -> str:
    name = versitygw.bucket("bad")
    versitygw.client.put_object(Bucket=name, Key="photos/a.jpg", Body=b"a")
    return name


def can_drop_privileges() -> bool:
    return os.geteuid() == 0 and shutil.which("setpriv") is not None


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A temporary folder `nobody` can reach (pytest's own are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="ferry-local-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_missing_folder_to_upload(versitygw: S3Server, bucket: str, tmp_path: Path) -> None:
    run = ferry(versitygw, str(tmp_path / "nope"), f"s3://{bucket}/up/")
    assert_one_line(run, "nope", "no such local file or folder exists")
    assert versitygw.keys(bucket) == ["photos/a.jpg"]


def test_a_file_named_as_a_folder_to_upload(versitygw: S3Server, bucket: str, tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_bytes(b"x")
    run = ferry(versitygw, f"{tmp_path}/file.txt/", f"s3://{bucket}/up/")
    assert_one_line(run, "file.txt/", "names a folder, but a file stands in its path")
    assert versitygw.keys(bucket) == ["photos/a.jpg"]


def test_a_file_where_the_download_folder_must_be(versitygw: S3Server, bucket: str, tmp_path: Path) -> None:
    (tmp_path / "taken").write_bytes(b"mine")
    before = snapshot(tmp_path)
    run = ferry(versitygw, f"s3://{bucket}/photos/", str(tmp_path / "taken"))
    assert_one_line(run, "taken", "is a file where a folder is needed")
    deeper = ferry(versitygw, f"s3://{bucket}/photos/", str(tmp_path / "taken" / "sub"))
    assert_one_line(deeper, "taken/sub", "a file stands in its path")
    assert snapshot(tmp_path) == before and (tmp_path / "taken").read_bytes() == b"mine"


def test_a_missing_bucket_writes_no_folder(versitygw: S3Server, tmp_path: Path) -> None:
    run = ferry(versitygw, "s3://no-such-bucket-ferry/x/", str(tmp_path / "new" / "folder"))
    assert_one_line(run, "source bucket 'no-such-bucket-ferry' does not exist")
    assert snapshot(tmp_path) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{tmp}/a", "{tmp}/b"], "are both local paths: one side must be s3://bucket/prefix"),
        (["{tmp}/src", "s3://{bucket}", "--mode", "server-side"], "--mode server-side copies between two S3"),
        (["{tmp}/src", "s3://{bucket}", "--restore", "bulk"], "--restore applies to an S3 source"),
        (
            ["s3://{bucket}/photos/", "{tmp}/dst", "--storage-class", "GLACIER"],
            "--storage-class applies to an S3 destination",
        ),
        (["s3://{bucket}/photos/", "{tmp}/dst", "-L"], "--follow-symlinks applies to an S3 destination"),
        (["{tmp}/src", "s3://{bucket}", "--part-size", "1MiB"], "part size 1.0 MiB is out of range"),
    ],
)
def test_options_that_cannot_apply(
    versitygw: S3Server, bucket: str, tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_bytes(b"f")
    before = snapshot(tmp_path)
    run = ferry(versitygw, *[a.format(tmp=tmp_path, bucket=bucket) for a in args])
    assert_one_line(run, message)
    assert versitygw.keys(bucket) == ["photos/a.jpg"]
    assert snapshot(tmp_path) == before


@pytest.mark.skipif(not can_drop_privileges(), reason="needs root and setpriv to run ferry as nobody")
def test_no_permission_to_read_the_folder_or_write_the_destination(
    versitygw: S3Server, bucket: str, open_tmp: Path
) -> None:
    tmp_path = open_tmp
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "secret.txt").write_bytes(b"s")
    locked.chmod(0o700)  # root's alone
    run = ferry(versitygw, str(locked), f"s3://{bucket}/up/", as_nobody=True)
    assert_one_line(run, "cannot read the folder SRC", "permission denied")

    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"s")
    secret.chmod(0o600)
    run = ferry(versitygw, str(secret), f"s3://{bucket}/up/", as_nobody=True)
    assert_one_line(run, "cannot read SRC", "permission denied")

    readonly = tmp_path / "readonly"
    readonly.mkdir(mode=0o755)
    run = ferry(versitygw, f"s3://{bucket}/photos/", str(readonly / "new"), as_nobody=True)
    assert_one_line(run, "cannot write into DST", "permission denied")
    assert versitygw.keys(bucket) == ["photos/a.jpg"]
    assert list(readonly.iterdir()) == []


@pytest.mark.skipif(not can_drop_privileges(), reason="needs root and setpriv to run ferry as nobody")
def test_an_unreadable_file_inside_the_folder_fails_alone(
    versitygw: S3Server, bucket: str, open_tmp: Path
) -> None:
    tmp_path = open_tmp
    src = tmp_path / "src"
    src.mkdir(mode=0o755)
    (src / "open.txt").write_bytes(b"o")
    (src / "open.txt").chmod(0o644)
    (src / "closed.txt").write_bytes(b"c")
    (src / "closed.txt").chmod(0o600)
    (src / "closed-folder").mkdir(mode=0o700)
    (src / "closed-folder" / "x").write_bytes(b"x")
    run = ferry(versitygw, str(src), f"s3://{bucket}/up/", as_nobody=True)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "3 objects: 1 copied, 0 skipped, 2 failed" in run.stdout
    assert f"failed: {src / 'closed.txt'}: cannot read the file: Permission denied" in run.stdout
    assert f"failed: {src / 'closed-folder'}: cannot read the folder: Permission denied" in run.stdout
    assert sorted(versitygw.keys(bucket)) == ["photos/a.jpg", "up/open.txt"]


@pytest.mark.parametrize(
    ("command", "src", "parts"),
    [
        ("copy", "photos/nosuchdir/", ["nothing matched", "photos/nosuchdir/", "no object under it"]),
        ("copy", "photos/nosuch.jpg", ["nothing matched", "photos/nosuch.jpg"]),
        ("copy", "photo", ["nothing matched", "did you mean", "photos/"]),
        ("sync", "photos/nosuchdir/", ["nothing matched", "photos/nosuchdir/"]),
    ],
)
def test_a_download_whose_source_matches_nothing_is_refused_as_between_buckets(
    versitygw, bucket, tmp_path, command, src, parts
) -> None:
    """A mistyped SRC downloaded to a folder said '0 objects', exit 0, where the same typo
    between buckets is refused: it is refused in one line too, and no folder is made."""
    dst = tmp_path / "local" / "x"
    run = subprocess.run(
        [FERRY, command, f"s3://{bucket}/{src}", f"{dst}/", "--endpoint-url", versitygw.url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_one_line(run, *parts)
    assert not (tmp_path / "local").exists()
