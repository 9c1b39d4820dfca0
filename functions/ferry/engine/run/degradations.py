"""Run-level facts about an endpoint that lacks a feature: learned once, said once.

S3-compatible stores answer `501 NotImplemented` ("A header you provided implies functionality
that is not implemented", S3's error code list) for features they lack: a CopyObject header,
object tagging, HeadObject with a part number. What such an answer means holds for the whole
run, so it is learned from the first object that meets it and said once in the run's summary
and report, not repeated as 213 identical per-object messages.
"""

from __future__ import annotations

import threading

from botocore.exceptions import ClientError

from ferry.errors import CopyFailed, error_code

SERVER_SIDE_NOT_IMPLEMENTED = (
    "the endpoint does not implement this server-side copy ({code}: {message}): "
    "objects were streamed through Ferry instead"
)
SOURCE_TAGGING_NOT_IMPLEMENTED = (
    "the source endpoint does not implement object tagging (GetObjectTagging answered "
    "NotImplemented): it holds no tags, so objects were copied without tags"
)
DEST_TAGS_REFUSED = (
    "the destination does not store object tags ({how}): objects with tags were not copied; "
    "copy them without tags with --no-tags"
)


def is_not_implemented(error: BaseException | None) -> bool:
    """S3's NotImplemented error (HTTP 501), from the error or the one it was raised from."""
    while error is not None:
        if isinstance(error, ClientError):
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return error_code(error) in ("NotImplemented", "501") or status == 501
        error = error.__cause__
    return False


class NotImplementedByServer(CopyFailed):
    """A server-side copy the endpoint does not implement: streaming may still work."""


class DestinationDropsTags(CopyFailed):
    """The destination cannot keep the tags Ferry was asked to copy: no object with tags can
    be copied faithfully there, so every one fails with this same sentence."""


class Degradations:
    """Sentences said once per run, in the order first met (thread-safe)."""

    def __init__(self) -> None:
        self._said: dict[str, None] = {}
        self._lock = threading.Lock()

    def add(self, sentence: str) -> None:
        with self._lock:
            self._said.setdefault(sentence, None)

    def list(self) -> list[str]:
        with self._lock:
            return list(self._said)
