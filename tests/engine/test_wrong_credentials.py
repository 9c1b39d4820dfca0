"""The engine's own HEADs name wrong credentials, not a missing permission.

A HeadObject's 403 has no body: botocore can only say `403`. On real servers (which check
signatures, unlike moto) a copy whose source identity signs with a wrong secret key must say
so in its recorded reason, as the CLI's bucket check does.
"""

from __future__ import annotations

import pytest

from conftest import S3Server
from ferry import Copier, CopyPolicy, SourceObject, Status, Target


@pytest.mark.parametrize("mode", ["auto", "stream"])
def test_a_source_head_refused_for_a_wrong_secret_key_names_the_credentials(
    s3_compatible: S3Server, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = s3_compatible
    src, dst = server.bucket("src"), server.bucket("dst")
    server.client.put_object(Bucket=src, Key="a.txt", Body=b"a")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-key")

    with Copier(server.endpoint, server.endpoint, CopyPolicy(mode=mode)) as copier:
        result = copier.copy(SourceObject(src, "a.txt"), Target(dst, "a.txt"))

    assert result.status == Status.FAILED
    assert "source credentials" in (result.reason or "") and "secret key" in (result.reason or ""), (
        result.reason
    )
    assert "grant" not in (result.reason or ""), result.reason
    assert server.keys(dst) == []
