"""A SRC with wildcards (`ferry copy 's3://bucket/logs/*.gz' DST`), as s5cmd reads one: `*`
any run of characters (`/` included), `?` any one; listed from the literal text before the
first wildcard only; each key lands under DST with its path below the literal text's last `/`.
The same for downloads, uploads of a local pattern, and `ferry sync` (whose --delete then
weighs only DST's keys the pattern takes)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import S3Server
from ferry.cli.main import main
from ferry.s3 import listing
from version_histories import history, versioned, write

LOGS = [
    "logs/2020/03/18/file1.gz",
    "logs/2020/03/19/file2.gz",
    "logs/2020/03/19/originals/file3.gz",
    "logs/2020/03/19/notes.txt",
    "logs/2020/04/x.gz",
    "logs/2020/031.gz",
    "other.gz",
]


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def logs(versitygw: S3Server) -> tuple[str, str]:
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    for key in LOGS:
        versitygw.client.put_object(Bucket=src, Key=key, Body=key.encode())
    return src, dst


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every prefix the copy lists the source under."""
    prefixes: list[str] = []
    original = listing.list_pages

    def spy(client: Any, **params: Any) -> Any:
        prefixes.append(params.get("Prefix", ""))
        return original(client, **params)

    monkeypatch.setattr(listing, "list_pages", spy)
    return prefixes


@pytest.mark.parametrize(
    ("pattern", "literal", "landed"),
    [
        # s5cmd's own example: `*` takes `/` too; keys relative to the literal text's last `/`.
        (
            "logs/2020/03/*.gz",
            "logs/2020/03/",
            ["18/file1.gz", "19/file2.gz", "19/originals/file3.gz"],
        ),
        ("logs/2020/03*.gz", "logs/2020/03", ["03/18/file1.gz", "03/19/file2.gz", "03/19/originals/file3.gz", "031.gz"]),
        ("logs/2020/0?/*/file?.gz", "logs/2020/0", ["03/18/file1.gz", "03/19/file2.gz", "03/19/originals/file3.gz"]),
        ("logs/2020/03/19/", "logs/2020/03/19/", ["file2.gz", "originals/file3.gz", "notes.txt"]),  # no wildcard
        ("logs/*/03/1?/", "logs/", ["2020/03/18/file1.gz", "2020/03/19/file2.gz", "2020/03/19/originals/file3.gz", "2020/03/19/notes.txt"]),
    ],
)  # fmt: skip
def test_the_keys_a_pattern_takes_land_below_its_literal_folder(
    versitygw: S3Server,
    logs: tuple[str, str],
    listed: list[str],
    pattern: str,
    literal: str,
    landed: list[str],
) -> None:
    src, dst = logs
    code, out, err = call(
        "copy", f"s3://{src}/{pattern}", f"s3://{dst}/backup", "--endpoint-url", versitygw.url
    )
    assert code == 0, (out, err)
    assert sorted(versitygw.keys(dst)) == sorted(f"backup/{key}" for key in landed)
    assert set(listed) == {literal}, listed  # the source listed from the literal text only
    for key in landed:
        original = versitygw.client.get_object(Bucket=dst, Key=f"backup/{key}")["Body"].read().decode()
        assert original.endswith(key), (original, key)


def test_filters_narrow_a_pattern_further_relative_to_its_folder(
    versitygw: S3Server, logs: tuple[str, str]
) -> None:
    src, dst = logs
    code, out, err = call(
        "copy", f"s3://{src}/logs/2020/03/1*", f"s3://{dst}/", "--endpoint-url", versitygw.url,
        "--include", "*.gz", "--exclude", "*/originals/*",
    )  # fmt: skip
    assert code == 0, err
    assert sorted(versitygw.keys(dst)) == ["18/file1.gz", "19/file2.gz"]


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        ("logs/2020/03/*.zip", "nothing matched s3://{src}/logs/2020/03/*.zip: no key under s3://{src}/logs/2020/03/ matches it"),
        ("log/*.gz", "nothing matched s3://{src}/log/*.gz: no object under s3://{src}/log/; did you mean s3://{src}/logs/?"),
    ],
)  # fmt: skip
def test_a_pattern_that_matches_nothing_is_refused_like_a_mistyped_prefix(
    versitygw: S3Server, logs: tuple[str, str], pattern: str, said: str
) -> None:
    src, dst = logs
    code, out, err = call("copy", f"s3://{src}/{pattern}", f"s3://{dst}/", "--endpoint-url", versitygw.url)
    assert code == 1 and out == "" and err.count("\n") == 1, (out, err)
    assert err == f"ferry: error: {said.format(src=src)}\n"
    assert versitygw.keys(dst) == []


def test_a_key_that_holds_a_wildcard_character_is_that_object_when_it_exists(versitygw: S3Server) -> None:
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    for key in ("q?a.txt", "qza.txt"):
        versitygw.client.put_object(Bucket=src, Key=key, Body=b"x")
    code, out, err = call("copy", f"s3://{src}/q?a.txt", f"s3://{dst}/", "--endpoint-url", versitygw.url)
    assert code == 0, err
    assert versitygw.keys(dst) == ["q?a.txt"]


def test_a_pattern_downloads_into_a_folder(
    versitygw: S3Server, logs: tuple[str, str], tmp_path: Path
) -> None:
    src, _ = logs
    code, out, err = call(
        "copy", f"s3://{src}/logs/2020/03/*.gz", str(tmp_path / "down"), "--endpoint-url", versitygw.url
    )
    assert code == 0, err
    files = sorted(
        str(p.relative_to(tmp_path / "down")) for p in (tmp_path / "down").rglob("*") if p.is_file()
    )
    assert files == ["18/file1.gz", "19/file2.gz", "19/originals/file3.gz"]


def test_a_local_pattern_uploads_the_files_it_takes(versitygw: S3Server, tmp_path: Path) -> None:
    root = tmp_path / "data"
    for name in ("a.gz", "b.txt", "sub/c.gz", "sub/d.txt"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(name.encode())
    dst = versitygw.bucket("dst")
    code, out, err = call("copy", f"{root}/*.gz", f"s3://{dst}/up/", "--endpoint-url", versitygw.url)
    assert code == 0, err
    assert sorted(versitygw.keys(dst)) == ["up/a.gz", "up/sub/c.gz"]
    code, out, err = call("copy", f"{root}/*.zip", f"s3://{dst}/up/", "--endpoint-url", versitygw.url)
    assert code == 1 and err.count("\n") == 1, err
    assert f"nothing matched {root}/*.zip: no file under {root}/ matches it" in err, err


def test_sync_with_a_pattern_deletes_only_what_the_pattern_takes(versitygw: S3Server) -> None:
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    for key, body in {"logs/a.gz": b"new", "logs/b.txt": b"b"}.items():
        versitygw.client.put_object(Bucket=src, Key=key, Body=body)
    for key, body in {"in/a.gz": b"old", "in/gone.gz": b"g", "in/keep.txt": b"k"}.items():
        versitygw.client.put_object(Bucket=dst, Key=key, Body=body)
    code, out, err = call(
        "sync",
        f"s3://{src}/logs/*.gz",
        f"s3://{dst}/in/",
        "--endpoint-url",
        versitygw.url,
        "--delete",
        "--json",
    )
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["copied"], summary["deleted"]) == (1, 1), summary
    assert sorted(versitygw.keys(dst)) == ["in/a.gz", "in/keep.txt"]
    assert versitygw.client.get_object(Bucket=dst, Key="in/a.gz")["Body"].read() == b"new"


def test_sync_refuses_a_pattern_that_matches_nothing_before_any_delete(versitygw: S3Server) -> None:
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    versitygw.client.put_object(Bucket=src, Key="logs/a.gz", Body=b"a")
    versitygw.client.put_object(Bucket=dst, Key="in/b.gzip", Body=b"b")
    code, out, err = call(
        "sync", f"s3://{src}/logs/*.gzip", f"s3://{dst}/in/", "--endpoint-url", versitygw.url, "--delete"
    )
    assert code == 1 and err.count("\n") == 1, (out, err)
    assert f"nothing matched s3://{src}/logs/*.gzip: no key under s3://{src}/logs/ matches it" in err
    assert versitygw.keys(dst) == ["in/b.gzip"]


def test_a_local_pattern_syncs_up_and_a_prefix_pattern_syncs_down(
    versitygw: S3Server, tmp_path: Path
) -> None:
    up = tmp_path / "up"
    for name in ("a.gz", "b.txt"):
        (up / name).parent.mkdir(parents=True, exist_ok=True)
        (up / name).write_bytes(name.encode())
    bucket = versitygw.bucket("b")
    versitygw.client.put_object(Bucket=bucket, Key="in/old.gz", Body=b"old")
    versitygw.client.put_object(Bucket=bucket, Key="in/keep.txt", Body=b"keep")
    code, out, err = call(
        "sync", f"{up}/*.gz", f"s3://{bucket}/in/", "--endpoint-url", versitygw.url, "--delete"
    )
    assert code == 0, err
    assert sorted(versitygw.keys(bucket)) == ["in/a.gz", "in/keep.txt"]

    down = tmp_path / "down"
    down.mkdir()
    (down / "stale.gz").write_bytes(b"s")
    (down / "mine.txt").write_bytes(b"m")
    code, out, err = call(
        "sync", f"s3://{bucket}/in/*.gz", str(down), "--endpoint-url", versitygw.url, "--delete"
    )
    assert code == 0, err
    assert sorted(p.name for p in down.iterdir()) == ["a.gz", "mine.txt"]


def test_all_versions_copies_the_histories_of_the_keys_a_pattern_takes(minio: S3Server) -> None:
    src, dst = versioned(minio, "src"), versioned(minio, "dst")
    write(minio, src, [("logs/a.gz", b"a1"), ("logs/a.gz", b"a2"), ("logs/b.txt", b"b")])
    code, out, err = call(
        "copy", f"s3://{src}/logs/*.gz", f"s3://{dst}/", "--endpoint-url", minio.url, "--all-versions"
    )
    assert code == 0, err
    assert history(minio, dst, "a.gz") == ["a1", "a2"]
    assert minio.keys(dst) == ["a.gz"]
