"""How a worker reaches each configured location: as itself in the stack's region, or through
a role it assumes, another region, or an S3-compatible endpoint with keys from a secret.

The CDK app writes the locations that are reached otherwise into every worker's environment
(`PipelineSettings.reached_locations`, FERRY_LOCATIONS); a worker picks, for each bucket and
key, the configured location with the longest prefix that covers it. Buckets no location
names are reached as before: the worker's own identity, its own region (botocore follows S3's
redirect to the bucket's region), with `ExpectedBucketOwner` wherever an owner is configured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ferry.models import Endpoint
from ferry.pipeline.settings import WorkerSettings


def location_for(
    locations: Sequence[Mapping[str, str]], side: str, bucket: str, key: str
) -> Mapping[str, str] | None:
    """The configured location of `side` with the longest prefix covering bucket/key."""
    covering = [
        loc
        for loc in locations
        if loc.get("side") == side and loc.get("bucket") == bucket and key.startswith(loc.get("prefix", ""))
    ]
    return max(covering, key=lambda loc: len(loc.get("prefix", "")), default=None)


def endpoint_for(settings: WorkerSettings, side: str, bucket: str, key: str = "") -> Endpoint:
    """The Endpoint a worker uses for `side` ("source" or "destination") at bucket/key."""
    owners = tuple(sorted(settings.bucket_owners.items()))
    loc = location_for(settings.locations, side, bucket, key) or {}
    return Endpoint(
        endpoint_url=loc.get("endpoint_url"),
        region=loc.get("region"),
        role_arn=loc.get("role_arn"),
        credentials_secret=loc.get("credentials_secret"),
        bucket_owners=owners,
    )


def reached_otherwise(endpoint: Endpoint) -> bool:
    """True when `endpoint` is not simply the worker itself in its own region."""
    return any((endpoint.endpoint_url, endpoint.region, endpoint.role_arn, endpoint.credentials_secret))
