"""Node's notices, as text: the CDK's jsii runtime (the Node process behind aws_cdk) writes
its own warnings, such as "Node 20 is end-of-life", straight to its stderr, and jsii's Python
side (jsii._kernel.providers.process.stderr_sink), which expects only JSON lines there, prints
each other line as `print(line)` of bytes: `b'!!!!...!!\\n'`, a wall of Python byte strings at
every `npx cdk synth`. This sink writes such lines as the text they are; JSON lines go where
jsii sends them. Installed before aws_cdk is imported (the import starts the Node process)."""

from __future__ import annotations

import base64
import json
import sys
from typing import IO


def stderr_sink(reader: IO[bytes]) -> None:
    """jsii's sink, with a line that is not jsii's JSON written as text."""
    for line in iter(reader.readline, b""):
        try:
            console = json.loads(line)
        except ValueError:
            console = None
        if not isinstance(console, dict):
            sys.stderr.write(line.decode("utf-8", errors="replace"))
            sys.stderr.flush()
            continue
        if console.get("stderr") is not None:
            sys.stderr.buffer.write(base64.b64decode(console["stderr"]))
        if console.get("stdout") is not None:
            sys.stdout.buffer.write(base64.b64decode(console["stdout"]))


def show_node_notices_as_text() -> None:
    """Put the sink in place of jsii's (looked up when the Node process starts)."""
    from jsii._kernel.providers import process

    process.stderr_sink = stderr_sink  # type: ignore[assignment]
