"""The JSON documents a test's process printed, read whole.

Offline, the harness runs Lambda invocations and Fargate tasks as threads of one process, and
`print` writes a document and its newline in two writes: two threads printing at once can leave
two documents on one line and an empty line after them. Each write stays whole, so the output
is still a sequence of documents; it is read as one, never line by line. In AWS each
invocation has its own process and log stream, so this is the harness's shape, not Ferry's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

_DECODER = json.JSONDecoder()


def printed_documents(text: str) -> Iterator[Any]:
    """Every JSON object in `text`, in order; text that is not JSON (a plain log line) is passed over."""
    at = 0
    while (at := text.find("{", at)) != -1:
        try:
            document, at = _DECODER.raw_decode(text, at)
        except json.JSONDecodeError:
            at = text.find("\n", at)
            if at == -1:
                return
            continue
        yield document
