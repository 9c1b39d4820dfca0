"""Locations reached other than as the worker itself: roles assumed with STS (moto), keys
read from Secrets Manager (moto) and used against a real S3-compatible server (versitygw),
and the pipeline passing each location's way in from the stack's configuration.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.signers import RequestSigner

from conftest import ACCESS_KEY, PIPELINE_REPORTS, SECRET_KEY, FakeLambdaContext, S3Server
from ferry.models import Endpoint
from ferry.pipeline.locations import Location
from ferry.pipeline.settings import PipelineSettings
from ferry.s3 import clients
from ferry.s3.clients import make_client
from ferry.s3.lean_s3 import LeanClient
from handlers import copy_batch, prepare

SOURCE_ROLE = "arn:aws:iam::444455556666:role/ferry-source-reader"
DEST_ROLE = "arn:aws:iam::777788889999:role/ferry-destination-writer"


@pytest.fixture(autouse=True)
def fresh_credentials() -> Iterator[None]:
    """Credentials are cached per process; each test starts (and leaves) with none."""
    clients.forget_credentials()
    yield
    clients.forget_credentials()


@pytest.fixture
def assume_role_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every sts:AssumeRole moto answers, by role ARN."""
    from moto.sts.models import STSBackend

    calls: list[str] = []
    original = STSBackend.assume_role

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs.get("role_arn") or args[1])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(STSBackend, "assume_role", counted)
    return calls


def caller_arn(credentials: Any) -> str:
    """Who moto says signs with these credentials (an assumed role's session ARN)."""
    frozen = credentials.get_frozen_credentials()
    sts = boto3.client(
        "sts",
        region_name="us-east-1",
        aws_access_key_id=frozen.access_key,
        aws_secret_access_key=frozen.secret_key,
        aws_session_token=frozen.token,
    )
    return sts.get_caller_identity()["Arn"]


def test_a_role_is_assumed_once_per_role_and_region_and_refreshed_before_expiry(
    assume_role_calls: list[str],
) -> None:
    from moto import mock_aws

    with mock_aws():
        endpoint = Endpoint(role_arn=SOURCE_ROLE, region="eu-west-1")
        first, second = make_client(endpoint), make_client(endpoint)
        credentials = first._request_signer._credentials
        assert second._request_signer._credentials is credentials  # shared: a warm Lambda reuses it
        assert assume_role_calls == [SOURCE_ROLE]
        old_key = credentials.get_frozen_credentials().access_key
        assert old_key.startswith("ASIA")  # moto's temporary (assumed-role) keys
        assert caller_arn(credentials) == "arn:aws:sts::444455556666:assumed-role/ferry-source-reader/ferry"

        # Expired (as after an hour in a warm Lambda): the next request refreshes first.
        credentials._expiry_time = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
        assert credentials.get_frozen_credentials().access_key != old_key
        assert assume_role_calls == [SOURCE_ROLE, SOURCE_ROLE]

        make_client(Endpoint(role_arn=SOURCE_ROLE, region="us-west-2"))  # another region: its own
        assert len(assume_role_calls) == 3


owners_sent: dict[str, set[Any]] = {}


@pytest.fixture
def signatures(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str, Any]]:
    """(operation, bucket, access key, credentials) of every S3 request signed in the test
    (botocore's RequestSigner, whichever signer implementation it then uses); the requests'
    ExpectedBucketOwner headers go to `owners_sent` (bucket -> set of values, None if absent)."""
    seen: list[tuple[str, str, str, Any]] = []
    owners_sent.clear()
    original = RequestSigner.sign

    def recording(self: Any, operation_name: str, request: Any, *args: Any, **kwargs: Any) -> Any:
        if self._service_id.hyphenize() == "s3" and self._credentials is not None:
            url = urlsplit(request.url)
            host = url.hostname or ""
            bucket = host.split(".s3")[0] if ".s3" in host else url.path.lstrip("/").split("/")[0]
            seen.append((operation_name, bucket, self._credentials.access_key, self._credentials))
            owners_sent.setdefault(bucket, set()).add(request.headers.get("x-amz-expected-bucket-owner"))
        return original(self, operation_name, request, *args, **kwargs)

    monkeypatch.setattr(RequestSigner, "sign", recording)

    # The lean request path (ferry.s3.lean_s3) signs its requests itself, with the same credentials.
    lean_sign = LeanClient._sign

    def lean_recording(self: Any, request: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        url = urlsplit(request["url"])
        host = url.hostname or ""
        bucket = host.split(".s3")[0] if ".s3" in host else url.path.lstrip("/").split("/")[0]
        seen.append((request["operation"], bucket, self._credentials.access_key, self._credentials))
        owners_sent.setdefault(bucket, set()).add(request["headers"].get("x-amz-expected-bucket-owner"))
        return lean_sign(self, request, *args, **kwargs)

    monkeypatch.setattr(LeanClient, "_sign", lean_recording)
    return seen


def with_locations(pipeline: Any, monkeypatch: pytest.MonkeyPatch, **settings: Any) -> None:
    """Deploy the pipeline's workers again with these sources and destinations."""
    configured = PipelineSettings(**settings, large_object_threshold=pipeline.settings.large_object_threshold)
    for name, value in configured.worker_environment().items():
        monkeypatch.setenv(name, value)
    pipeline.services.cache_clear()


def test_two_roles_copy_by_streaming_each_side_signed_by_its_own_role(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch, signatures: list[Any], assume_role_calls: list[str]
) -> None:
    with_locations(
        pipeline,
        monkeypatch,
        sources=(Location("src", owner="444455556666", role_arn=SOURCE_ROLE),),
        destinations=(Location("dst", role_arn=DEST_ROLE, region="us-east-1"),),
    )
    for n in range(5):
        pipeline.s3.put_object(Bucket="src", Key=f"data/{n}.txt", Body=b"x" * (n + 10))
    job = prepare.handler(
        {
            "spec": {"source": {"bucket": "src", "prefix": "data/"}, "destination": {"bucket": "dst"}},
            "execution_name": "two-roles",
        },
        FakeLambdaContext(),
    )
    assert "rejected" not in job, job
    items = [{"Key": f"data/{n}.txt", "Size": n + 10} for n in range(5)]
    signatures.clear()
    owners_sent.clear()

    result = copy_batch.handler({"job": job, "items": items, "pass": 1}, FakeLambdaContext())

    signed = list(signatures)
    assert result["counts"]["copied"] == 5, result
    assert pipeline.s3.list_objects_v2(Bucket="dst")["KeyCount"] == 5
    by_bucket: dict[str, set[str]] = {}
    for method, bucket, _, credentials in signed:
        assert method not in ("CopyObject", "UploadPartCopy")  # two identities: never server-side
        if bucket in ("src", "dst"):
            by_bucket.setdefault(bucket, set()).add(caller_arn(credentials))
    assert by_bucket == {
        "src": {"arn:aws:sts::444455556666:assumed-role/ferry-source-reader/ferry"},
        "dst": {"arn:aws:sts::777788889999:assumed-role/ferry-destination-writer/ferry"},
    }
    assert sorted(set(assume_role_calls)) == sorted({SOURCE_ROLE, DEST_ROLE})
    assert owners_sent["src"] == {"444455556666"}  # every request to the source names its owner
    assert owners_sent["dst"] == {None}  # no owner configured for it
    # A second batch in the same (warm) worker assumes nothing again.
    calls = len(assume_role_calls)
    copy_batch.handler({"job": job, "items": items, "pass": 1, "batch_id": "again"}, FakeLambdaContext())
    assert len(assume_role_calls) == calls
    rows = pipeline.s3.list_objects_v2(Bucket=PIPELINE_REPORTS, Prefix="")["Contents"]
    reports = [pipeline.s3.get_object(Bucket=PIPELINE_REPORTS, Key=r["Key"])["Body"].read() for r in rows]
    strategies = {
        json.loads(line).get("strategy")
        for body in reports
        for line in body.splitlines()
        if b'"copied"' in line
    }
    assert strategies == {"stream"}


def test_one_role_for_both_sides_still_copies_server_side(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch, signatures: list[Any]
) -> None:
    with_locations(
        pipeline,
        monkeypatch,
        sources=(Location("src", role_arn=DEST_ROLE),),
        destinations=(Location("dst", role_arn=DEST_ROLE),),
    )
    pipeline.s3.put_object(Bucket="src", Key="data/a.txt", Body=b"abc")
    job = prepare.handler(
        {
            "spec": {"source": {"bucket": "src"}, "destination": {"bucket": "dst"}},
            "execution_name": "one-role",
        },
        FakeLambdaContext(),
    )
    signatures.clear()
    result = copy_batch.handler(
        {"job": job, "items": [{"Key": "data/a.txt", "Size": 3}], "pass": 1}, FakeLambdaContext()
    )
    assert result["counts"]["copied"] == 1
    assert [m for m, *_ in signatures if m in ("CopyObject", "UploadPartCopy")] == ["CopyObject"]


def test_a_source_on_another_endpoint_needs_a_manifest(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_locations(
        pipeline,
        monkeypatch,
        sources=(
            Location("store", endpoint_url="https://minio.example.com", credentials_secret="ferry/keys"),
        ),
        destinations=(Location("dst"),),
    )
    job = prepare.handler(
        {"spec": {"source": {"bucket": "store"}, "destination": {"bucket": "dst"}}, "execution_name": "x"},
        FakeLambdaContext(),
    )
    assert job["rejected"].startswith(
        "source.bucket: bucket 'store' is reached through https://minio.example.com"
    )
    assert "give a manifest" in job["rejected"]


def test_keys_from_a_secret_copy_on_a_real_server_and_never_reach_logs_or_reports(
    pipeline: Any,
    monkeypatch: pytest.MonkeyPatch,
    versitygw: S3Server,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The worker's own keys cannot sign for versitygw: only the secret's can. The secret's
    text appears nowhere in what the pipeline logs, returns or writes, even at DEBUG."""
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    for n in range(3):
        versitygw.client.put_object(Bucket=src, Key=f"in/{n}.bin", Body=bytes([n]) * 70_000)
    secrets = boto3.client("secretsmanager", region_name="us-east-1")
    arn = secrets.create_secret(
        Name="ferry/versitygw",
        SecretString=json.dumps({"access_key_id": ACCESS_KEY, "secret_access_key": SECRET_KEY}),
    )["ARN"]
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-versitygw-key")  # the worker's own identity
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWORKER")
    pipeline.s3.put_object(
        Bucket="src",
        Key="rows.csv",
        Body=b"bucket,key\n" + "".join(f"{src},in/{n}.bin\n" for n in range(3)).encode(),
    )
    with_locations(
        pipeline,
        monkeypatch,
        sources=(Location(src, endpoint_url=versitygw.url, credentials_secret="ferry/versitygw"),),
        destinations=(Location(dst, prefix="out/", endpoint_url=versitygw.url, credentials_secret=arn),),
        manifests=(Location("src"),),
    )
    caplog.set_level(logging.DEBUG)
    spec = {
        "source": {"bucket": src, "manifest": {"bucket": "src", "key": "rows.csv", "format": "csv"}},
        "destination": {"bucket": dst, "prefix": "out/"},
    }
    job = prepare.handler({"spec": spec, "execution_name": "secret-copy"}, FakeLambdaContext())
    assert "rejected" not in job, job
    items = [{"bucket": src, "key": f"in/{n}.bin"} for n in range(3)]
    result = copy_batch.handler({"job": job, "items": items, "pass": 1}, FakeLambdaContext())

    assert result["counts"]["copied"] == 3, result
    for n in range(3):
        body = versitygw.client.get_object(Bucket=dst, Key=f"out/in/{n}.bin")["Body"].read()
        assert body == bytes([n]) * 70_000
    # What was written and said: logs (every logger, DEBUG), stdout/stderr, results, reports.
    reports = [
        pipeline.s3.get_object(Bucket=PIPELINE_REPORTS, Key=o["Key"])["Body"].read().decode()
        for o in pipeline.s3.list_objects_v2(Bucket=PIPELINE_REPORTS).get("Contents", [])
    ]
    assert reports
    out = capsys.readouterr()
    said = "\n".join(
        [
            caplog.text,
            *(r.getMessage() for r in caplog.records),
            out.out,
            out.err,
            json.dumps(job),
            json.dumps(result),
            *reports,
            json.dumps(dict(os.environ)),
        ]
    )
    assert SECRET_KEY not in said


def test_the_fargate_worker_reaches_both_sides_through_their_roles(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch, signatures: list[Any]
) -> None:
    from ferry.pipeline.batches import copy_large_object

    with_locations(
        pipeline,
        monkeypatch,
        sources=(Location("src", role_arn=SOURCE_ROLE),),
        destinations=(Location("dst", role_arn=DEST_ROLE),),
    )
    pipeline.s3.put_object(Bucket="src", Key="big/one.bin", Body=b"z" * 300_000)
    job = prepare.handler(
        {"spec": {"source": {"bucket": "src"}, "destination": {"bucket": "dst"}}, "execution_name": "large"},
        FakeLambdaContext(),
    )
    signed_before = len(signatures)
    result = copy_large_object(
        "large", "batch-1", {"Key": "big/one.bin", "Size": 300_000}, pipeline.services()
    )

    assert result is not None and result.status == "copied", result
    roles = {
        bucket: {caller_arn(c) for _, b, _, c in signatures[signed_before:] if b == bucket}
        for bucket in ("src", "dst")
    }
    assert roles == {
        "src": {"arn:aws:sts::444455556666:assumed-role/ferry-source-reader/ferry"},
        "dst": {"arn:aws:sts::777788889999:assumed-role/ferry-destination-writer/ferry"},
    }
    assert job["job_id"] == "large"


def test_the_deleting_starter_assumes_the_destination_role_without_version_deletes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The writer role holds s3:DeleteObjectVersion (a worker removes an unproved copy by its
    version id), and a replication's starter deletes as that role: its session carries a
    session policy denying s3:DeleteObjectVersion, so no deletion it makes can remove a
    version (IAM: a session's permissions are the role's policies intersected with the session
    policy). The workers' own session of the same role keeps its permissions."""
    from moto import mock_aws
    from moto.sts.models import STSBackend

    from ferry.pipeline.replication.config import Replication
    from ferry.pipeline.replication.starter_deletes import delete_services

    policies: list[tuple[str, str | None]] = []
    original = STSBackend.assume_role

    def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
        policies.append((kwargs["role_arn"], kwargs.get("policy")))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(STSBackend, "assume_role", recorded)
    replication = Replication.parse(
        {
            "name": "photos",
            "source": {"bucket": "src", "prefix": "in/"},
            "destination": {"bucket": "dst", "prefix": "out/", "role_arn": DEST_ROLE, "region": "eu-west-1"},
            "deletes": True,
        },
        "replications[0]",
    )
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        delete_services(replication, dynamodb=dynamodb, table_name="ledger")
        make_client(Endpoint(role_arn=DEST_ROLE, region="eu-west-1"))  # a worker, same role
    assert [arn for arn, _ in policies] == [DEST_ROLE, DEST_ROLE]
    (starter_policy,) = [p for _, p in policies if p]
    document = json.loads(starter_policy)
    denied = [st for st in document["Statement"] if st["Effect"] == "Deny"]
    assert denied == [{"Effect": "Deny", "Action": "s3:DeleteObjectVersion", "Resource": "*"}]
    assert [p for _, p in policies if not p] == [None], "the worker's session is not narrowed"
