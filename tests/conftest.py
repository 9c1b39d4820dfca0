"""Shared fixtures: real S3 servers on 127.0.0.1, clients for them, and fresh buckets.

`versitygw` is the faithful server (it rejects wrong checksums, honours PartNumber); moto's
server stands in where versitygw lacks a feature (archive classes and RestoreObject, objects
without any stored checksum); `minio` is there for the ways MinIO differs from S3 that users
meet (it refuses UploadPartCopy into an upload created with a checksum algorithm); `garage`
is a third S3-compatible server, with its own region and without some of S3's features.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from ferry import Endpoint

ACCESS_KEY = "ferrytest"
SECRET_KEY = "ferrytestsecretkey"  # Garage imports secret keys of 16 characters or more
REPO = Path(__file__).resolve().parents[1]

os.environ.update(
    AWS_ACCESS_KEY_ID=ACCESS_KEY,
    AWS_SECRET_ACCESS_KEY=SECRET_KEY,
    AWS_DEFAULT_REGION="us-east-1",
    AWS_EC2_METADATA_DISABLED="true",
    # The machine's own AWS configuration (a profile's endpoint or addressing style) stays out.
    AWS_CONFIG_FILE=os.devnull,
    AWS_SHARED_CREDENTIALS_FILE=os.devnull,
)
for _var in (
    "AWS_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_DATA_PATH",
    "AWS_CA_BUNDLE",
):
    os.environ.pop(_var, None)
# Every `ferry` a test starts in a process of its own runs this checkout's code: the
# environment's `ferry` executable may import another installed copy of the package.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(REPO / "functions"), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
)


def create_ledger_table(client: Any, name: str) -> None:
    """The ledger's DynamoDB table as the stack makes it: `pk` and `sk`, paid per request."""
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start within {timeout}s")


def server_binary(name: str) -> str:
    path = os.environ.get(f"FERRY_{name.upper()}") or shutil.which(name)
    if not path or not Path(path).exists():
        pytest.fail(f"{name} is not installed: run the tests with `make test`, which builds it into .cache/")
    return path


class S3Server:
    """A running S3 endpoint plus a plain boto3 client for arranging and inspecting tests."""

    def __init__(self, name: str, url: str, region: str = "us-east-1") -> None:
        self.name = name
        self.url = url
        self.region = region  # the region the server signs in (Garage's is its own `s3_region`)
        self.endpoint = Endpoint(endpoint_url=url, region=region)
        self.client: Any = boto3.client(
            "s3",
            endpoint_url=url,
            region_name=region,
            config=Config(
                s3={"addressing_style": "path"},
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
                retries={"mode": "standard", "max_attempts": 3},
            ),
        )

    def bucket(self, prefix: str = "b") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=name)
        return name

    def open_uploads(self, bucket: str) -> list[dict[str, Any]]:
        return self.client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])

    def keys(self, bucket: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]


@pytest.fixture(scope="session")
def versitygw() -> Iterator[S3Server]:
    binary = server_binary("versitygw")
    root = tempfile.mkdtemp(prefix="ferry-vgw-")
    data, versions = os.path.join(root, "data"), os.path.join(root, "versions")
    os.makedirs(data)
    os.makedirs(versions)
    port = free_port()
    log = open(os.path.join(root, "server.log"), "wb")  # noqa: SIM115 - lives as long as the server
    env = dict(os.environ, ROOT_ACCESS_KEY_ID=ACCESS_KEY, ROOT_SECRET_ACCESS_KEY=SECRET_KEY)
    process = subprocess.Popen(
        [binary, "--port", f"127.0.0.1:{port}", "posix", "--versioning-dir", versions, data],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        wait_for_port(port)
        yield S3Server("versitygw", f"http://127.0.0.1:{port}")
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def minio() -> Iterator[S3Server]:
    binary = server_binary("minio")
    root = tempfile.mkdtemp(prefix="ferry-minio-")
    port = free_port()
    log = open(os.path.join(root, "server.log"), "wb")  # noqa: SIM115 - lives as long as the server
    env = minio_environment()
    command = [binary, "server", os.path.join(root, "data"), "--address", f"127.0.0.1:{port}"]
    command += ["--console-address", f"127.0.0.1:{free_port()}", "--quiet"]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for_port(port)
        server = S3Server("minio", f"http://127.0.0.1:{port}")
        _wait_until_serving(server)
        yield server
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def minio_environment() -> dict[str, str]:
    """What every MinIO the tests start runs with: the test credentials, nothing else on."""
    return dict(
        os.environ,
        MINIO_ROOT_USER=ACCESS_KEY,
        MINIO_ROOT_PASSWORD=SECRET_KEY,
        MINIO_BROWSER="off",
        MINIO_UPDATE="off",
        MINIO_CI_CD="1",  # a data dir on the root disk is fine for tests
    )


def self_signed_certificate(cert_path: Path, key_path: Path) -> None:
    """A certificate for 127.0.0.1 that is its own CA (ECDSA P-256, a day long), for servers
    the tests run over https: naming it in AWS_CA_BUNDLE makes clients trust the server."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


def _wait_until_serving(server: S3Server, timeout: float = 30.0) -> None:
    """MinIO opens its port before it is ready to answer S3 requests."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            server.client.list_buckets()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


GARAGE_REGION = "garage"  # Garage's documented `s3_region`; it refuses requests signed for another


@pytest.fixture(scope="session")
def garage() -> Iterator[S3Server]:
    """A single-node Garage with its sqlite metadata store, configured as its quick start says:
    one node given a role in zone dc1 (the layout), the suite's key imported and allowed to
    create buckets."""
    binary = server_binary("garage")
    root = Path(tempfile.mkdtemp(prefix="ferry-garage-"))
    s3_port, rpc_port, admin_port = free_port(), free_port(), free_port()
    config = root / "garage.toml"
    config.write_text(
        f"""metadata_dir = "{root / "meta"}"
data_dir = "{root / "data"}"
db_engine = "sqlite"
metadata_fsync = false
data_fsync = false
replication_factor = 1
rpc_bind_addr = "127.0.0.1:{rpc_port}"
rpc_public_addr = "127.0.0.1:{rpc_port}"
rpc_secret = "{uuid.uuid4().hex}{uuid.uuid4().hex}"

[s3_api]
s3_region = "{GARAGE_REGION}"
api_bind_addr = "127.0.0.1:{s3_port}"

[admin]
api_bind_addr = "127.0.0.1:{admin_port}"
admin_token = "{uuid.uuid4().hex}"
"""
    )
    log = open(root / "server.log", "wb")  # noqa: SIM115 - lives as long as the server
    env = dict(os.environ, RUST_LOG="garage=warn")
    process = subprocess.Popen(
        [binary, "-c", str(config), "server"], stdout=log, stderr=subprocess.STDOUT, env=env
    )

    def admin(*args: str) -> str:
        run = subprocess.run(
            [binary, "-c", str(config), *args], capture_output=True, text=True, env=env, timeout=60
        )
        if run.returncode != 0:
            raise RuntimeError(f"garage {' '.join(args)} failed: {run.stderr.strip()}")
        return run.stdout

    try:
        wait_for_port(s3_port)
        node = _retry(lambda: admin("node", "id", "-q")).strip().split("@")[0]
        admin("layout", "assign", "-z", "dc1", "-c", "1G", node)
        admin("layout", "apply", "--version", "1")
        admin("key", "import", "--yes", "-n", "ferry", ACCESS_KEY, SECRET_KEY)
        admin("key", "allow", "--create-bucket", ACCESS_KEY)
        server = S3Server("garage", f"http://127.0.0.1:{s3_port}", region=GARAGE_REGION)
        _wait_until_serving(server)
        yield server
    finally:
        process.kill()  # SIGTERM starts a graceful shutdown that outlasts 10 s; the data is thrown away
        process.wait(timeout=10)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def _retry(call: Any, timeout: float = 30.0) -> Any:
    """Garage's CLI reaches the daemon over RPC, which opens a moment after the S3 port."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The CDK tests' one `npx cdk synth` (tests/cdk/cdk_support.synthesized). It lives here, not
    in a tests/cdk/conftest.py: that module would take the name `conftest` from this one, which
    the tests import their helpers from."""
    from cdk_support import synthesized  # tests/cdk: on the path once a CDK test module is imported

    return synthesized(tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def motoserver() -> Iterator[S3Server]:
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        wait_for_port(port)
        yield S3Server("moto", f"http://127.0.0.1:{port}")
    finally:
        server.stop()


class VirtualS3(S3Server):
    """tests/virtual_s3.py as a process: objects up to 5 TiB whose bytes are never stored."""

    def make(self, bucket: str, key: str, seed: str, part_sizes: list[int]) -> dict[str, Any]:
        """A virtual multipart source object with these part sizes; returns its ETag and Size."""
        body = json.dumps({"bucket": bucket, "key": key, "seed": seed, "part_sizes": part_sizes})
        with urllib.request.urlopen(f"{self.url}/_virtual/object", data=body.encode()) as answer:
            return json.loads(answer.read())

    def part_requests(self) -> list[dict[str, Any]]:
        """Every UploadPart and UploadPartCopy the server received, in order."""
        with urllib.request.urlopen(f"{self.url}/_virtual/log") as answer:
            return json.loads(answer.read())


@pytest.fixture
def virtual_s3(request: pytest.FixtureRequest) -> Iterator[VirtualS3]:
    """A fresh virtual S3 server; `@pytest.mark.parametrize("virtual_s3", [N], indirect=True)`
    lowers its smallest part to N bytes for tests whose bytes are simulated (default S3's 5 MiB)."""
    min_part = getattr(request, "param", 5 * 1024 * 1024)
    port = free_port()
    server = Path(__file__).with_name("virtual_s3.py")
    process = subprocess.Popen(
        [sys.executable, str(server), "--port", str(port), "--min-part-size", str(min_part)],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield VirtualS3("virtual", f"http://127.0.0.1:{port}")
    finally:
        process.kill()
        process.wait()


@pytest.fixture
def vgw_buckets(versitygw: S3Server) -> tuple[str, str]:
    """A fresh (source, destination) bucket pair on versitygw."""
    return versitygw.bucket("src"), versitygw.bucket("dst")


@pytest.fixture
def moto_buckets(motoserver: S3Server) -> tuple[str, str]:
    return motoserver.bucket("src"), motoserver.bucket("dst")


# -- the pipeline on moto (in-process): S3, DynamoDB and, for the child workflow, Step Functions --

PIPELINE_TABLE = "ferry-ledger"
PIPELINE_REPORTS = "ferry-reports"


class FakeLambdaContext:
    """What Powertools and the handlers read from a Lambda context."""

    function_name = "ferry-test"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:ferry-test"
    memory_limit_in_mb = 2048
    aws_request_id = "test-request"
    log_group_name = "/aws/lambda/ferry-test"
    log_stream_name = "test"

    def __init__(self, remaining_ms: int = 900_000) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def copy_batch_pass(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """One CopyBatch pass as the child workflow runs it: the handler; when it raises
    FerryHandOver, the Catch's ResumeHandOver (the same function, the pass's input with the
    error in `handed_over`). Either way the caller gets the pass's result, as the next state
    does. The event is copied through JSON, as Step Functions hands it over."""
    from ferry.pipeline.batches import HAND_OVER_FIELD, FerryHandOver, hands_work_over
    from handlers import copy_batch

    try:
        result = copy_batch.handler(json.loads(json.dumps(event)), context)
        assert not hands_work_over(result), "a pass that leaves work must raise FerryHandOver"
        return result
    except FerryHandOver as handed_over:
        error = {"Error": type(handed_over).__name__, "Cause": str(handed_over)}
        return copy_batch.handler(
            json.loads(json.dumps({**event, HAND_OVER_FIELD: error})), FakeLambdaContext()
        )


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """moto's S3 and DynamoDB in-process, the ledger table and report bucket created, and the
    workers' environment set exactly as the CDK app sets it (from PipelineSettings)."""
    from types import SimpleNamespace

    from moto import mock_aws

    from ferry.pipeline.locations import Location
    from ferry.pipeline.settings import PipelineSettings

    settings = PipelineSettings(
        sources=(Location("src"),), destinations=(Location("dst"),), large_object_threshold=64 * 1024 * 1024
    )
    env = {
        **settings.worker_environment(),
        "FERRY_TABLE": PIPELINE_TABLE,
        "FERRY_REPORT_BUCKET": PIPELINE_REPORTS,
        "POWERTOOLS_SERVICE_NAME": "ferry",
        "POWERTOOLS_METRICS_NAMESPACE": "Ferry",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "AWS_XRAY_SDK_ENABLED": "false",
    }
    # moto swaps in its own keys and, when it stops, puts back the whole environment it found:
    # a test's own monkeypatch.setenv of a key would then be undone to moto's key, not ours.
    # Holding moto's keys through monkeypatch first makes every undo land where it began.
    env.update(AWS_ACCESS_KEY_ID="FOOBARKEY", AWS_SECRET_ACCESS_KEY="FOOBARSECRET")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _atomic_moto_dynamodb(monkeypatch)
    _atomic_moto_s3(monkeypatch)
    _whole_metric_flushes(monkeypatch)
    serve_lambda_account_settings(monkeypatch, DEFAULT_LAMBDA_QUOTA)  # Prepare reads it
    config = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
    with mock_aws(config=config):
        s3 = boto3.client("s3", region_name="us-east-1")
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        for bucket in ("src", "dst", PIPELINE_REPORTS):
            s3.create_bucket(Bucket=bucket)
        create_ledger_table(dynamodb, PIPELINE_TABLE)
        from handlers import runtime

        runtime.services.cache_clear()
        yield SimpleNamespace(
            s3=s3,
            dynamodb=dynamodb,
            settings=settings,
            env=env,
            services=runtime.services,
            lambda_quota=lambda quota: monkeypatch.setenv(LAMBDA_QUOTA_ENV, str(quota)),
        )
        runtime.services.cache_clear()


# moto 5.2.5 enforces AWS's rule that reservations leave 100 unreserved against this quota
# (PutFunctionConcurrency), but has no GetAccountSettings: `serve_lambda_account_settings`
# answers it from the same quota and the reservations moto holds.
LAMBDA_QUOTA_ENV = "MOTO_LAMBDA_CONCURRENCY_QUOTA"
DEFAULT_LAMBDA_QUOTA = 1_000  # most accounts'; new ones get less (the Lambda quotas page)
ACCOUNT_SETTINGS_PATH = r"{0}/(?P<api_version>[^/]+)/account-settings/?$"


def serve_lambda_account_settings(monkeypatch: pytest.MonkeyPatch, quota: int) -> None:
    """Lambda GetAccountSettings in moto: AccountLimit.ConcurrentExecutions is the quota
    (MOTO_LAMBDA_CONCURRENCY_QUOTA, which a test may change), UnreservedConcurrentExecutions
    the quota less every function's reserved concurrency, as Lambda counts them."""
    import re

    from moto.awslambda import urls
    from moto.awslambda.utils import get_backend
    from moto.core import DEFAULT_ACCOUNT_ID

    monkeypatch.setenv(LAMBDA_QUOTA_ENV, str(quota))

    def account_settings(request: Any, full_url: str, headers: Any) -> tuple[int, dict[str, str], str]:
        region = re.search(r"lambda\.([a-z0-9-]+)\.amazonaws", full_url)
        backend = get_backend(DEFAULT_ACCOUNT_ID, region.group(1) if region else "us-east-1")
        limit = int(os.environ[LAMBDA_QUOTA_ENV])
        reserved = sum(int(f.reserved_concurrency or 0) for f in backend.list_functions())
        body = {
            "AccountLimit": {
                "TotalCodeSize": 80_530_636_800,
                "CodeSizeUnzipped": 262_144_000,
                "CodeSizeZipped": 52_428_800,
                "ConcurrentExecutions": limit,
                "UnreservedConcurrentExecutions": limit - reserved,
            },
            "AccountUsage": {"TotalCodeSize": 0, "FunctionCount": len(list(backend.list_functions()))},
        }
        return 200, {"Content-Type": "application/json"}, json.dumps(body)

    monkeypatch.setitem(urls.url_paths, ACCOUNT_SETTINGS_PATH, account_settings)


def _atomic_moto_dynamodb(monkeypatch: pytest.MonkeyPatch) -> None:
    """DynamoDB applies each write (an ADD, a transaction) atomically; moto's in-process
    backend reads and writes items without a lock, so concurrent ADDs from threads can be
    lost there. One lock around its writes restores the service's guarantee, and leaves the
    copies themselves running concurrently."""
    from moto.dynamodb.models import DynamoDBBackend

    names = ("put_item", "update_item", "delete_item", "transact_write_items", "get_item")
    _one_at_a_time(monkeypatch, DynamoDBBackend, names)


def _one_at_a_time(monkeypatch: pytest.MonkeyPatch, backend: type, names: Sequence[str]) -> None:
    """The backend's calls `names` under one lock: each runs whole, as the service's requests do."""
    lock = threading.RLock()
    for name in names:
        original = getattr(backend, name)

        def locked(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            with lock:
                return _original(self, *args, **kwargs)

        monkeypatch.setattr(backend, name, locked)


# The S3 backend's calls that read or change a bucket's keys: each is one request, which S3
# answers from one state of the bucket.
_MOTO_S3_WHOLE_CALLS = (
    "list_object_versions",
    "list_objects",
    "list_objects_v2",
    "put_object",
    "copy_object",
    "complete_multipart_upload",
    "delete_object",
    "delete_objects",
)


def _atomic_moto_s3(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's in-process S3 lists a bucket from a snapshot of its key names, then reads each
    key's versions: a key whose last version another thread deletes in between (a mark deleted
    by version id) fails the listing with a TypeError S3 would never give. One lock around the
    calls that list or change keys makes each whole, as S3's own requests are."""
    from moto.s3.models import S3Backend

    _one_at_a_time(monkeypatch, S3Backend, _MOTO_S3_WHOLE_CALLS)


def _whole_metric_flushes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Powertools keeps one metric set per process, and a flush walks it, then clears it. In
    Lambda one invocation runs in a process at a time; the harness runs several as threads,
    where one's flush could walk the set while another adds to it ("dictionary changed size
    during iteration"). One lock around adding and flushing keeps each whole."""
    from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
        AmazonCloudWatchEMFProvider,
    )

    _one_at_a_time(monkeypatch, AmazonCloudWatchEMFProvider, ("add_metric", "flush_metrics"))


@pytest.fixture
def dynamodb_transaction_conflicts(pipeline: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """DynamoDB cancels a transaction with TransactionConflict when another transaction is in
    flight on one of its items (botocore does not retry it). moto applies transactions one at
    a time and never conflicts; this gives it DynamoDB's rule: a transaction that reaches an
    item another transaction is still writing is cancelled. Returns the conflicts raised."""
    from moto.dynamodb.exceptions import TransactionCanceledException
    from moto.dynamodb.models import DynamoDBBackend

    original = DynamoDBBackend.transact_write_items
    in_flight: set[str] = set()
    guard = threading.Lock()
    conflicts: list[str] = []

    def item_keys(items: list[dict[str, Any]]) -> set[str]:
        keys = set()
        for entry in items:
            (action,) = entry.values()
            keys.add(
                json.dumps([action.get("TableName"), action.get("Key") or action.get("Item")], sort_keys=True)
            )
        return keys

    def conflicting(self: Any, transact_items: list[dict[str, Any]]) -> Any:
        keys = item_keys(transact_items)
        with guard:
            if keys & in_flight:
                conflicts.append(sorted(keys & in_flight)[0])
                raise TransactionCanceledException(
                    [("TransactionConflict", "Transaction is ongoing for the item", None)]
                    * len(transact_items)
                )
            in_flight.update(keys)
        try:
            time.sleep(0.02)  # a transaction takes time on DynamoDB too: others can arrive meanwhile
            return original(self, transact_items)
        finally:
            with guard:
                in_flight.difference_update(keys)

    monkeypatch.setattr(DynamoDBBackend, "transact_write_items", conflicting)
    return conflicts


@pytest.fixture
def quirks() -> Iterator[Any]:
    """Starts a QuirkProxy (tests/engine/server_quirks.py) in front of a real server:
    `proxy = quirks(versitygw, "no-tagging")`; ferry talks to `proxy.url`, the test arranges
    and inspects through `versitygw.client`. Every proxy stops when the test ends."""
    from contextlib import ExitStack

    from engine.server_quirks import quirk_proxy

    with ExitStack() as stack:

        def start(server: S3Server, *names: str) -> Any:
            return stack.enter_context(quirk_proxy(server.url, *names, untag_client=server.client))

        yield start


# The real S3-compatible servers in the suite: a test taking `s3_compatible` runs on each.
S3_COMPATIBLE = ("versitygw", "minio", "garage")


@pytest.fixture(params=S3_COMPATIBLE)
def s3_compatible(request: pytest.FixtureRequest) -> S3Server:
    """Each real S3-compatible server in turn (session servers: started once, shared)."""
    return request.getfixturevalue(request.param)


# -- the two request paths: the lean one (ferry.s3.lean_s3, the default) and botocore alone --

# Every test runs on the lean request path, as Ferry runs by default. The tests in these
# modules run a second time with it off (FERRY_LEAN_REQUESTS=0, every request botocore's):
# the S3 behaviours that reach the hot requests (awkward keys, encryption headers, versions
# and requester pays, provisional evidence and its hooks, other stores' quirks, integrity).
# Running every module twice would add about as much again to `make test`.
BOTH_REQUEST_PATHS = frozenset(
    {
        "test_keys",
        "test_encryption",
        "test_versions_and_payer",
        "test_source_evidence",
        "test_server_quirks",
        "test_integrity",
    }
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    module = metafunc.module.__name__.rpartition(".")[2]
    if "request_path" in metafunc.fixturenames and module in BOTH_REQUEST_PATHS:
        metafunc.parametrize("request_path", ["lean", "botocore"], indirect=True)


@pytest.fixture(autouse=True)
def request_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which request path the clients Ferry makes in this test use ("lean" unless the module
    runs on both: see BOTH_REQUEST_PATHS)."""
    path = getattr(request, "param", "lean")
    monkeypatch.setenv("FERRY_LEAN_REQUESTS", "1" if path == "lean" else "0")
    return str(path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first (a minute or so each; the order is otherwise kept): run by several
    workers (`make test`: -n auto), they start while the short ones fill the other workers,
    instead of one of them running on alone after the rest have finished."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def handlers_session_per_test() -> None:
    """The Lambda handlers make their clients from one botocore session a process (as a Lambda
    sandbox does), which keeps the credentials it resolved first. Tests change credentials from
    one to the next (moto's keys, the servers'), so each starts with a session of its own."""
    runtime = sys.modules.get("handlers.runtime")
    if runtime is not None:
        runtime._session.cache_clear()


@pytest.fixture(autouse=True)
def aws_environment_left_as_found() -> Iterator[None]:
    """A test that leaves other credentials in AWS_* variables makes every later test in the
    session sign as someone else, and fail far from the cause: fail the test that leaked."""
    before = {name: value for name, value in os.environ.items() if name.startswith("AWS_")}
    yield
    after = {name: value for name, value in os.environ.items() if name.startswith("AWS_")}
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    for name in changed:  # put back, so that one leak fails once, not every test after it
        if name in before:
            os.environ[name] = before[name]
        else:
            del os.environ[name]
    assert not changed, f"this test left {', '.join(changed)} changed in the environment"
