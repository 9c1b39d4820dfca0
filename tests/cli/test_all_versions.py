"""`ferry copy --all-versions` as a user runs it: every version of each key, oldest first,
delete markers reproduced, so the destination's history holds the same contents in the same
order; a re-run copies only what the destination's history lacks; the report maps each
source version to the destination version holding it."""

from __future__ import annotations

import io
import json

import pytest

from conftest import S3Server
from ferry.cli.main import main
from ferry_process import ferry
from version_histories import MARKER, history, versioned, write


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_histories_are_copied_in_order_and_a_rerun_copies_only_what_is_new(request, tmp_path, server_name):
    server: S3Server = request.getfixturevalue(server_name)
    src, dst = versioned(server, "src"), versioned(server, "dst")
    write(
        server,
        src,
        [("p/a", b"a1"), ("p/a", b"a2"), ("p/a", None), ("p/a", b"a3"), ("p/b", b"b1"), ("p/b", None)],
    )
    report = tmp_path / "versions.jsonl"
    where = ("--endpoint-url", server.url)

    code, out, err = call(
        "copy", f"s3://{src}/p", f"s3://{dst}/q", *where, "--all-versions", "--report", str(report)
    )

    assert code == 0, err
    assert "6 objects: 6 copied, 0 skipped, 0 failed" in out
    assert history(server, dst, "q/a") == ["a1", "a2", MARKER, "a3"]
    assert history(server, dst, "q/b") == ["b1", MARKER]
    lines = [json.loads(line) for line in report.read_text().splitlines()[:-1]]
    source_ids = {v["VersionId"] for v in server.client.list_object_versions(Bucket=src)["Versions"]}
    dest_ids = {v["VersionId"] for v in server.client.list_object_versions(Bucket=dst)["Versions"]}
    mapped = {
        line["source_version_id"]: line["version_id"] for line in lines if line["strategy"] != "delete-marker"
    }
    assert set(mapped) == source_ids and set(mapped.values()) == dest_ids

    write(server, src, [("p/a", b"a4")])
    code, out, err = call("copy", f"s3://{src}/p", f"s3://{dst}/q", *where, "--all-versions", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["objects"], summary["copied"], summary["skipped"]) == (7, 1, 6)
    assert history(server, dst, "q/a") == ["a1", "a2", MARKER, "a3", "a4"]


def test_an_unversioned_destination_is_refused_in_one_line(versitygw):
    src, dst = versioned(versitygw, "src"), versitygw.bucket("dst")
    versitygw.client.put_object(Bucket=src, Key="k", Body=b"1")
    code, out, err = call(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--all-versions"
    )
    assert code == 1
    assert err.startswith("ferry: error: --all-versions: the destination bucket") and err.count("\n") == 1
    assert "does not keep versions" in err
    assert versitygw.keys(dst) == []


def test_a_source_that_never_kept_versions_is_refused_in_one_line_as_a_job_refuses_it(versitygw):
    src, dst = versitygw.bucket("src"), versioned(versitygw, "dst")
    versitygw.client.put_object(Bucket=src, Key="k", Body=b"1")
    code, out, err = call(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--all-versions"
    )
    assert code == 1, err
    assert err.startswith("ferry: error: --all-versions: the source bucket") and err.count("\n") == 1
    assert "has never kept versions" in err and "without --all-versions" in err
    assert versitygw.keys(dst) == []


def test_a_destination_history_that_is_not_the_sources_start_fails_that_key_only(minio):
    src, dst = versioned(minio, "src"), versioned(minio, "dst")
    write(minio, src, [("k", b"1"), ("k", b"2"), ("other", b"o")])
    write(minio, dst, [("k", b"someone else's")])
    code, out, err = call("copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", minio.url, "--all-versions")
    assert code == 2
    assert "1 copied, 0 skipped, 2 failed" in out
    assert "does not hold the source's version" in out
    assert history(minio, dst, "k") == ["someone else's"]
    assert history(minio, dst, "other") == ["o"]


def test_dry_run_writes_nothing(minio):
    src, dst = versioned(minio, "src"), versioned(minio, "dst")
    write(minio, src, [("k", b"1"), ("k", None)])
    code, out, err = call(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", minio.url, "--all-versions", "--dry-run"
    )
    assert code == 0, err
    assert (
        "dry run: 2 objects: would copy 1 (1 B), would skip 0, would add 1 delete marker, 0 failed; nothing was written"
        in out
    )
    assert minio.client.list_object_versions(Bucket=dst).get("Versions", []) == []
    assert minio.client.list_object_versions(Bucket=dst).get("DeleteMarkers", []) == []


@pytest.mark.parametrize(
    "flag",
    [
        ["--max-age", "1d"],
        ["--min-size", "1K"],
        ["--no-skip-existing"],
        ["--compare", "size-mtime"],
        ["--size-only"],
        ["--ignore-existing"],
    ],
)
def test_options_that_would_break_a_history_are_refused(versitygw, flag):
    src, dst = versioned(versitygw, "src"), versioned(versitygw, "dst")
    versitygw.client.put_object(Bucket=src, Key="k", Body=b"1")
    code, out, err = call(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--all-versions", *flag
    )
    assert code == 1 and err.startswith("ferry: error: ") and err.count("\n") == 1, err
    assert versitygw.keys(dst) == []


@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
@pytest.mark.parametrize("mode", ["server-side", "stream"])
def test_a_version_written_before_versioning_was_enabled_is_copied_by_its_id(request, server_name, mode):
    """Its version id is `null`; once a newer version exists, only asking for `null` reads it."""
    server: S3Server = request.getfixturevalue(server_name)
    src, dst = server.bucket("src"), versioned(server, "dst")
    server.client.put_object(Bucket=src, Key="k", Body=b"before versioning")
    server.client.put_bucket_versioning(Bucket=src, VersioningConfiguration={"Status": "Enabled"})
    server.client.put_object(Bucket=src, Key="k", Body=b"after")
    code, out, err = call(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", server.url, "--all-versions", "--mode", mode
    )
    assert code == 0, out + err
    assert history(server, dst, "k") == ["before versioning", "after"]


def test_a_version_that_needs_a_restore_holds_back_every_newer_version(motoserver, tmp_path):
    """An archived older version cannot be copied before a restore: its newer versions must
    wait for it, or the destination's history would hold them first, out of the source's
    order, and no later run could put the older one before them."""
    src, dst = versioned(motoserver, "src"), versioned(motoserver, "dst")
    motoserver.client.put_object(Bucket=src, Key="k", Body=b"old", StorageClass="GLACIER")
    motoserver.client.put_object(Bucket=src, Key="k", Body=b"new")
    report = tmp_path / "r.jsonl"
    code, out, err = call(
        "copy",
        f"s3://{src}",
        f"s3://{dst}",
        "--endpoint-url",
        motoserver.url,
        "--all-versions",
        "--json",
        "--report",
        str(report),
    )
    summary = json.loads(out)
    assert (summary["objects"], summary["copied"]) == (2, 0), out + err
    assert history(motoserver, dst, "k") == []
    newer = json.loads(report.read_text().splitlines()[1])
    assert newer["status"] == "skipped" and newer["reason"].startswith("held back: the older version"), newer


class _AsIfKmsWithoutChecksum:
    """The source's client, its HEADs answered as S3 answers for an SSE-KMS version written
    before S3 stored checksums: encrypted (so the ETag is no MD5) and no checksum. Everything
    else, the bytes included, is the real server's."""

    def __init__(self, client):
        self._client = client

    def head_object(self, **kwargs):
        head = {k: v for k, v in self._client.head_object(**kwargs).items() if not k.startswith("Checksum")}
        return {**head, "ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "arn:aws:kms:us-east-1:1:key/k"}

    def __getattr__(self, name):
        return getattr(self._client, name)


@pytest.mark.parametrize("server_name", ["versitygw", "minio"])
def test_a_version_without_comparable_evidence_is_proved_by_the_destinations_checksum_over_its_bytes(
    request, server_name
):
    """A re-run matches what is already there by content. Where the source version's HEAD
    carries nothing the copy's can be compared with (SSE-KMS without a checksum), the copy's
    own full-object checksum is computed over the source version's bytes: the same bytes
    match, other bytes of the same size do not."""
    from dataclasses import replace

    from ferry.engine.versions.version_copy import UNPROVED, same_bytes
    from ferry.s3.version_listing import key_history

    server: S3Server = request.getfixturevalue(server_name)
    src, dst = versioned(server, "src"), versioned(server, "dst")
    write(server, src, [("k", b"first"), ("k", b"other")])  # two versions of one size
    code, out, err = call(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", server.url, "--all-versions"
    )
    assert code == 0, out + err
    # As listed: an SSE-KMS version's ETag is no MD5 of its bytes, and its copy's is another.
    ours = [replace(v, etag=f"{n:032x}") for n, v in enumerate(key_history(server.client, src, "k").versions)]
    theirs = key_history(server.client, dst, "k").versions
    same = same_bytes(_AsIfKmsWithoutChecksum(server.client), server.client, src, dst)
    held = same(ours[0], theirs[0])
    assert held.same and held.evidence == "checksum", held
    other = same(ours[0], theirs[1])
    assert not other.same and other.evidence == "checksum", other
    # A copy with no checksum of its own either (another writer's): nothing can prove it, and
    # the verdict says so rather than that the bytes differ.
    kms = _AsIfKmsWithoutChecksum(server.client)
    unproved = same_bytes(kms, kms, src, dst)(ours[0], theirs[0])
    assert not unproved.same and unproved.evidence == UNPROVED, unproved


def test_a_destination_with_a_newer_version_than_the_sources_newest_fails_that_key_and_writes_nothing(minio):
    """Every source version is held at its position, but the destination has one more on top:
    its current object is not the source's (as `ferry check` finds), and no version written
    above it could put the history in the source's order. The key fails, naming why; the
    other keys are untouched."""
    src, dst = versioned(minio, "src"), versioned(minio, "dst")
    write(minio, src, [("rec/c.txt", b"c1"), ("rec/c.txt", b"c2"), ("rec/d.txt", b"d1")])
    where = ("--endpoint-url", minio.url)
    first = ferry("copy", f"s3://{src}/rec", f"s3://{dst}/rec", *where, "--all-versions")
    assert first.returncode == 0, first.stdout + first.stderr
    write(minio, dst, [("rec/c.txt", b"written later")])

    again = ferry("copy", f"s3://{src}/rec", f"s3://{dst}/rec", *where, "--all-versions")

    assert again.returncode == 2, again.stdout + again.stderr
    assert "3 objects: 0 copied, 2 skipped, 1 failed" in again.stdout
    assert "the destination holds 3 versions, more than the source's 2" in again.stdout
    assert history(minio, dst, "rec/c.txt") == ["c1", "c2", "written later"]
    assert history(minio, dst, "rec/d.txt") == ["d1"]
    check = ferry("check", f"s3://{src}/rec", f"s3://{dst}/rec", *where)
    assert check.returncode == 2 and "differs: c.txt" in check.stdout, check.stdout


def test_a_mistyped_prefix_is_refused_as_a_plain_copy_refuses_it(minio):
    src, dst = versioned(minio, "src"), versioned(minio, "dst")
    write(minio, src, [("photos/a.jpg", b"a"), ("photos/a.jpg", None)])  # a history of a delete only
    where = ("--endpoint-url", minio.url)

    code, out, err = call("copy", f"s3://{src}/photo", f"s3://{dst}/", *where, "--all-versions")

    assert code == 1, (out, err)
    assert out == "" and err.count("\n") == 1, err
    assert f"ferry: error: nothing matched s3://{src}/photo: no object under it" in err, err
    assert minio.client.list_object_versions(Bucket=dst).get("Versions", []) == []
    # A key whose history holds only a delete marker is matched: not refused, its marker copied.
    code, out, err = call("copy", f"s3://{src}/photos/", f"s3://{dst}/", *where, "--all-versions")
    assert code == 0, err
    assert "2 objects: 2 copied" in out, out


def test_compare_checksum_is_what_a_history_copy_does_and_is_taken_as_a_job_spec_takes_it(versitygw):
    """A history is matched version by version by its contents: `--compare checksum` asks for
    just that, so it is taken, as a job spec's `compare: checksum` is; the other tests are refused
    by both (test_options_that_would_break_a_history_are_refused, and the job's spec check)."""
    src, dst = versioned(versitygw, "src"), versioned(versitygw, "dst")
    write(versitygw, src, [("k", b"1"), ("k", b"2")])
    where = ("--endpoint-url", versitygw.url, "--all-versions", "--compare", "checksum")
    code, out, err = call("copy", f"s3://{src}", f"s3://{dst}", *where)
    assert code == 0, err
    assert history(versitygw, dst, "k") == ["1", "2"]
    code, out, err = call("copy", f"s3://{src}", f"s3://{dst}", *where)
    assert code == 0, err
    assert "2 objects: 0 copied, 2 skipped, 0 failed" in out
