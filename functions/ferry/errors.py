"""Named failures, and the sentences that tell a user what to fix.

Each door maps these to its own surface: the CLI to an exit code and one line on stderr,
the Lambda handlers (later) to a Step Functions error name.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from botocore.exceptions import ClientError


class FerryError(Exception):
    """Base of every error Ferry raises on purpose."""


class ConfigError(FerryError):
    """The request itself is wrong (a size out of range, a bucket that does not exist)."""


class CopyFailed(FerryError):
    """One object cannot be copied; the message is the reason recorded for it."""


class CopySourceDenied(CopyFailed):
    """A server-side copy was refused reading the source: streaming may still work."""


class ListingWasStale(FerryError):
    """The listing's evidence did not hold (the object changed, moved to an archive class, or
    needs what only a HEAD says); the evidence is now confirmed: decide again from it."""


class VerificationFailed(CopyFailed):
    """The bytes written do not match the source: the destination was removed."""


class TruncatedBody(FerryError):
    """A GET returned fewer or more bytes than its range: retried, never trusted."""


_ARCHIVED = (
    "the object is in an archive storage class: restore it first, or run with --restore "
    "bulk|standard|expedited (a job spec: options.restore_tier)"
)
_HINTS = {
    "AccessDenied": "grant the {side} identity {action} on {where}",
    "AllAccessDisabled": "access to {where} is disabled for the {side} identity",
    "NoSuchBucket": "bucket {bucket!r} does not exist (check the name and the {side} endpoint/region)",
    "NoSuchKey": "the source object no longer exists",
    "NoSuchVersion": "the source version does not exist",
    "InvalidObjectState": _ARCHIVED,
    "ObjectNotInActiveTierError": _ARCHIVED,
    "PermanentRedirect": "bucket {bucket!r} is in another region: set {region_flag}",
    "AuthorizationHeaderMalformed": "wrong region for bucket {bucket!r}: set {region_flag}",
    # Credentials, not permissions: each sentence names them as the likely cause.
    "InvalidAccessKeyId": "the {side} credentials are not known to the endpoint: check the access key id",
    "XAdminUserNotFound": "the {side} credentials are not known to the endpoint: check the access key id",
    "SignatureDoesNotMatch": "the {side} credentials are wrong: check the secret key of this access key id",
    "InvalidToken": "the {side} credentials' session token is not valid: refresh the credentials",
    "ExpiredToken": "the {side} credentials have expired: refresh them",
    "TokenRefreshRequired": "the {side} credentials have expired: refresh them",
    "SlowDown": "S3 kept throttling after retries: lower --concurrency",
    "PreconditionFailed": "the source object changed during the copy; run again to copy its new version",
    "412": "the source object changed during the copy; run again to copy its new version",
}


# Servers that answer a credentials fault with a plain AccessDenied say which only in the
# message: Garage 2.5.0 sends "Forbidden: Invalid signature" and "Forbidden: No such key: ID"
# (garage_api_common/signature/payload.rs). Read as the code S3 would have sent.
_CREDENTIAL_MESSAGES = (
    ("invalid signature", "SignatureDoesNotMatch"),
    ("no such key:", "InvalidAccessKeyId"),
)


def _is_botocore(error: BaseException, name: str) -> bool:
    """`isinstance(error, botocore.exceptions.<name>)` without importing botocore: every module
    imports this one, and `import ferry` or `ferry --help` should not pay for botocore
    (start-up cost). An error can only be botocore's once botocore is loaded."""
    exceptions = sys.modules.get("botocore.exceptions")
    return exceptions is not None and isinstance(error, getattr(exceptions, name))


def is_client_error(error: BaseException) -> bool:
    """botocore's ClientError: the service answered with an error."""
    return _is_botocore(error, "ClientError")


def is_botocore_error(error: BaseException) -> bool:
    """Any error botocore raises: the service's answer (ClientError) or its own (BotoCoreError)."""
    return is_client_error(error) or _is_botocore(error, "BotoCoreError")


def error_code(error: BaseException) -> str:
    if is_client_error(error):
        return str(error.response.get("Error", {}).get("Code", "Unknown"))
    return type(error).__name__


def _http_status(error: ClientError) -> int | None:
    return error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")


def is_bare(error: BaseException) -> bool:
    """An error without a body to name it: botocore then gives the HTTP status as its code.
    Every HEAD's error is bare: a 403 cannot tell a missing permission from a wrong key."""
    return is_client_error(error) and error_code(error).isdigit()


def explain_bare(error: BaseException, ask: Callable[[], object]) -> BaseException | None:
    """The named error behind a HEAD's bare one; the HEAD's own error when none is found; None
    when the request asked again succeeds (the refusal did not hold: botocore, for one, learns
    a bucket's region from a listing's error body and retries, which it cannot from a HEAD's).

    `ask` makes a request needing the same permission whose error has a body (a one-key
    ListObjectsV2 for HeadBucket, a one-byte GET for HeadObject): on the failure path only,
    one request more says SignatureDoesNotMatch, InvalidAccessKeyId or AccessDenied. Its
    error counts only with the same HTTP status (the same refusal, now named); anything else
    (a range error, no connection) keeps the HEAD's error.
    """
    if not is_bare(error):
        return error
    try:
        ask()
    except Exception as named:
        if is_client_error(named) and not is_bare(named) and _http_status(named) == _http_status(error):
            return named
        if is_botocore_error(named):
            return error
        raise
    return None


# S3's words (and MinIO's) when an object encrypted with a customer-provided key (SSE-C) is
# read or copied without that key: "The object was stored using a form of Server Side
# Encryption. The correct parameters must be provided to retrieve the object."
SSE_C_REFUSAL = "stored using a form of Server Side Encryption"


def describe(
    error: BaseException,
    *,
    side: str,
    action: str,
    bucket: str,
    key: str | None = None,
    region_flag: str | None = None,
) -> str:
    """One sentence: what failed, and what the user can do about it. `region_flag` is the
    option that sets the side's region where the command has another than `ferry copy`'s."""
    where = f"s3://{bucket}/{key}" if key is not None else f"s3://{bucket}"
    if isinstance(error, FerryError):
        return str(error)
    if _is_botocore(error, "EndpointConnectionError"):
        return f"could not connect to the {side} endpoint: {error}"
    if is_client_error(error):
        code = error_code(error)
        message = error.response.get("Error", {}).get("Message", "")
        region_flag = region_flag or ("--source-region" if side == "source" else "--dest-region")
        if code.startswith("KMS") or "kms" in message.lower():
            need = (
                "kms:Decrypt on the source key"
                if side == "source"
                else "kms:GenerateDataKey and kms:Decrypt on the destination key"
            )
            return f"KMS denied {action} on {where} ({code}): grant the {side} identity {need}"
        if SSE_C_REFUSAL in message:
            return (
                f"{code} on {action} {where}: the object is encrypted with a customer-provided key "
                "(SSE-C), which Ferry cannot send: copy it with a tool given that key"
            )
        status = _http_status(error)
        if code in ("403", "Forbidden") or status == 403 and code not in _HINTS:
            code = "AccessDenied"
        meaning = code  # the code stays in the sentence; an AccessDenied's hint follows its message
        if code == "AccessDenied":
            meaning = next((named for text, named in _CREDENTIAL_MESSAGES if text in message.lower()), code)
        if code in ("404", "NotFound") and key is not None:
            code = meaning = "NoSuchKey"
        hint = _HINTS.get(meaning)
        text = f"{code} on {action} {where}"
        if hint:
            text += ": " + hint.format(
                side=side, action=action, where=where, bucket=bucket, region_flag=region_flag
            )
        elif message:
            text += f": {message}"
        return text
    return f"{type(error).__name__} on {action} {where}: {error}"


def describe_destination(error: BaseException, action: str, bucket: str, key: str) -> str:
    """describe() of a destination's refusal to write one key: the words most writes fail in."""
    return describe(error, side="destination", action=action, bucket=bucket, key=key)


def is_access_denied(error: BaseException) -> bool:
    if not is_client_error(error):
        return False
    code = error_code(error)
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("AccessDenied", "403", "Forbidden", "AllAccessDisabled") or status == 403
