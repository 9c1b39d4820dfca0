"""One S3 client per side, built from an Endpoint, tuned for many parallel requests.

Retries: botocore's adaptive mode backs off with jitter and rate-limits the client itself on
SlowDown, so one throttled prefix does not become a retry storm. Ferry never wraps another
retry loop around a request botocore already retried; it only retries reading a body.
"""

from __future__ import annotations

import datetime
import email.utils
import functools
import json
import logging
import os
import platform
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import botocore
import botocore.session
from botocore.config import Config
from botocore.credentials import RefreshableCredentials
from botocore.exceptions import BotoCoreError, DataNotFoundError
from botocore.loaders import Loader
from botocore.utils import parse_timestamp

from ferry.errors import ConfigError
from ferry.models import Endpoint
from ferry.s3.lean_s3 import lean_requests_enabled, make_lean

MAX_ATTEMPTS = 8
DEFAULT_POOL_SIZE = 64  # connections a client keeps when its maker names no number


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
        f"ferry/{ferry} Botocore/{botocore.__version__} "
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


class _ModelLoader(Loader):
    """botocore's model loader, asked whether a service exists by that service's own folder.

    botocore refuses an unknown service name by listing every service's folder (about 420, two
    listings each), once for each kind of model it loads: the service and its endpoint rules,
    18 ms of the 300 a command takes to start. The answer is the same (a folder under a search
    path holding an API version with that model); only the whole list, which an
    UnknownServiceError's message names, is still read folder by folder.
    """

    def list_available_services(self, type_name: str) -> Sequence[str]:
        return _Services(self, type_name)


class _Services(Sequence[str]):
    """The services with a `type_name` model; `in` reads one service's folder."""

    def __init__(self, loader: Loader, type_name: str) -> None:
        self._loader = loader
        self._type_name = type_name

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or not name or os.sep in name or name.startswith("."):
            return False
        try:
            self._loader.list_api_versions(name, self._type_name)
        except (DataNotFoundError, NotADirectoryError):  # no such folder, or a file of that name
            return False
        return True

    @functools.cached_property
    def _all(self) -> list[str]:
        return Loader.list_available_services(self._loader, self._type_name)

    def __getitem__(self, index: Any) -> Any:
        return self._all[index]

    def __len__(self) -> int:
        return len(self._all)

    def __iter__(self) -> Iterator[str]:
        return iter(self._all)


@functools.cache
def _loader(data_path: str | None) -> Loader:
    """One model loader for every session with this data path (AWS_DATA_PATH, read as
    botocore.loaders.create_loader reads it), so each new session does not parse the S3 model
    JSON again (what one session does for all its clients anyway)."""
    if data_path is None:
        return _ModelLoader()
    paths = [os.path.expanduser(os.path.expandvars(path)) for path in data_path.split(os.pathsep)]
    return _ModelLoader(extra_search_paths=paths)


def _session(profile: str | None, region: str | None) -> botocore.session.Session:
    """A botocore session, not a boto3 one: Ferry makes clients only, and importing boto3
    (with s3transfer) costs a tenth of the CLI's start-up."""
    session = botocore.session.Session(profile=profile)
    session.register_component("data_loader", _loader(session.get_config_variable("data_path")))
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=fast_timestamp)
    if region:
        session.set_config_variable("region", region)
    return session


def configured_endpoint_url(profile: str | None) -> str | None:
    """The S3 endpoint the AWS configuration names for `profile` (None: AWS_PROFILE's, else the
    default), as the AWS CLI and SDKs read it: AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL, then
    the profile's `services` section's `s3` endpoint_url, then the profile's own endpoint_url;
    none when `ignore_configured_endpoint_urls` (or AWS_IGNORE_CONFIGURED_ENDPOINT_URLS) is set.

    botocore's clients find it by themselves; the command line asks for it too, so that what it
    decides from the two sides' endpoints (one store or two: a server-side copy, an overlap, a
    copy onto itself) is decided from the stores the requests will really go to. A profile that
    does not exist is botocore's to refuse, when the client is made."""
    from botocore.configprovider import ConfiguredEndpointProvider

    session = botocore.session.Session(profile=profile)
    try:
        if session.get_config_variable("ignore_configured_endpoint_urls"):
            return None
        url = ConfiguredEndpointProvider(
            full_config=session.full_config, scoped_config=session.get_scoped_config(), client_name="s3"
        ).provide()
    except BotoCoreError:
        return None
    return str(url) if url else None


def client_config(endpoint: Endpoint, pool_size: int, addressing_style: str | None = None) -> Config:
    """A side's client settings. An endpoint other than AWS's is addressed path-style (a store
    seldom has a host name per bucket) unless the profile names its `addressing_style`."""
    s3_options: dict[str, Any] = {}
    if endpoint.endpoint_url:
        s3_options["addressing_style"] = addressing_style or "path"
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


# One credentials object per (profile, role, region) and per secret, for the life of the
# process: a warm Lambda or a Fargate task reuses it from batch to batch instead of calling
# STS (or Secrets Manager) for every Copier. botocore's RefreshableCredentials renews it on
# first use within 15 minutes of expiry (advisory; 10 minutes mandatory), under its own lock.
_CREDENTIALS: dict[tuple[str | None, ...], RefreshableCredentials] = {}
_CREDENTIALS_LOCK = threading.Lock()
SECRET_REFRESH = datetime.timedelta(hours=1)  # a rotated secret is picked up within this


def _cached(key: tuple[str | None, ...], make: Any) -> RefreshableCredentials:
    with _CREDENTIALS_LOCK:
        credentials = _CREDENTIALS.get(key)
        if credentials is None:
            credentials = _CREDENTIALS[key] = make()
        return credentials


def forget_credentials() -> None:
    """Drop every cached credentials object (tests; a process that changes identity)."""
    with _CREDENTIALS_LOCK:
        _CREDENTIALS.clear()


def _role_credentials(
    base: botocore.session.Session, role_arn: str, session_policy: str | None = None
) -> RefreshableCredentials:
    """Credentials from sts:AssumeRole that refresh themselves before they expire, narrowed by
    `session_policy` when one is given (every refresh passes it again)."""
    sts = base.create_client("sts")
    narrowed = {"Policy": session_policy} if session_policy else {}

    def fetch() -> dict[str, Any]:
        creds = sts.assume_role(RoleArn=role_arn, RoleSessionName="ferry", **narrowed)["Credentials"]
        return {
            "access_key": creds["AccessKeyId"],
            "secret_key": creds["SecretAccessKey"],
            "token": creds["SessionToken"],
            "expiry_time": creds["Expiration"].isoformat(),
        }

    return RefreshableCredentials.create_from_metadata(fetch(), fetch, "sts-assume-role")


def secret_region(secret_id: str) -> str | None:
    """A secret ARN names its region (arn:aws:secretsmanager:REGION:...); a name is read in
    the workers' own region."""
    parts = secret_id.split(":")
    return parts[3] if secret_id.startswith("arn:") and len(parts) > 3 and parts[3] else None


class _QuietWhileReadingSecrets(logging.Filter):
    """botocore logs every response body at DEBUG (botocore.parsers), a GetSecretValue's
    included: on the thread reading a secret, those records are dropped, so turning on DEBUG
    logging never writes the keys to a log."""

    reading = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.reading, "active", False)


_QUIET = _QuietWhileReadingSecrets()
logging.getLogger("botocore.parsers").addFilter(_QUIET)


def _secret_credentials(secret_id: str) -> RefreshableCredentials:
    """Access keys from a Secrets Manager secret {"access_key_id", "secret_access_key"},
    re-read every SECRET_REFRESH so that a rotation reaches a long-lived worker. The keys go
    into botocore's credentials only: no message here ever holds the secret's text."""
    secrets = _session(None, secret_region(secret_id)).create_client("secretsmanager")

    def fetch() -> dict[str, Any]:
        _QUIET.reading.active = True
        try:
            text = secrets.get_secret_value(SecretId=secret_id).get("SecretString") or ""
        finally:
            _QUIET.reading.active = False
        try:
            values = json.loads(text)
        except ValueError:
            values = None
        if not (
            isinstance(values, dict)
            and isinstance(values.get("access_key_id"), str)
            and isinstance(values.get("secret_access_key"), str)
        ):
            raise ConfigError(
                f"credentials secret {secret_id!r} must hold a JSON object with the strings "
                '"access_key_id" and "secret_access_key"'
            )
        expiry = datetime.datetime.now(datetime.UTC) + SECRET_REFRESH
        return {
            "access_key": values["access_key_id"],
            "secret_key": values["secret_access_key"],
            "token": values.get("session_token"),
            "expiry_time": expiry.isoformat(),
        }

    return RefreshableCredentials.create_from_metadata(fetch(), fetch, "ferry-secrets-manager")


def _with_credentials(
    session: botocore.session.Session, credentials: RefreshableCredentials
) -> botocore.session.Session:
    """The same session, signing with `credentials` (shared by every client of that identity)."""
    session._credentials = credentials  # botocore has no public setter for refreshable ones
    return session


def session_for(endpoint: Endpoint) -> botocore.session.Session:
    """The session one side's clients are made from: its profile, then the role it assumes or
    the secret whose keys it uses, with credentials shared by every client of that identity."""
    session = _session(endpoint.profile, endpoint.region)
    if endpoint.credentials_secret:
        secret = endpoint.credentials_secret
        return _with_credentials(session, _cached(("secret", secret), lambda: _secret_credentials(secret)))
    if endpoint.role_arn:
        role, policy = endpoint.role_arn, endpoint.session_policy
        key = ("role", endpoint.profile, role, endpoint.region, policy)  # a narrowed session is another
        return _with_credentials(session, _cached(key, lambda: _role_credentials(session, role, policy)))
    return session


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


def _configured_addressing(session: botocore.session.Session) -> str | None:
    """The addressing style the profile's `s3` settings name (`addressing_style = virtual` for a
    store that takes virtual-hosted requests only), as the AWS CLI reads it; None when unnamed."""
    settings = session.get_config_variable("s3") or {}
    style = settings.get("addressing_style")
    return style if style in ("auto", "virtual", "path") else None


def make_client(endpoint: Endpoint, pool_size: int = DEFAULT_POOL_SIZE, *, lean: bool | None = None) -> Any:
    """One side's S3 client. With `lean` (default: on unless FERRY_LEAN_REQUESTS=0), the hot
    small-object requests take ferry.s3.lean_s3's path, signed with this session's credentials;
    everything else, and every answer but a clean one, is botocore's. The lean path is put in
    front before Ferry's own hooks are registered, so it calls them as botocore does."""
    session = session_for(endpoint)
    config = client_config(endpoint, pool_size, _configured_addressing(session))
    client = session.create_client("s3", endpoint_url=endpoint.endpoint_url, config=config)
    if lean is None:
        lean = lean_requests_enabled()
    front = client
    if lean:
        front = make_lean(
            client, session.get_credentials(), timestamp_parser=fast_timestamp, user_agent=_user_agent()
        )
    if endpoint.requester_pays:
        # Every request of this side, of every operation, agrees to pay: one hook, no forgotten call.
        client.meta.events.register("before-call.s3", _add_request_payer)
    expect_owners(client, dict(endpoint.bucket_owners))
    return front
