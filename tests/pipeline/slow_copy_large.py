"""`python -m handlers.copy_large` over a slow link: each part request waits SLOW_PART_SECONDS
first, so a copy on a local server runs long enough to be stopped or killed mid-way. The
entry point itself is untouched (the delay is a botocore hook on the engine's clients)."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import ferry.engine.strategies.copier
import ferry.pipeline.services
from ferry.s3.clients import make_client
from handlers import copy_large

DELAY = float(os.environ.get("SLOW_PART_SECONDS", "0.5"))


def _slow(**_: Any) -> None:
    time.sleep(DELAY)


def slow_client(*args: Any, **kwargs: Any) -> Any:
    client = make_client(*args, **kwargs)
    for operation in ("UploadPart", "UploadPartCopy"):
        client.meta.events.register(f"before-send.s3.{operation}", _slow)
    return client


if __name__ == "__main__":
    ferry.engine.strategies.copier.make_client = slow_client  # type: ignore[assignment]
    ferry.pipeline.services.make_client = slow_client  # the clients a worker keeps  # type: ignore[assignment]
    sys.exit(copy_large.main())
