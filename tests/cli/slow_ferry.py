"""`ferry` as installed, over a slow link: each part request waits SLOW_PART_SECONDS first.

Used by the crash test so that a copy on a local server runs long enough to be killed
mid-way; the copy code itself is untouched (the delay is a botocore hook on the clients).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import ferry.cli.copy_command
import ferry.engine.copier
from ferry.cli.main import main
from ferry.s3.clients import make_client

DELAY = float(os.environ.get("SLOW_PART_SECONDS", "0.25"))


def _slow(**_: Any) -> None:
    time.sleep(DELAY)


def slow_client(*args: Any, **kwargs: Any) -> Any:
    client = make_client(*args, **kwargs)
    for operation in ("UploadPart", "UploadPartCopy"):
        client.meta.events.register(f"before-send.s3.{operation}", _slow)
    return client


if __name__ == "__main__":
    ferry.cli.copy_command.make_client = slow_client  # type: ignore[assignment]
    ferry.engine.copier.make_client = slow_client  # type: ignore[assignment]
    sys.exit(main(sys.argv[1:]))
