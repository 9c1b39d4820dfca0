"""One S3 client per side, built from an Endpoint, tuned for many parallel requests.

Retries: botocore's adaptive mode backs off with jitter and rate-limits the client itself on
SlowDown, so one throttled prefix does not become a retry storm. Ferry never wraps another
retry loop around a request botocore already retried; it only retries reading a body.
"""

from __future__ import annotations

import datetime
import email.utils
import functools
import platform
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

import boto3
import botocore
import botocore.session
from botocore.config import Config
from botocore.credentials import RefreshableCredentials
from botocore.loaders import Loader
from botocore.utils import parse_timestamp

from ferry.models import Endpoint

MAX_ATTEMPTS = 8


@functools.cache
def _user_agent() -> str:
    """One fixed User-Agent. botocore otherwise rebuilds its default one on every request
    (about 14% of Ferry's CPU when copying small objects); this one also names Ferry."""
    try:
        from importlib.metadata import version

        ferry = version("ferry")
    except Exception:
        ferry = "unknown"
    return (
        f"ferry/{ferry} Boto3/{boto3.__version__} Botocore/{botocore.__version__} "
        f"Python/{platform.python_version()} {platform.system()}/{platform.release()}"
    )


def fast_timestamp(value: Any) -> Any:
    """Parse S3's two timestamp forms with the standard library, else as botocore does.

    botocore's default goes through dateutil, which took a third of a millisecond per value:
    more CPU than the rest of a listed key, and three values per small object copied.
    """
    if isinstance(value, str):
        try:
            if "," in value:  # RFC 1123, in headers: "Fri, 21 Nov 2026 06:30:00 GMT"
                parsed = email.utils.parsedate_to_datetime(value)
            else:  # ISO 8601, in XML bodies: "2026-11-21T06:30:00.000Z"
                parsed = datetime.datetime.fromisoformat(value)
            if parsed.tzinfo is not None:
                return parsed
        except (TypeError, ValueError):
            pass
    return parse_timestamp(value)


@functools.cache
def _loader() -> Loader:
    """One model loader for every client, so each new session does not parse the S3 model
    JSON again (what one session does for all its clients anyway)."""
    return botocore.session.get_session().get_component("data_loader")


def _session(profile: str | None, region: str | None) -> boto3.Session:
    core = botocore.session.get_session()
    core.register_component("data_loader", _loader())
    core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=fast_timestamp)
    session = boto3.Session(botocore_session=core, profile_name=profile, region_name=region)
    paths = _loader().search_paths
    paths[:] = list(dict.fromkeys(paths))  # boto3 appends its data path once per session
    return session


def client_config(endpoint: Endpoint, pool_size: int) -> Config:
    s3_options: dict[str, Any] = {}
    if endpoint.endpoint_url:
        s3_options["addressing_style"] = "path"
    return Config(
        region_name=endpoint.region,
        user_agent=_user_agent(),
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


def _copy_source_bucket(copy_source: Any) -> str | None:
    """The bucket of a CopySource, as the caller gave it (a dict) or as botocore's own handler
    left it ("bucket/key?versionId=..." URL-quoted); None for an access point ARN."""
    if isinstance(copy_source, Mapping):
        bucket = copy_source.get("Bucket")
        return bucket if isinstance(bucket, str) else None
    if isinstance(copy_source, str) and not copy_source.startswith("arn:"):
        return unquote(copy_source.lstrip("/").split("/", 1)[0])
    return None


def _add_expected_owners(params: dict[str, Any], model: Any, owners: Mapping[str, str], **_: Any) -> None:
    members = model.input_shape.members if model.input_shape is not None else {}
    owner = owners.get(params.get("Bucket", ""))
    if owner and "ExpectedBucketOwner" in members:
        params.setdefault("ExpectedBucketOwner", owner)
    if "ExpectedSourceBucketOwner" in members:
        source_owner = owners.get(_copy_source_bucket(params.get("CopySource")) or "")
        if source_owner:
            params.setdefault("ExpectedSourceBucketOwner", source_owner)


def expect_owners(client: Any, owners: Mapping[str, str]) -> None:
    """Name each listed bucket's owning account on every request to it, of every operation
    (`ExpectedBucketOwner`; `ExpectedSourceBucketOwner` on CopyObject and UploadPartCopy): S3
    refuses the request with 403 if another account owns the bucket now. One hook on the
    client, applied before botocore builds the request, so no call site can forget it.
    """
    if owners:
        handler = functools.partial(_add_expected_owners, owners=dict(owners))
        client.meta.events.register("before-parameter-build.s3", handler)


def make_client(endpoint: Endpoint, pool_size: int = 64) -> Any:
    session = _session(endpoint.profile, endpoint.region)
    if endpoint.role_arn:
        session = _assumed_role_session(session, endpoint.role_arn)
    client = session.client(
        "s3", endpoint_url=endpoint.endpoint_url, config=client_config(endpoint, pool_size)
    )
    if endpoint.requester_pays:
        # Every request of this side, of every operation, agrees to pay: one hook, no forgotten call.
        client.meta.events.register("before-call.s3", _add_request_payer)
    expect_owners(client, dict(endpoint.bucket_owners))
    return client
