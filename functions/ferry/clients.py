"""One S3 client per side, built from an Endpoint, tuned for many parallel requests.

Retries: botocore's adaptive mode backs off with jitter and rate-limits the client itself on
SlowDown, so one throttled prefix does not become a retry storm. Ferry never wraps another
retry loop around a request botocore already retried; it only retries reading a body.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config
from botocore.credentials import RefreshableCredentials

from .models import Endpoint

MAX_ATTEMPTS = 8


def client_config(endpoint: Endpoint, pool_size: int) -> Config:
    s3_options: dict[str, Any] = {}
    if endpoint.endpoint_url:
        s3_options["addressing_style"] = "path"
    return Config(
        region_name=endpoint.region,
        retries={"mode": "adaptive", "max_attempts": MAX_ATTEMPTS},
        max_pool_connections=pool_size,
        connect_timeout=10,
        read_timeout=120,
        tcp_keepalive=True,
        # Ferry computes and sends its own checksums per part; botocore must not add a second.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        s3=s3_options,
    )


def _assumed_role_session(base: boto3.Session, role_arn: str) -> boto3.Session:
    """A session whose credentials come from sts:AssumeRole and refresh before they expire."""
    sts = base.client("sts")

    def fetch() -> dict[str, str]:
        creds = sts.assume_role(RoleArn=role_arn, RoleSessionName="ferry")["Credentials"]
        return {
            "access_key": creds["AccessKeyId"],
            "secret_key": creds["SecretAccessKey"],
            "token": creds["SessionToken"],
            "expiry_time": creds["Expiration"].isoformat(),
        }

    credentials = RefreshableCredentials.create_from_metadata(fetch(), fetch, "sts-assume-role")
    botocore_session = base._session  # boto3 exposes no public setter for refreshable credentials
    botocore_session._credentials = credentials
    return boto3.Session(botocore_session=botocore_session, region_name=base.region_name)


def _add_request_payer(params: dict[str, Any], **_: Any) -> None:
    params.setdefault("headers", {})["x-amz-request-payer"] = "requester"


def make_client(endpoint: Endpoint, pool_size: int = 64) -> Any:
    session = boto3.Session(profile_name=endpoint.profile, region_name=endpoint.region)
    if endpoint.role_arn:
        session = _assumed_role_session(session, endpoint.role_arn)
    client = session.client(
        "s3", endpoint_url=endpoint.endpoint_url, config=client_config(endpoint, pool_size)
    )
    if endpoint.requester_pays:
        # Every request of this side, of every operation, agrees to pay: one hook, no forgotten call.
        client.meta.events.register("before-call.s3", _add_request_payer)
    return client
