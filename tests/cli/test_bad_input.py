"""Bad input to `ferry copy` and `ferry run`: each case a specific one-line message, exit code 1
(or 2 where objects were tried and failed), no traceback, and nothing written to the
destination: no object, no open multipart upload.

Cases already covered elsewhere are not repeated here (tests/cli/test_cli.py: no scheme,
missing buckets, part size 1 MiB and unreadable, concurrency 0 and negative, an endpoint that
refuses the source; tests/engine/test_archive.py: archived sources in the engine).

The commands run in-process (`ferry.cli.main.main`): a process per case costs seconds here.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import ACCESS_KEY, SECRET_KEY, S3Server, free_port, server_binary, wait_for_port
from ferry.cli.main import main

MiB = 1024 * 1024


def ferry(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), err.getvalue()


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("ferry: error")]


def assert_nothing_written(server: S3Server, bucket: str) -> None:
    assert server.keys(bucket) == []
    assert server.open_uploads(bucket) == []


@pytest.fixture
def loaded(versitygw: S3Server, vgw_buckets: tuple[str, str]) -> tuple[str, str]:
    """A source with a small object and one that a 5 MiB threshold copies in parts."""
    src, dst = vgw_buckets
    versitygw.client.put_object(Bucket=src, Key="small", Body=b"payload")
    versitygw.client.put_object(Bucket=src, Key="large", Body=os.urandom(6 * MiB))
    return src, dst


# -- URIs and bucket names ------------------------------------------------------------------

LONG = "a" * 64
HUGE = "a" * 256


@pytest.mark.parametrize(
    ("dst", "message"),
    [
        ("http://{dst}/x", "DST 'http://{dst}/x' is not an S3 URL: write s3://bucket or s3://bucket/prefix"),
        ("S3://{dst}", "DST 'S3://{dst}' is not an S3 URL"),
        ("s3://", "DST 's3://' is not an S3 URL"),
        ("s3:///key", "DST 's3:///key' is not an S3 URL"),
        ("s3://ab/x", "DST 's3://ab/x': 'ab' is not a valid bucket name: it has 2 characters, fewer than 3"),
        (f"s3://{HUGE}", f"'{HUGE}' is not a valid bucket name: it has 256 characters, more than 63"),
        ("s3://my bucket/x", "'my bucket' is not a valid bucket name: it contains ' '"),
        ("s3://192.168.5.4", "'192.168.5.4' is not a valid bucket name: it is formatted as an IP address"),
        # Names an old us-east-1 bucket may have: refused once the endpoint has no such bucket.
        (
            "s3://MyBucket",
            "destination bucket 'MyBucket' is not a valid bucket name: it has upper case letters",
        ),
        ("s3://my_bucket", "destination bucket 'my_bucket' is not a valid bucket name: it has underscores"),
        (f"s3://{LONG}", f"destination bucket '{LONG}' is not a valid bucket name: it has 64 characters"),
    ],
)
def test_a_malformed_destination_uri_or_bucket_name_is_named(
    versitygw: S3Server, loaded: tuple[str, str], dst: str, message: str
) -> None:
    src, real_dst = loaded
    code, out, err = ferry("copy", f"s3://{src}", dst.format(dst=real_dst), "--endpoint-url", versitygw.url)
    assert code == 1, err
    assert message.format(dst=real_dst) in err
    assert "lowercase letters, digits" in err or "S3 URL" in err  # the rule, not only the refusal
    assert len(error_lines(err)) == 1 and out == ""
    assert_nothing_written(versitygw, real_dst)


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ("s3://", "SRC 's3://' is not an S3 URL"),
        ("ftp://{src}", "SRC 'ftp://{src}' is not an S3 URL"),
        (
            "s3://Photos_2019",
            "source bucket 'Photos_2019' is not a valid bucket name: it has upper case letters",
        ),
        ("s3://10.0.0.1/x", "'10.0.0.1' is not a valid bucket name: it is formatted as an IP address"),
    ],
)
def test_a_malformed_source_uri_or_bucket_name_is_named(
    versitygw: S3Server, loaded: tuple[str, str], src: str, message: str
) -> None:
    real_src, dst = loaded
    code, out, err = ferry("copy", src.format(src=real_src), f"s3://{dst}", "--endpoint-url", versitygw.url)
    assert code == 1, err
    assert message.format(src=real_src) in err
    assert len(error_lines(err)) == 1
    assert_nothing_written(versitygw, dst)


# -- sizes and concurrency ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--part-size", "6GiB"],
            "--part-size: part size 6.0 GiB is out of range: S3 accepts parts from 5 MiB to 5 GiB",
        ),
        (["--part-size", "0"], "--part-size: part size 0 B is out of range"),
        (["--part-size=-5MiB"], "--part-size: cannot read size '-5MiB'"),
        (["--part-size", "99999TiB"], "--part-size: part size 99999.0 TiB is out of range"),
        (
            ["--multipart-threshold", "0"],
            "--multipart-threshold: multipart threshold 0 B is out of range: 5 MiB to 5 GiB",
        ),
        (
            ["--multipart-threshold", "6GiB"],
            "--multipart-threshold: multipart threshold 6.0 GiB is out of range",
        ),
        (["--memory-limit", "0"], "--memory-limit 0 B is less than one part: give at least 5MiB"),
        (["--memory-limit", "1MiB"], "--memory-limit 1.0 MiB is less than one part: give at least 5MiB"),
        (["--concurrency", "100000000"], "--concurrency 100000000 is more than 1024"),
        (["--part-concurrency", "100000000"], "--part-concurrency 100000000 is more than 1024"),
        (["--concurrency", "-1"], "--concurrency must be at least 1"),
    ],
)
def test_a_size_or_concurrency_out_of_range_is_refused_before_any_request(
    versitygw: S3Server, loaded: tuple[str, str], args: list[str], message: str
) -> None:
    src, dst = loaded
    started = time.monotonic()
    code, out, err = ferry("copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, *args)
    assert code == 1, err
    assert message in err
    assert len(error_lines(err)) == 1
    assert time.monotonic() - started < 30  # a huge concurrency must not build a huge pool first
    assert_nothing_written(versitygw, dst)


# -- KMS keys Ferry can check offline -------------------------------------------------------

KEY_ID = "1234abcd-12ab-34cd-56ef-1234567890ab"


@pytest.mark.parametrize(
    ("key", "region", "message"),
    [
        (
            "not a key",
            None,
            "--kms-key-id: 'not a key' is not a KMS key: give a key id, key ARN, alias/NAME or alias ARN",
        ),
        (
            f"arn:aws:s3:::bucket/{KEY_ID}",
            None,
            "is not a KMS key: give a key id, key ARN, alias/NAME or alias ARN",
        ),
        (
            f"arn:aws:kms:eu-west-1:111122223333:key/{KEY_ID}",
            "us-east-1",
            "--kms-key-id: the key is in eu-west-1 but the destination is in us-east-1: "
            "S3 encrypts only with a key in the bucket's region",
        ),
        (
            f"arn:aws-cn:kms:cn-north-1:111122223333:key/{KEY_ID}",
            "us-east-1",
            "the key is in cn-north-1 but the destination is in us-east-1",
        ),
    ],
)
def test_a_kms_key_that_cannot_be_used_is_refused_before_any_request(
    versitygw: S3Server, loaded: tuple[str, str], key: str, region: str | None, message: str
) -> None:
    src, dst = loaded
    where = ["--dest-region", region] if region else []
    code, out, err = ferry(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", versitygw.url, "--kms-key-id", key, *where
    )
    assert code == 1, err
    assert message in err
    assert len(error_lines(err)) == 1
    assert_nothing_written(versitygw, dst)


@pytest.mark.parametrize(
    "key",
    [
        KEY_ID,
        "mrk-1234abcd12ab34cd56ef1234567890ab",
        "alias/backup",
        f"arn:aws:kms:us-east-1:111122223333:key/{KEY_ID}",
        "arn:aws:kms:us-east-1:111122223333:alias/backup",
    ],
)
def test_every_form_of_kms_key_s3_takes_passes_the_offline_check(key: str) -> None:
    from ferry.kms_keys import kms_key_problem

    assert kms_key_problem(key, "us-east-1") is None
    assert kms_key_problem(key, None) is None


# -- an endpoint that is down -------------------------------------------------------------


def test_a_destination_endpoint_that_is_down_is_named_quickly(
    versitygw: S3Server, loaded: tuple[str, str]
) -> None:
    src, _ = loaded
    port = free_port()  # nothing listens here
    started = time.monotonic()
    code, out, err = ferry(
        "copy", f"s3://{src}", "s3://some-bucket", "--source-endpoint-url", versitygw.url,
        "--dest-endpoint-url", f"http://127.0.0.1:{port}",
    )  # fmt: skip
    seconds = time.monotonic() - started
    assert code == 1, err
    assert error_lines(err) == [
        f'ferry: error: could not connect to the destination endpoint: Could not connect to the endpoint URL: "http://127.0.0.1:{port}/some-bucket"'
    ]
    assert seconds < 20, seconds  # bounded retries, not a minute of backoff


# -- AccessDenied on either side: versitygw with its own IAM -----------------------------

ALICE, ALICE_SECRET = "alice", "alicesecretkey12345"


class IamGateway:
    """A versitygw with internal IAM: the root user owns buckets; `alice` (role user) is
    refused every bucket she does not own, unless a bucket policy grants her."""

    def __init__(self, server: S3Server, admin_url: str, binary: str) -> None:
        self.server, self.admin_url, self.binary = server, admin_url, binary

    def admin(self, *args: str) -> None:
        subprocess.run(
            [self.binary, "admin", "-a", ACCESS_KEY, "-s", SECRET_KEY, "--er", self.admin_url, *args],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def bucket_of(self, owner: str, prefix: str) -> str:
        name = self.server.bucket(prefix)
        if owner != ACCESS_KEY:
            self.admin("change-bucket-owner", "-b", name, "-o", owner)
        return name


@pytest.fixture(scope="module")
def iam_gateway() -> Iterator[IamGateway]:
    binary = server_binary("versitygw")
    root = tempfile.mkdtemp(prefix="ferry-vgw-iam-")
    for sub in ("data", "iam"):
        os.makedirs(os.path.join(root, sub))
    port, admin_port = free_port(), free_port()
    log = open(os.path.join(root, "server.log"), "wb")  # noqa: SIM115 - lives as long as the server
    env = dict(os.environ, ROOT_ACCESS_KEY_ID=ACCESS_KEY, ROOT_SECRET_ACCESS_KEY=SECRET_KEY)
    process = subprocess.Popen(
        [binary, "--port", f"127.0.0.1:{port}", "--admin-port", f"127.0.0.1:{admin_port}",
         "--iam-dir", os.path.join(root, "iam"), "posix", os.path.join(root, "data")],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    try:
        wait_for_port(port)
        wait_for_port(admin_port)
        gateway = IamGateway(
            S3Server("versitygw-iam", f"http://127.0.0.1:{port}"), f"http://127.0.0.1:{admin_port}", binary
        )
        gateway.admin("create-user", "-a", ALICE, "-s", ALICE_SECRET, "-r", "user")
        yield gateway
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--source-profile alice` / `--dest-profile alice`: the other side keeps the root user."""
    credentials = tmp_path / "credentials"
    credentials.write_text(
        f"[alice]\naws_access_key_id = {ALICE}\naws_secret_access_key = {ALICE_SECRET}\n"
        f"[root]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))


def test_access_denied_on_the_source_names_the_side_and_the_permission(
    iam_gateway: IamGateway, profiles: None
) -> None:
    server = iam_gateway.server
    src, dst = iam_gateway.bucket_of(ACCESS_KEY, "src"), iam_gateway.bucket_of(ALICE, "dst")
    server.client.put_object(Bucket=src, Key="a", Body=b"a")
    code, out, err = ferry(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", server.url,
        "--source-profile", "alice", "--dest-profile", "alice",
    )  # fmt: skip
    assert code == 1, err
    assert error_lines(err) == [
        f"ferry: error: AccessDenied on s3:ListBucket s3://{src}: grant the source identity s3:ListBucket on s3://{src}"
    ]
    assert_nothing_written(server, dst)


def test_access_denied_on_the_destination_bucket_is_refused_before_copying(
    iam_gateway: IamGateway, profiles: None
) -> None:
    server = iam_gateway.server
    src, dst = iam_gateway.bucket_of(ALICE, "src"), iam_gateway.bucket_of(ACCESS_KEY, "dst")
    server.client.put_object(Bucket=src, Key="a", Body=b"a")
    code, out, err = ferry(
        "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", server.url,
        "--source-profile", "alice", "--dest-profile", "alice",
    )  # fmt: skip
    assert code == 1, err
    assert error_lines(err) == [
        f"ferry: error: AccessDenied on s3:ListBucket s3://{dst}: grant the destination identity s3:ListBucket on s3://{dst}"
    ]
    assert_nothing_written(server, dst)


def test_a_destination_that_lists_but_refuses_writes_fails_each_object_with_no_upload_left(
    iam_gateway: IamGateway, profiles: None
) -> None:
    server = iam_gateway.server
    src, dst = iam_gateway.bucket_of(ALICE, "src"), iam_gateway.bucket_of(ACCESS_KEY, "dst")
    server.client.put_object(Bucket=src, Key="small", Body=b"a")
    server.client.put_object(Bucket=src, Key="large", Body=os.urandom(6 * MiB))
    policy = {
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow", "Principal": {"AWS": [ALICE]},
            "Action": ["s3:ListBucket", "s3:GetObject"],
            "Resource": [f"arn:aws:s3:::{dst}", f"arn:aws:s3:::{dst}/*"],
        }],
    }  # fmt: skip
    server.client.put_bucket_policy(Bucket=dst, Policy=json.dumps(policy))
    for mode in ("auto", "stream"):
        code, out, err = ferry(
            "copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", server.url, "--mode", mode,
            "--source-profile", "alice", "--dest-profile", "alice", "--multipart-threshold", "5MiB",
        )  # fmt: skip
        assert code == 2, err
        assert "2 failed" in out
        for key in ("small", "large"):
            assert (
                f"failed: s3://{src}/{key}: AccessDenied on s3:PutObject s3://{dst}/{key}: "
                f"grant the destination identity s3:PutObject on s3://{dst}/{key}"
            ) in out, out
        assert_nothing_written(server, dst)


# -- archived objects ---------------------------------------------------------------------


def test_archived_sources_are_skipped_with_the_reason_and_nothing_is_written(
    motoserver: S3Server, moto_buckets: tuple[str, str]
) -> None:
    """moto enforces archive classes (versitygw stores GLACIER as STANDARD, MinIO refuses the
    class): a GLACIER or DEEP_ARCHIVE source is skipped, named, and never read."""
    src, dst = moto_buckets
    for cls in ("GLACIER", "DEEP_ARCHIVE"):
        motoserver.client.put_object(Bucket=src, Key=cls.lower(), Body=b"cold", StorageClass=cls)
    motoserver.client.put_object(Bucket=src, Key="warm", Body=b"warm")
    code, out, err = ferry("copy", f"s3://{src}", f"s3://{dst}", "--endpoint-url", motoserver.url)
    assert code == 0, err
    assert "3 objects: 1 copied, 2 skipped, 0 failed" in out
    assert (
        "skipped: 2 archived objects (an archive storage class): restore first, "
        "or run with --restore bulk|standard|expedited"
    ) in out, out
    assert motoserver.keys(dst) == ["warm"]
    assert motoserver.open_uploads(dst) == []


# -- the same faults through `ferry run` (a job spec) ---------------------------------------


def write_spec(tmp_path: Path, spec: dict) -> str:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec))
    return str(path)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"source": {"bucket": "{src}"}, "destination": {"bucket": "My_Bucket"}},
            "destination.bucket: 'My_Bucket' is not a valid bucket name: it has upper case letters",
        ),
        (
            {"source": {"bucket": "192.168.5.4"}, "destination": {"bucket": "{dst}"}},
            "source.bucket: '192.168.5.4' is not a valid bucket name: it is formatted as an IP address",
        ),
        (
            {"source": {"bucket": "s3://{src}"}, "destination": {"bucket": "{dst}"}},
            "source.bucket: 's3://{src}' is not a valid bucket name: it contains '/' ':'",
        ),
        (
            {
                "source": {"bucket": "{src}"},
                "destination": {"bucket": "{dst}"},
                "options": {"part_size": "6GiB"},
            },
            "options.part_size: part size 6.0 GiB is out of range",
        ),
        (
            {
                "source": {"bucket": "{src}"},
                "destination": {"bucket": "{dst}"},
                "options": {"multipart_threshold": 0},
            },
            "options.multipart_threshold: multipart threshold 0 B is out of range",
        ),
        (
            {
                "source": {"bucket": "{src}"},
                "destination": {"bucket": "{dst}"},
                "options": {"kms_key_id": "nope"},
            },
            "options.kms_key_id: 'nope' is not a KMS key",
        ),
        (
            {"source": {"bucket": "no-such-bucket-ferry"}, "destination": {"bucket": "{dst}"}},
            "no-such-bucket-ferry",
        ),
    ],
)
def test_ferry_run_names_a_bad_job_spec_and_writes_nothing(
    versitygw: S3Server, loaded: tuple[str, str], tmp_path: Path, spec: dict, message: str
) -> None:
    src, dst = loaded
    text = json.dumps(spec).replace("{src}", src).replace("{dst}", dst)
    path = write_spec(tmp_path, json.loads(text))
    code, out, err = ferry(
        "run", path, "--endpoint-url", versitygw.url, "--ledger", str(tmp_path / "l.sqlite"), "--quiet"
    )
    assert code in (1, 2), err
    assert message.replace("{src}", src).replace("{dst}", dst) in err, err
    assert len(error_lines(err)) == 1, err
    assert_nothing_written(versitygw, dst)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch-concurrency", "0"], "--batch-concurrency: 0 is out of range (1 to 64)"),
        (["--batch-concurrency", "100000000"], "--batch-concurrency: 100000000 is out of range (1 to 64)"),
        (["--memory-limit", "1MiB"], "--memory-limit 1.0 MiB is less than one part: give at least 5MiB"),
    ],
)
def test_ferry_run_refuses_settings_out_of_range(
    versitygw: S3Server, loaded: tuple[str, str], tmp_path: Path, args: list[str], message: str
) -> None:
    src, dst = loaded
    path = write_spec(tmp_path, {"source": {"bucket": src}, "destination": {"bucket": dst}})
    started = time.monotonic()
    code, out, err = ferry(
        "run", path, "--endpoint-url", versitygw.url, "--ledger", str(tmp_path / "l.sqlite"), "--quiet", *args
    )
    assert code == 1, err
    assert message in err, err
    assert time.monotonic() - started < 30
    assert_nothing_written(versitygw, dst)


def test_ferry_run_names_a_destination_endpoint_that_is_down(
    versitygw: S3Server, loaded: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two attempts, not eight: the message is the point here; that the wait is bounded at the
    # default attempts is test_a_destination_endpoint_that_is_down_is_named_quickly's.
    monkeypatch.setattr("ferry.s3.clients.MAX_ATTEMPTS", 2)
    src, _ = loaded
    port = free_port()
    path = write_spec(tmp_path, {"source": {"bucket": src}, "destination": {"bucket": "some-bucket"}})
    started = time.monotonic()
    code, out, err = ferry(
        "run", path, "--source-endpoint-url", versitygw.url, "--dest-endpoint-url", f"http://127.0.0.1:{port}",
        "--ledger", str(tmp_path / "l.sqlite"), "--quiet",
    )  # fmt: skip
    assert code in (1, 2), err
    assert len(error_lines(err)) == 1, err
    assert f"127.0.0.1:{port}" in err and "destination" in err, err
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("denied", ["source", "destination"])
def test_ferry_run_names_access_denied_on_either_side_and_writes_nothing(
    iam_gateway: IamGateway, profiles: None, tmp_path: Path, denied: str
) -> None:
    server = iam_gateway.server
    src = iam_gateway.bucket_of(ACCESS_KEY if denied == "source" else ALICE, "src")
    dst = iam_gateway.bucket_of(ACCESS_KEY if denied == "destination" else ALICE, "dst")
    server.client.put_object(Bucket=src, Key="a", Body=b"a")
    path = write_spec(tmp_path, {"source": {"bucket": src}, "destination": {"bucket": dst}})
    code, out, err = ferry(
        "run", path, "--endpoint-url", server.url, "--source-profile", "alice", "--dest-profile", "alice",
        "--ledger", str(tmp_path / "l.sqlite"), "--quiet",
    )  # fmt: skip
    expected = {
        "source": f"ferry: error: source: cannot list s3://{src}/: AccessDenied on s3:ListBucket s3://{src}: "
        f"grant the source identity s3:ListBucket on s3://{src}",
        "destination": f"ferry: error: destination: cannot write s3://{dst}/: AccessDenied on s3:PutObject "
        f"s3://{dst}/.ferry-write-check: grant the destination identity s3:PutObject on s3://{dst}/.ferry-write-check",
    }[denied]
    assert code == 1, out + err
    assert error_lines(err) == [expected], err
    assert_nothing_written(server, dst)
