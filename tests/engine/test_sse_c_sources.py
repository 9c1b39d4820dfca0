"""An SSE-C source (a customer-provided key) never lands at the destination without its key.

A server-side copy made from the listing's evidence sends no encryption header, and on a
store whose answers name no encryption the encryption probe may decide that no HEAD follows
the copy (encryption_probe). That is safe for SSE-C sources whatever the probe says, because
S3 refuses to copy an SSE-C source without the customer key's headers, and Ferry has no
option to take customer keys: the object fails with a reason, the others are copied, nothing
unencrypted appears under its key and no multipart upload is left open. The test checks
that the SSE-C object reaches that CopyObject: a refusal at some earlier HEAD would prove
nothing about the copy.

MinIO enforces SSE-C and accepts it only over TLS, so it runs here over https with a
self-signed certificate. MinIO without a KMS refuses SSE-S3, so the probe says its store
holds no encrypted objects: the verdict under which no HEAD would notice a lost encryption.
moto copies SSE-C objects without the key, so it cannot show any of this.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

import ferry
from conftest import (
    S3Server,
    _wait_until_serving,
    free_port,
    minio_environment,
    self_signed_certificate,
    server_binary,
    wait_for_port,
)
from ferry import Copier, CopyPolicy, Status, Target
from ferry.engine.compare.dest_listing import MIN_WINDOW
from ferry.errors import error_code
from ferry.s3.listing import list_objects

PREFIX = "mixed/"
# Enough objects that skip-existing lists the destination instead of a HEAD per key
# (dest_listing): with fewer, each source is HEADed first, and the SSE-C object fails at that
# HEAD (MinIO answers 400 without the key) before any copy of it is tried.
PLAIN_COUNT = max(5, MIN_WINDOW - 1)
SSE_C_KEY = f"{PREFIX}customer-key.bin"
# Ferry's reason for an SSE-C source (MinIO, like S3, refuses to read one without its key):
# what the object is and what the user can do, not a permissions hint.
REFUSAL = "encrypted with a customer-provided key (SSE-C), which Ferry cannot send"
# Ferry's words for the request refused: the copy, not a read of the source before it.
COPY_RIGHTS = "(s3:GetObject on the source, s3:PutObject on the destination)"
# Where the `ferry` package under test lives, so the CLI's child process runs the same code.
FERRY_ROOT = str(Path(ferry.__file__).resolve().parents[1])


def _self_signed(certs: Path) -> Path:
    """public.crt and private.key for 127.0.0.1, as MinIO reads them from --certs-dir."""
    certs.mkdir()
    self_signed_certificate(certs / "public.crt", certs / "private.key")
    return certs / "public.crt"


@pytest.fixture(scope="module")
def tls_minio() -> Iterator[tuple[S3Server, str]]:
    """MinIO over https on 127.0.0.1 (it accepts SSE-C only over TLS): (server, cert path).
    The server's own client trusts the certificate; Ferry's clients are told by the test."""
    binary = server_binary("minio")
    root = Path(tempfile.mkdtemp(prefix="ferry-tls-minio-"))
    cert = str(_self_signed(root / "certs"))
    port = free_port()
    log = open(root / "server.log", "wb")  # noqa: SIM115 - lives as long as the server
    env = minio_environment()
    command = [binary, "server", str(root / "data"), "--address", f"127.0.0.1:{port}"]
    command += ["--console-address", f"127.0.0.1:{free_port()}", "--certs-dir", str(root / "certs")]
    command += ["--quiet"]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for_port(port)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("AWS_CA_BUNDLE", cert)  # botocore reads it when the client is made
            server = S3Server("minio-tls", f"https://127.0.0.1:{port}")
        _wait_until_serving(server)
        yield server, cert
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


class Requests:
    """Every request a client sends (the lean path's and botocore's), with its parameters."""

    def __init__(self, client: Any) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        client.meta.events.register("provide-client-params.s3.*", self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        with self._lock:
            self.sent.append((model.name, dict(params)))

    def to(self, key: str) -> list[tuple[str, dict[str, Any]]]:
        return [(operation, params) for operation, params in self.sent if params.get("Key") == key]


def _put_sources(server: S3Server, bucket: str) -> dict[str, bytes]:
    """PLAIN_COUNT plain objects, returned, and one SSE-C object under PREFIX."""
    plain = {f"{PREFIX}plain-{n}.txt": f"plain object {n}\n".encode() * (50 + n) for n in range(PLAIN_COUNT)}
    for key, body in plain.items():
        server.client.put_object(Bucket=bucket, Key=key, Body=body)
    customer_key = secrets.token_bytes(32)
    server.client.put_object(
        Bucket=bucket,
        Key=SSE_C_KEY,
        Body=b"readable only with the customer's key\n" * 40,
        SSECustomerAlgorithm="AES256",
        SSECustomerKey=customer_key,
    )
    # The store enforces SSE-C: the object reads back with its key, and not without it.
    head = server.client.head_object(
        Bucket=bucket, Key=SSE_C_KEY, SSECustomerAlgorithm="AES256", SSECustomerKey=customer_key
    )
    assert head["SSECustomerAlgorithm"] == "AES256"
    with pytest.raises(ClientError):
        server.client.head_object(Bucket=bucket, Key=SSE_C_KEY)
    return plain


def _assert_destination(server: S3Server, dst: str, plain: dict[str, bytes]) -> None:
    """The plain objects with their bytes, nothing under the SSE-C key, no upload open."""
    assert sorted(server.keys(dst)) == sorted(plain)
    for key, body in plain.items():
        assert server.client.get_object(Bucket=dst, Key=key)["Body"].read() == body, key
    with pytest.raises(ClientError) as missing:
        server.client.head_object(Bucket=dst, Key=SSE_C_KEY)
    assert error_code(missing.value) in ("404", "NoSuchKey"), missing.value
    assert server.open_uploads(dst) == []


def test_an_sse_c_source_fails_with_its_reason_and_the_others_are_copied(
    tls_minio: tuple[S3Server, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing's copy of an SSE-C source is refused by the store, not made without the
    key, even where the probe has said the store holds no encrypted objects (MinIO without a
    KMS refuses SSE-S3); the refusal reaches the user as the object's reason, through the
    engine and through `ferry copy`, whose exit code says an object failed."""
    server, cert = tls_minio
    monkeypatch.setenv("AWS_CA_BUNDLE", cert)
    src, dst = server.bucket("src"), server.bucket("dst")
    plain = _put_sources(server, src)
    listed = list(list_objects(server.client, src, PREFIX))
    assert sorted(o.key for o in listed) == sorted([*plain, SSE_C_KEY])

    with Copier(server.endpoint, server.endpoint, CopyPolicy(mode="server-side")) as copier:
        source, dest = Requests(copier.ctx.source_client), Requests(copier.ctx.dest_client)
        results = copier.copy_batch([(obj, Target(dst, obj.key)) for obj in listed])
        # The verdict under which no HEAD follows a copy answered without an encryption.
        assert copier.ctx.holds_no_encryption(dst) is True

    # The listing's CopyObject was sent for it, without the customer key, and refused (the
    # lean path sends a refused one again through botocore): no other request wrote or read it.
    to_source, to_dest = source.to(SSE_C_KEY), dest.to(SSE_C_KEY)
    print(f"requests for {SSE_C_KEY}: source {to_source}, destination {to_dest}")
    assert to_source == []
    assert to_dest and {operation for operation, _ in to_dest} == {"CopyObject"}
    assert not [name for _, params in to_dest for name in params if "SSECustomer" in name]

    by_key = {r.source_key: r for r in results}
    assert len(results) == len(by_key) == len(plain) + 1
    for key in plain:
        assert by_key[key].status is Status.COPIED, by_key[key]
    failed = by_key[SSE_C_KEY]
    print(f"reason for {SSE_C_KEY}: {failed.reason}")
    assert failed.status is Status.FAILED, failed
    assert failed.reason and f"server-side copy {COPY_RIGHTS}" in failed.reason, failed.reason
    assert f"s3://{src}/{SSE_C_KEY}" in failed.reason and REFUSAL in failed.reason, failed.reason
    statuses = [r.status for r in results]
    assert (statuses.count(Status.COPIED), statuses.count(Status.FAILED)) == (len(plain), 1)
    _assert_destination(server, dst, plain)

    cli_dst = server.bucket("dst")
    paths = [FERRY_ROOT, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    run = subprocess.run(
        [sys.executable, "-m", "ferry.cli", "copy", f"s3://{src}", f"s3://{cli_dst}"]
        + ["--endpoint-url", server.url, "--region", server.region, "--mode", "server-side"]
        + ["--json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    print(run.stderr)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode == 2, run.stdout + run.stderr  # some object failed
    summary = json.loads(run.stdout)
    assert (summary["objects"], summary["copied"], summary["failed"]) == (len(plain) + 1, len(plain), 1)
    (line,) = [line for line in run.stderr.splitlines() if line.startswith("  failed:")]
    assert f"s3://{src}/{SSE_C_KEY}" in line and REFUSAL in line and "server-side copy" in line, line
    _assert_destination(server, cli_dst, plain)
