"""`ferry` as installed, with every CopyObject waiting SLOW_COPY_SECONDS first, so that a
`ferry run` on a local server lasts long enough to be interrupted mid-way. The run's own code
is untouched: the delay is a botocore hook on the clients it makes.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import ferry.cli.commands.run_command
import ferry.pipeline.batches
from ferry.cli.main import main
from ferry.s3.clients import make_client

DELAY = float(os.environ.get("SLOW_COPY_SECONDS", "0.1"))


def _slow(**_: Any) -> None:
    time.sleep(DELAY)


def slow_client(*args: Any, **kwargs: Any) -> Any:
    client = make_client(*args, **kwargs)
    client.meta.events.register("before-send.s3.CopyObject", _slow)
    return client


if __name__ == "__main__":
    ferry.cli.commands.run_command.make_client = slow_client  # type: ignore[assignment]
    ferry.pipeline.batches.make_client = slow_client  # type: ignore[assignment]
    sys.exit(main(sys.argv[1:]))
