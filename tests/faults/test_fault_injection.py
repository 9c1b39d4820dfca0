"""`ferry copy` through a proxy that injects S3's faults (tests/faults/proxy.py): nothing lost,
nothing corrupt, nothing left open, and a re-run copies exactly what is still missing.

Each server (versitygw, MinIO) gets one source bucket of 1,000 small objects (half stored with a
CRC32, half with only their MD5 ETag), a few of 1-3 MiB, and 16 multipart ones (a 5 MiB part and
a small one). Each mode (streamed, server-side) copies it through the proxy into a fresh bucket,
faults on, then once more with the faults off. The test reads the results back from the server
directly, never through the proxy.

The proxy's SlowDowns are drawn at random, not from the request rate, so the client's adaptive
rate limiter (botocore's, which Ferry's clients use) would keep cutting the rate without ever
making them stop: left alone, it spent three quarters of this test's time waiting for tokens.
The limiter stays on and is consulted before every request, but its floor is raised to a rate
the proxy can serve (`rate_floor`); the faults met, the retries and what is proved are the same.

Slow (marked): 5-10 s per server and mode on a quiet 2-core machine, most of it the Python
proxy and the servers sharing those cores; `-m "not slow"` leaves it out.
tests/faults/test_lost_replies.py and test_flipped_reads.py check single faults in seconds.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import S3Server
from faults.proxy import FaultPlan, FaultProxy, fault_proxy
from ferry.cli.main import main

MiB = 1024 * 1024
SMALL, MEDIUM, MULTIPART = 1000, 6, 16
SEED = 13

# Rates per request. Each request kind meets each fault that applies to it many times per run;
# the kinds of a multipart copy are rare (a few parts per object), so their rates are raised.
RATES = {"slowdown": 0.01, "internal": 0.03, "reset": 0.03, "truncate": 0.03, "delay": 0.02, "flip": 0.03}
BOOST = {
    "head": 3.0,
    "upload-part": 4.0,
    "upload-part-copy": 4.0,
    "create-multipart": 5.0,
    "complete-multipart": 6.0,
    "get-range": 2.0,
    "abort-multipart": 4.0,
}
STRONG_PROOFS = {"md5", "etag", "crc32 (full object)", "crc32 (composite)", "crc64nvme (full object)"}


@dataclass
class Source:
    bucket: str
    sha256: dict[str, str]  # key -> sha256 of its bytes
    multipart: set[str]


def _make_source(server: S3Server) -> Source:
    """The objects, made once per server (deterministic bytes, so a failure can be replayed)."""
    rng = random.Random(SEED)
    bucket = server.bucket("faults-src")
    objects: list[tuple[str, bytes, str | None]] = []
    for n in range(SMALL):
        size = 0 if n % 250 == 0 else rng.randrange(1, 48 * 1024)
        objects.append((f"small/{n:04d}", rng.randbytes(size), "CRC32" if n % 2 else None))
    for n in range(MEDIUM):
        objects.append(
            (f"medium/{n}", rng.randbytes(rng.randrange(1 * MiB, 3 * MiB)), "CRC32" if n % 2 else None)
        )
    multipart = []
    for n in range(MULTIPART):
        parts = [rng.randbytes(5 * MiB), rng.randbytes(rng.randrange(1, MiB))]
        multipart.append((f"multipart/{n}", parts, "CRC32" if n % 2 else None))

    def put(item: tuple[str, bytes, str | None]) -> None:
        key, data, algorithm = item
        extra = {"ChecksumAlgorithm": algorithm} if algorithm else {}
        server.client.put_object(Bucket=bucket, Key=key, Body=data, **extra)

    def upload(item: tuple[str, list[bytes], str | None]) -> None:
        key, parts, algorithm = item
        extra = {"ChecksumAlgorithm": algorithm} if algorithm else {}
        upload_id = server.client.create_multipart_upload(Bucket=bucket, Key=key, **extra)["UploadId"]
        done = []
        for number, data in enumerate(parts, 1):
            response = server.client.upload_part(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=data, **extra
            )
            entry = {"PartNumber": number, "ETag": response["ETag"]}
            if algorithm:
                entry[f"Checksum{algorithm}"] = response[f"Checksum{algorithm}"]
            done.append(entry)
        server.client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": done}
        )

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, objects))
        list(pool.map(upload, multipart))
    sha = {key: hashlib.sha256(data).hexdigest() for key, data, _ in objects}
    sha.update({key: hashlib.sha256(b"".join(parts)).hexdigest() for key, parts, _ in multipart})
    return Source(bucket, sha, {key for key, _, _ in multipart})


_SOURCES: dict[str, Source] = {}
RATE_FLOOR = 2000.0  # requests per second the adaptive limiter may not go below, here


@pytest.fixture(autouse=True)
def rate_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's TokenBucket never fills slower than its `min_rate` (0.5 per second by default)."""
    from botocore.retries import bucket

    assert bucket.TokenBucket.__init__.__defaults__ == (bucket.TokenBucket._MIN_RATE,)
    monkeypatch.setattr(bucket.TokenBucket.__init__, "__defaults__", (RATE_FLOOR,))


@pytest.fixture(params=["versitygw", "minio"])
def server(request: pytest.FixtureRequest) -> S3Server:
    return request.getfixturevalue(request.param)


@pytest.fixture
def source(server: S3Server) -> Source:
    if server.name not in _SOURCES:
        started = time.monotonic()
        _SOURCES[server.name] = _make_source(server)
        print(f"source made in {time.monotonic() - started:.1f} s")
    return _SOURCES[server.name]


@dataclass
class Run:
    code: int
    summary: dict[str, Any]
    results: dict[str, dict[str, Any]]  # key -> the report's line
    stderr: str


def _copy(proxy: FaultProxy, src: str, dst: str, mode: str, report: Path) -> Run:
    """`ferry copy` in-process, as a user runs it, with Ferry's endpoint the proxy."""
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = ["copy", f"s3://{src}/", f"s3://{dst}/", "--endpoint-url", proxy.url, "--region", "us-east-1"]
    argv += ["--mode", mode, "--multipart-threshold", "5MiB", "--concurrency", "32", "--quiet"]
    argv += ["--report", str(report), "--json"]
    started = time.monotonic()
    code = main(argv, stdout, stderr)
    print(f"ferry copy {mode}: {time.monotonic() - started:.1f} s")
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    results = {line["key"]: line for line in lines if "key" in line}
    summary = next(line["summary"] for line in lines if "summary" in line)
    assert len(results) == sum(1 for line in lines if "key" in line), "an object reported twice"
    return Run(code, summary, results, stderr.getvalue())


def _dest_sha256(server: S3Server, bucket: str) -> dict[str, str]:
    """Every destination object's bytes, read from the server itself (not through the proxy)."""

    def read(key: str) -> tuple[str, str]:
        body = server.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        return key, hashlib.sha256(body).hexdigest()

    with ThreadPoolExecutor(16) as pool:
        return dict(pool.map(read, server.keys(bucket)))


def _problems(server: S3Server, dst: str, run: Run, source: Source) -> list[str]:
    """What is wrong after a run: corrupt or unreported destination objects, open uploads,
    counts that do not add up, copies without a proof, failures without a reason."""
    problems = []
    written = _dest_sha256(server, dst)
    corrupt = sorted(k for k, sha in written.items() if source.sha256.get(k) != sha)
    if corrupt:
        problems.append(f"corrupt destination objects: {corrupt[:10]}")
    uploads = server.open_uploads(dst)
    if uploads:
        problems.append(f"{len(uploads)} multipart uploads left open: {sorted(u['Key'] for u in uploads)}")
    copied = {k for k, r in run.results.items() if r["status"] in ("copied", "skipped")}
    if copied - set(written):
        problems.append(f"reported copied, not in the destination: {sorted(copied - set(written))[:5]}")
    failed_there = {k for k, r in run.results.items() if r["status"] == "failed"} & set(written)
    if failed_there:
        problems.append(f"reported failed, but in the destination: {sorted(failed_there)[:5]}")
    try:
        _assert_consistent(run, source)
    except AssertionError as error:
        problems.append(f"report inconsistent: {error}")
    if run.code != (2 if run.summary["failed"] else 0):
        problems.append(f"exit code {run.code}: {run.stderr}")
    return problems


def _assert_consistent(run: Run, source: Source) -> None:
    """Counts add up; each object once, copied with a real proof or failed with a reason."""
    s = run.summary
    assert set(run.results) == set(source.sha256), "objects missing from (or extra in) the report"
    assert s["objects"] == len(source.sha256)
    assert s["copied"] + s["skipped"] + s["failed"] + s["pending"] == s["objects"]
    statuses = Counter(r["status"] for r in run.results.values())
    assert statuses == Counter({k: s[k] for k in ("copied", "skipped", "failed", "pending") if s[k]})
    assert s["pending"] == 0
    for key, result in run.results.items():
        if result["status"] == "copied":
            assert result.get("verified_by") in STRONG_PROOFS, (key, result)
        elif result["status"] == "failed":
            assert result.get("reason"), (key, result)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["stream", "server-side"])
def test_copy_through_faults(server: S3Server, source: Source, mode: str, tmp_path: Path) -> None:
    dst = server.bucket(f"faults-{mode}")
    plan = FaultPlan(rates=dict(RATES), seed=SEED, boost=BOOST, delay_seconds=0.2)
    with fault_proxy(server.url, plan) as proxy:
        first = _copy(proxy, source.bucket, dst, mode, tmp_path / "first.jsonl")
        faults, kinds, requests = proxy.faults(), proxy.faulted_kinds(), Counter(proxy.requests)
        injected = Counter(proxy.injected)

        # Nothing corrupt: every object in the destination is byte for byte its source. Nothing
        # left open. Every problem found is listed before the test fails, not only the first.
        problems = _problems(server, dst, first, source)
        failed = {k for k, r in first.results.items() if r["status"] == "failed"}
        # Every fault that applies to this mode fired many times, and every kind met faults.
        print(f"\n{server.name} {mode}: {first.summary['copied']} copied, {len(failed)} failed")
        print(f"  faults {dict(faults)}\n  faulted kinds {dict(kinds)}\n  requests {dict(requests)}")
        print(f"  failure reasons {Counter(r['reason'] for r in first.results.values() if r.get('reason'))}")
        applicable = ["slowdown", "internal", "reset", "reset-after", "delay"]
        if mode == "stream":
            applicable += ["truncate", "flip"]
        problems += [f"fault {f} fired {faults[f]} times, not 10" for f in applicable if faults[f] < 10]
        sent = {
            k for k, n in requests.items() if n and k not in ("other", "list", "delete", "abort-multipart")
        }
        expected = {
            "stream": {"get", "get-range", "put", "upload-part", "create-multipart", "complete-multipart"},
            "server-side": {"copy-object", "upload-part-copy", "create-multipart", "complete-multipart"},
        }
        if not expected[mode] <= sent:
            problems.append(f"ferry sent no {sorted(expected[mode] - sent)}")
        # A server-side run's only PUTs are its 16 multipart uploads' marks: too few to meet
        # three faults at these rates; the kinds that copy are held to it.
        held = sent - {"put"} if mode == "server-side" else sent
        problems += [f"{k} requests met {kinds[k]} faults, not 3: {injected}" for k in held if kinds[k] < 3]

        # The re-run, faults off: copies exactly what is still missing, skips the rest.
        proxy.set_plan(FaultPlan(rates={}, seed=SEED))
        second = _copy(proxy, source.bucket, dst, mode, tmp_path / "second.jsonl")
    problems += _problems(server, dst, second, source)
    recopied = {k for k, r in second.results.items() if r["status"] == "copied"}
    if recopied != failed:
        problems.append(
            f"the re-run copied {len(recopied)} objects, the first run failed {len(failed)}: "
            f"copied but not failed before {sorted(recopied - failed)[:5]}, "
            f"failed before but not copied {sorted(failed - recopied)[:5]}"
        )
    if second.summary["skipped"] != len(source.sha256) - len(failed):
        problems.append(
            f"the re-run skipped {second.summary['skipped']}, not the {len(source.sha256) - len(failed)} copied before"
        )
    if second.summary["failed"] or second.code != 0:
        problems.append(f"the re-run without faults failed: {second.stderr}")
    missing = set(source.sha256) - set(_dest_sha256(server, dst))
    if missing:
        problems.append(f"missing after the re-run: {sorted(missing)[:5]}")
    assert not problems, "\n".join(problems)
