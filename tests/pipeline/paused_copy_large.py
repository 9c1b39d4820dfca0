"""`python -m handlers.copy_large` that says when it has saved a checkpoint and, once one
holds PAUSE_AT_PARTS parts, waits a minute before its next pass, so a test can SIGKILL it
between passes (no part in flight: a pass ends by waiting for its parts, then saves). The
entry point and the store are the real ones; only the print and the wait are added."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from ferry.pipeline.ledger.dynamodb_checkpoints import DynamoCheckpointStore
from handlers import copy_large

PAUSE_AT = int(os.environ.get("PAUSE_AT_PARTS", "0"))
_save = DynamoCheckpointStore.save


def save_and_pause(self: DynamoCheckpointStore, checkpoint: Any) -> None:
    _save(self, checkpoint)
    print(f"checkpoint {len(checkpoint.parts)} of {len(checkpoint.part_bounds)}", flush=True)
    if PAUSE_AT and len(checkpoint.parts) >= PAUSE_AT:
        time.sleep(60)


if __name__ == "__main__":
    DynamoCheckpointStore.save = save_and_pause  # type: ignore[method-assign]
    sys.exit(copy_large.main())
