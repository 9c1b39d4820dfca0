"""`ferry copy --no-lean-requests`: every request goes through botocore alone; without it,
the hot small-object requests take the lean path (ferry.s3.lean_s3). A QuirkProxy in front of
versitygw sees who sent each request (the lean path marks its User-Agent)."""

from __future__ import annotations

import io

import pytest

from ferry.cli.main import main
from ferry.s3.lean_s3 import LEAN_USER_AGENT_MARK


@pytest.mark.parametrize("flag", [[], ["--no-lean-requests"]], ids=["default", "no-lean-requests"])
def test_no_lean_requests_sends_everything_through_botocore(versitygw, quirks, flag):
    proxy = quirks(versitygw)
    src, dst = versitygw.bucket("src"), versitygw.bucket("dst")
    for n in range(3):
        versitygw.client.put_object(Bucket=src, Key=f"k{n}", Body=b"z" * 100)
    out, err = io.StringIO(), io.StringIO()
    args = ["copy", f"s3://{src}/", f"s3://{dst}/", "--endpoint-url", proxy.url, "--region", "us-east-1"]
    assert main([*args, "--mode", "server-side", *flag], stdout=out, stderr=err) == 0, err.getvalue()
    assert sorted(versitygw.keys(dst)) == ["k0", "k1", "k2"]
    copies = proxy.requests(method="PUT")
    assert len(copies) == 3
    lean = [LEAN_USER_AGENT_MARK in s.headers.get("user-agent", "") for s in copies]
    assert lean == ([False] * 3 if flag else [True] * 3)
