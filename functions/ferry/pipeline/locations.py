"""A configured location: a bucket and a key prefix, its owner, and how the workers reach it.

Both the stack's settings (`settings.PipelineSettings`: sources, destinations, manifests) and
each replication's entry (`replication.config`) are made of locations, so they live below both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferry.errors import ConfigError

ACCOUNT_ID = re.compile(r"[0-9]{12}")
ROLE_ARN = re.compile(r"arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}")
REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]+")
ACCESS_FIELDS = ("role_arn", "region", "endpoint_url", "credentials_secret")


@dataclass(frozen=True)
class Location:
    """A bucket and a key prefix: what the workers may read or write, and nothing else.

    `owner`, the 12-digit account id that owns the bucket, is sent with every request to it
    (`ExpectedBucketOwner`): should the bucket be deleted and its name taken by another
    account, S3 refuses the request instead of Ferry copying into, or deleting from, a
    stranger's bucket.

    How the workers reach it, when not as themselves in the stack's region: `role_arn`, a role
    they assume (another account); `region`, the bucket's region; `endpoint_url` plus
    `credentials_secret`, the name or ARN of a Secrets Manager secret holding
    {"access_key_id", "secret_access_key"} (another partition or an S3-compatible store). The
    keys themselves never appear in configuration: only the secret's name does.
    """

    bucket: str
    prefix: str = ""
    owner: str | None = None
    role_arn: str | None = None
    region: str | None = None
    endpoint_url: str | None = None
    credentials_secret: str | None = None

    @classmethod
    def parse(cls, data: Any, where: str) -> Location:
        if isinstance(data, str):
            data = {"bucket": data}
        if not isinstance(data, Mapping) or not isinstance(data.get("bucket"), str) or not data["bucket"]:
            raise ConfigError(
                f"{where}: give an object with a non-empty 'bucket' (and optional 'prefix', 'owner')"
            )
        unknown = set(data) - {"bucket", "prefix", "owner", *ACCESS_FIELDS}
        if unknown:
            raise ConfigError(
                f"{where}: unknown field(s) {', '.join(sorted(unknown))}: use bucket, prefix, owner, "
                + ", ".join(ACCESS_FIELDS)
            )
        prefix = data.get("prefix") or ""
        if not isinstance(prefix, str):
            raise ConfigError(f"{where}.prefix: must be a string")
        owner = data.get("owner")
        if owner is not None and not (isinstance(owner, str) and ACCOUNT_ID.fullmatch(owner)):
            raise ConfigError(
                f"{where}.owner: {owner!r} is not a 12-digit AWS account id; write the bucket "
                'owner\'s account id as a string, e.g. "111122223333"'
            )
        access = {name: _access_field(data, name, where) for name in ACCESS_FIELDS}
        if access["role_arn"] and access["credentials_secret"]:
            raise ConfigError(
                f"{where}: give role_arn or credentials_secret, not both: a role is assumed with the "
                "workers' own identity, a secret's keys are used as they are"
            )
        if access["credentials_secret"] and not (access["endpoint_url"] or access["region"]):
            raise ConfigError(
                f"{where}.credentials_secret: also give endpoint_url (an S3-compatible store) or region "
                "(another partition, e.g. cn-north-1): the keys belong to another place than the stack's"
            )
        return cls(data["bucket"], prefix, owner, **access)

    @property
    def reached_otherwise(self) -> bool:
        """True when the workers reach this location other than as themselves, here."""
        return any(getattr(self, name) for name in ACCESS_FIELDS)

    def access(self) -> dict[str, str]:
        """How to reach it, for the workers' environment (names of secrets, never their values)."""
        return {name: getattr(self, name) for name in ACCESS_FIELDS if getattr(self, name)}

    def covers(self, bucket: str, key_or_prefix: str) -> bool:
        return bucket == self.bucket and key_or_prefix.startswith(self.prefix)


def _access_field(data: Mapping[str, Any], name: str, where: str) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}.{name}: must be a non-empty string")
    if name == "role_arn" and not ROLE_ARN.fullmatch(value):
        raise ConfigError(
            f"{where}.role_arn: {value!r} is not an IAM role ARN (arn:aws:iam::111122223333:role/name)"
        )
    if name == "region" and not REGION.fullmatch(value):
        raise ConfigError(f"{where}.region: {value!r} is not a region name (e.g. eu-west-1)")
    if name == "endpoint_url" and not value.startswith(("https://", "http://")):
        raise ConfigError(f"{where}.endpoint_url: {value!r} must start with https:// (or http://)")
    if name == "credentials_secret" and ("{" in value or ":" in value and not value.startswith("arn:")):
        raise ConfigError(
            f"{where}.credentials_secret: give the Secrets Manager secret's name or ARN, never the keys"
        )
    return value
