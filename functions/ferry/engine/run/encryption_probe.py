"""Whether a store can hold encrypted objects at all: asked once per destination bucket.

A server-side copy made from the listing's evidence sends no encryption header, so S3 applies
the destination bucket's default. On AWS, CopyObject's answer names the copy's encryption
(every bucket encrypts by default since 2023): SSE-S3 with the listed ETag proves the copy is
what a HEAD-first copy makes, and anything else is settled by the source's HEAD (server_side).
Some S3-compatible stores never name an encryption in their answers. There the source's HEAD
after each copy was the only way to notice an SSE-S3 or SSE-KMS source whose copy landed
unencrypted, and it cost a second request per object. That HEAD can change the outcome only
on a store that can hold encrypted objects; a server-side copy reads and writes one store, so
the destination bucket answers for the source too. One probe object, written with SSE-S3
under the marks prefix and deleted at once, tells:

- the store refuses SSE-S3 (501 NotImplemented, or a refusal naming encryption or KMS): it
  holds no SSE-S3 or SSE-KMS object, so no copy can lose one: no HEAD after copies;
- the store accepts the header and neither the answer nor a HEAD of the probe names an
  encryption: it ignores encryption, and has none to lose: no HEAD after copies;
- the store reports SSE-S3: it encrypts, so a copy whose answer names none still gets the
  source's HEAD;
- anything else (access denied, marks turned off, a network fault): not known, and the HEAD
  stays. SSE-C needs no probe: a store may hold SSE-C objects without a KMS (MinIO over TLS
  does), but S3 and MinIO refuse to copy one without its customer key, so such a copy fails
  with its reason and never lands unencrypted (tests/engine/test_sse_c_sources.py).
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any

from ferry.errors import error_code

log = logging.getLogger(__name__)

# Answers to a PutObject with SSE-S3 that say the store cannot encrypt: 501 NotImplemented
# (S3's answer for "functionality that is not implemented"), or a refusal that names
# encryption or KMS (MinIO without a KMS: "Server side encryption specified but KMS is not
# configured"). Any other refusal says nothing about encryption.
NOT_IMPLEMENTED = frozenset({"NotImplemented", "501"})
ABOUT_ENCRYPTION = ("encrypt", "kms")
PROBE_NAME = "encryption-probe-"


class EncryptionProbe:
    """Per destination bucket: True when the store is known to hold no encrypted objects."""

    def __init__(self) -> None:
        self._known: dict[str, bool] = {}
        self._lock = threading.Lock()

    def store_holds_no_encryption(self, client: Any, bucket: str, marks_prefix: str | None) -> bool:
        known = self._known.get(bucket)
        if known is not None:
            return known
        with self._lock:  # one probe per bucket: the other workers wait for its answer
            known = self._known.get(bucket)
            if known is None:
                known = self._known[bucket] = _probe(client, bucket, marks_prefix)
            return known


def _probe(client: Any, bucket: str, marks_prefix: str | None) -> bool:
    if marks_prefix is None:
        return False  # the user asked for no objects of Ferry's in the bucket: not known
    key = f"{marks_prefix}{PROBE_NAME}{uuid.uuid4().hex}"
    try:
        answer = client.put_object(Bucket=bucket, Key=key, Body=b"", ServerSideEncryption="AES256")
    except Exception as error:
        refused = _refuses_encryption(error)
        log.debug(
            "encryption probe on s3://%s refused (%s): store encrypts nothing=%s", bucket, error, refused
        )
        return refused
    try:
        reported = answer.get("ServerSideEncryption") or client.head_object(Bucket=bucket, Key=key).get(
            "ServerSideEncryption"
        )
    except Exception as error:  # could not read it back: not known
        log.debug("encryption probe on s3://%s: HEAD failed: %s", bucket, error)
        reported = "unknown"
    finally:
        _remove(client, bucket, key, answer.get("VersionId"))
    return not reported


def _refuses_encryption(error: BaseException) -> bool:
    if error_code(error) in NOT_IMPLEMENTED:
        return True
    message = str(getattr(error, "response", {}).get("Error", {}).get("Message", "")).lower()
    return error_code(error) not in ("403", "AccessDenied") and any(w in message for w in ABOUT_ENCRYPTION)


def _remove(client: Any, bucket: str, key: str, version_id: str | None) -> None:
    """The probe goes at once, its version too on a versioned bucket, so no trace is left."""
    args = {"VersionId": version_id} if version_id else {}
    try:
        client.delete_object(Bucket=bucket, Key=key, **args)
    except Exception as error:
        log.warning("could not delete Ferry's encryption probe s3://%s/%s: %s", bucket, key, error)
