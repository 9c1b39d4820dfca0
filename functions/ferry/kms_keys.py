"""KMS keys for SSE-KMS: the ones Ferry can refuse before any request is made.

S3 takes a key id (a UUID, or `mrk-` and 32 hex digits for a multi-Region key), a key ARN,
`alias/NAME` or an alias ARN in `x-amz-server-side-encryption-aws-kms-key-id`
(PutObject, CreateMultipartUpload, CopyObject: "SSEKMSKeyId"). Anything else is refused by S3
on the first write; here it is refused before the first request. A key ARN also names its
region, and S3 encrypts only with a key in the bucket's own region (a key in another account is
allowed, given its key policy): a key ARN whose region differs from the destination's region,
when that region is given, is refused too. Whether the caller may use the key (kms:Encrypt,
kms:GenerateDataKey) only KMS can say: that stays a per-object failure (errors.describe).
"""

from __future__ import annotations

import re

FORMS = "give a key id, key ARN, alias/NAME or alias ARN"
_KEY_ID = r"(?:mrk-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
_ALIAS = r"alias/[A-Za-z0-9/_-]{1,250}"
_BARE = re.compile(rf"^(?:{_KEY_ID}|{_ALIAS})$")
# The ARN as S3's own API pattern for a KMS key ARN has it (SSEKMSEncryption.KMSKeyArn:
# `arn:aws[a-zA-Z0-9-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[a-zA-Z0-9-]+`), or an alias ARN.
_ARN = re.compile(
    rf"^arn:aws[a-zA-Z0-9-]*:kms:(?P<region>[a-z0-9-]+):\d{{12}}:(?:key/[A-Za-z0-9-]+|{_ALIAS})$"
)


def kms_key_problem(key: str, dest_region: str | None) -> str | None:
    """Why S3 would refuse `key` for a destination in `dest_region` (None: not known), or None."""
    if _BARE.match(key):
        return None
    arn = _ARN.match(key)
    if not arn:
        return f"{key!r} is not a KMS key: {FORMS}"
    region = arn.group("region")
    if dest_region and region != dest_region:
        return (
            f"the key is in {region} but the destination is in {dest_region}: "
            "S3 encrypts only with a key in the bucket's region (use a key, or a multi-Region replica, there)"
        )
    return None
