"""`python -m handlers.copy_large` that says when it has saved a checkpoint and, once one
holds PAUSE_AT_PARTS parts, waits a minute before its next pass, so a test can SIGKILL it
between passes (no part in flight: a pass ends by waiting for its parts, then saves). With
PAUSE_AFTER_COMPLETE it says `completed` once CompleteMultipartUpload has answered and waits a
minute before the upload's mark is deleted, so a test can SIGKILL it in between. The entry
point and the store are the real ones; only the prints and the waits are added."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from ferry.engine.parts import multipart
from ferry.pipeline.ledger.dynamodb_checkpoints import DynamoCheckpointStore
from handlers import copy_large

PAUSE_AT = int(os.environ.get("PAUSE_AT_PARTS", "0"))
PAUSE_AFTER_COMPLETE = bool(os.environ.get("PAUSE_AFTER_COMPLETE"))
_save = DynamoCheckpointStore.save
_delete_mark = multipart.delete_mark


def save_and_pause(self: DynamoCheckpointStore, checkpoint: Any) -> None:
    _save(self, checkpoint)
    print(f"checkpoint {len(checkpoint.parts)} of {len(checkpoint.part_bounds)}", flush=True)
    if PAUSE_AT and len(checkpoint.parts) >= PAUSE_AT:
        time.sleep(60)


def pause_and_delete_mark(*args: Any, **kwargs: Any) -> None:
    """The multipart upload's mark is deleted once its upload has ended (completed here)."""
    print("completed", flush=True)
    time.sleep(60)
    _delete_mark(*args, **kwargs)


if __name__ == "__main__":
    DynamoCheckpointStore.save = save_and_pause  # type: ignore[method-assign]
    if PAUSE_AFTER_COMPLETE:
        multipart.delete_mark = pause_and_delete_mark
    sys.exit(copy_large.main())
