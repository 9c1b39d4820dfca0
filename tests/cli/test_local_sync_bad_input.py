"""Bad local paths given to `ferry sync` and `ferry check`: one line on stderr (`ferry: error:
...`), exit code 1, no traceback, nothing written to the bucket or the disk. Permissions are
checked as `nobody` (root reads everything), as tests/cli/test_local_bad_input.py does."""

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
    command = [FERRY, *args, "--endpoint-url", server.url]
    if as_nobody:
        command = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def assert_one_line(run: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stderr.startswith("ferry: error: ") and run.stderr.count("\n") == 1, run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
    for part in parts:
        assert part in run.stderr, run.stderr


def snapshot(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def bucket(versitygw: S3Server) -> str:
    name = versitygw.bucket("bad")
    versitygw.client.put_object(Bucket=name, Key="p/a", Body=b"a")
    versitygw.client.put_object(Bucket=name, Key="p/extra", Body=b"x")
    return name


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sync", "{tmp}/nope", "s3://{bucket}/p", "--delete"], "no such local file or folder exists"),
        (["check", "{tmp}/nope", "s3://{bucket}/p"], "no such local file or folder exists"),
        (["check", "s3://{bucket}/p", "{tmp}/nope"], "DST '{tmp}/nope' is not an S3 URL"),
        (
            ["sync", "{tmp}/file", "s3://{bucket}/p", "--delete"],
            "is a file: ferry sync keeps a folder in step",
        ),
        (["check", "{tmp}/file", "s3://{bucket}/p"], "is a file: ferry check compares a folder"),
        (["sync", "{tmp}/file/", "s3://{bucket}/p"], "names a folder, but a file stands in its path"),
        (["sync", "s3://{bucket}/p", "{tmp}/file", "--delete"], "is a file where a folder is needed"),
        (["sync", "s3://{bucket}/p", "{tmp}/file/sub"], "a file stands in its path"),
        (
            ["sync", "{tmp}/src", "{tmp}/dst"],
            "are both local paths: ferry sync keeps a folder and an S3 prefix",
        ),
        (["check", "{tmp}/src", "{tmp}/dst"], "are both local paths: ferry check compares a folder"),
        (["sync", "{tmp}/src", "s3://{bucket}/p", "--max-delete", "1"], "--max-delete limits --delete"),
        (
            ["sync", "{tmp}/src", "s3://{bucket}/p", "--delete", "--max-delete", "0"],
            "more than --max-delete 0",
        ),
        (["sync", "s3://{bucket}/p", "{tmp}/dst", "-L"], "--follow-symlinks applies to an S3 destination"),
        (
            ["check", "{tmp}/src", "s3://{bucket}/p", "--source-region", "eu-west-1"],
            "--source-region applies to an S3",
        ),
        (
            ["check", "s3://{bucket}/p", "s3://{bucket}/q", "-L"],
            "--follow-symlinks applies to a local folder",
        ),
        (
            ["sync", "{tmp}/src", "s3://no-such-bucket-ferry/p"],
            "destination bucket 'no-such-bucket-ferry' does not",
        ),
    ],
)
def test_bad_input_is_one_line_exit_1_and_nothing_written(
    versitygw: S3Server, bucket: str, tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "file").write_bytes(b"f")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "new").write_bytes(b"n")
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "mine").write_bytes(b"m")
    before = snapshot(tmp_path)
    run = ferry(versitygw, *[a.format(tmp=tmp_path, bucket=bucket) for a in args])
    assert_one_line(run, message.format(tmp=tmp_path))
    assert sorted(versitygw.keys(bucket)) == ["p/a", "p/extra"]
    assert snapshot(tmp_path) == before


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


@pytest.mark.skipif(not can_drop_privileges(), reason="needs root and setpriv to run ferry as nobody")
def test_no_permission_is_one_line_and_an_unreadable_subfolder_decides_nothing(
    versitygw: S3Server, bucket: str, open_tmp: Path
) -> None:
    locked = open_tmp / "locked"
    locked.mkdir()
    locked.chmod(0o700)  # root's alone
    for command in ("sync", "check"):
        run = ferry(versitygw, command, str(locked), f"s3://{bucket}/p", as_nobody=True)
        assert_one_line(run, "cannot read the folder SRC", "permission denied")
    readonly = open_tmp / "readonly"
    readonly.mkdir(mode=0o755)
    run = ferry(versitygw, "sync", f"s3://{bucket}/p", str(readonly / "new"), "--delete", as_nobody=True)
    assert_one_line(run, "cannot write into DST", "permission denied")
    assert list(readonly.iterdir()) == []

    # A folder inside SRC that cannot be read: the keys under it are neither missing nor deleted.
    versitygw.client.put_object(Bucket=bucket, Key="p/closed/x", Body=b"x")
    src = open_tmp / "src"
    (src / "closed").mkdir(parents=True, mode=0o700)
    src.chmod(0o755)
    (src / "a").write_bytes(b"a")
    (src / "a").chmod(0o644)
    check = ferry(versitygw, "check", str(src), f"s3://{bucket}/p", as_nobody=True)
    assert check.returncode == 2
    assert "unreadable: closed/x (the source's " in check.stdout and "cannot read the folder" in check.stdout
    assert "missing on source: closed/x" not in check.stdout and "missing on source: extra" in check.stdout
    run = ferry(versitygw, "sync", str(src), f"s3://{bucket}/p", "--delete", "--dry-run", as_nobody=True)
    assert (
        "would delete: " + f"s3://{bucket}/p/extra" in run.stdout
        and "closed/x" not in run.stdout.split("failed")[0]
    )
    assert "would delete: " + f"s3://{bucket}/p/closed/x" not in run.stdout
    run = ferry(versitygw, "sync", str(src), f"s3://{bucket}/p", "--delete", as_nobody=True)
    assert run.returncode == 2 and "deleted nothing (1 object kept)" in run.stderr
    assert sorted(versitygw.keys(bucket)) == ["p/a", "p/closed/x", "p/extra"]
