"""Prepare's access checks against real S3-compatible servers, which check signatures.

moto in-process accepts any signature, so a wrong secret key cannot be shown there: these
tests give Prepare's checks (`check_access`, what the Prepare handler runs before the
fan-out) an S3 client for versitygw, MinIO or Garage signed with wrong credentials. The
manifest check is a HeadObject, whose 403 has no body; the listing check's has one.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config

from conftest import ACCESS_KEY, SECRET_KEY, S3Server
from ferry.jobspec import parse_job_spec
from ferry.pipeline.jobs import AccessCheckFailed, check_access
from ferry.pipeline.services import Services

WRONG = {
    "wrong-secret-key": (None, "not-the-secret-key", "secret key"),
    "unknown-access-key-id": ("FERRYNOSUCHKEYID", None, "access key id"),
}


def client_with(server: S3Server, access_key: str | None, secret_key: str | None) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=server.url,
        region_name=server.region,
        aws_access_key_id=access_key or ACCESS_KEY,
        aws_secret_access_key=secret_key or SECRET_KEY,
        config=Config(s3={"addressing_style": "path"}, retries={"mode": "standard", "max_attempts": 1}),
    )


@pytest.mark.parametrize("reader", ["manifest", "listing"])
@pytest.mark.parametrize("wrong", list(WRONG))
def test_prepare_names_wrong_credentials_not_a_missing_permission(
    s3_compatible: S3Server, wrong: str, reader: str
) -> None:
    server = s3_compatible
    src, dst = server.bucket("src"), server.bucket("dst")
    server.client.put_object(Bucket=src, Key="rows.csv", Body=f"{src},a.txt\n".encode())
    source: dict[str, Any] = (
        {"manifest": {"bucket": src, "key": "rows.csv", "format": "csv"}}
        if reader == "manifest"
        else {"bucket": src}
    )
    spec = parse_job_spec({"source": source, "destination": {"bucket": dst}}, default_job_id="job-1")
    access_key, secret_key, named = WRONG[wrong]
    services = Services(s3=client_with(server, access_key, secret_key), dynamodb=None, settings=None)  # type: ignore[arg-type]

    with pytest.raises(AccessCheckFailed) as refused:
        check_access(spec, services)

    sentence = str(refused.value)
    assert sentence.startswith("source"), sentence
    assert "source credentials" in sentence and named in sentence, sentence
    assert "grant" not in sentence, sentence
    assert server.open_uploads(dst) == []
