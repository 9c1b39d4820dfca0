"""`ferry` as installed, over a slow link: each part request waits SLOW_PART_SECONDS first
(with SLOW_GETS=1, each GetObject too: a download's ranged GETs, one part each, where a
download otherwise fetches consecutive parts by one GET and so would wait once for all).

Used by the crash test so that a copy on a local server runs long enough to be killed
mid-way; the copy code itself is untouched (the delay is a botocore hook on the clients).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import ferry.cli.commands.copy_command
import ferry.cli.commands.local_copy
import ferry.engine.files.downloads
import ferry.engine.strategies.copier
from ferry.cli.main import main
from ferry.s3.clients import make_client

DELAY = float(os.environ.get("SLOW_PART_SECONDS", "0.25"))


def _slow(**_: Any) -> None:
    time.sleep(DELAY)


def slow_client(*args: Any, **kwargs: Any) -> Any:
    client = make_client(*args, **kwargs)
    operations = ("UploadPart", "UploadPartCopy") + (("GetObject",) if os.environ.get("SLOW_GETS") else ())
    for operation in operations:
        client.meta.events.register(f"before-send.s3.{operation}", _slow)
    return client


if __name__ == "__main__":
    ferry.cli.commands.copy_command.make_client = slow_client  # type: ignore[assignment]
    ferry.cli.commands.local_copy.make_client = slow_client  # type: ignore[assignment]
    ferry.engine.strategies.copier.make_client = slow_client  # type: ignore[assignment]
    if os.environ.get("SLOW_GETS"):
        ferry.engine.files.downloads.RANGE_BYTES = 1  # a run of one part: each part waits
    sys.exit(main(sys.argv[1:]))
