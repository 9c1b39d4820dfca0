"""Fargate entry point: copy one large object (`python -m handlers.copy_large`).

The state machine passes the object in the environment (FERRY_JOB_ID, FERRY_BATCH_ID,
FERRY_ITEM). On SIGTERM (a Fargate Spot interruption, or StopTask) the copy stops at its
next checkpoint and the task exits 75, so the state machine's retry resumes it instead of
starting again from byte zero.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

from ferry.pipeline.batches import copy_large_object
from ferry.pipeline.replication.lag import replication_lags

from .runtime import logger, publish_lags, services

EXIT_OK, EXIT_FAILED, EXIT_STOPPED = 0, 1, 75


def pass_seconds() -> float:
    """Seconds per pass (FERRY_LARGE_OBJECT_PASS_SECONDS, default 90): each pass ends at a
    checkpoint and a stop request takes effect there, so a pass plus the parts in flight must
    fit in the task's stopTimeout (120 s, Spot's warning). A SIGKILL mid-pass loses no
    finished part either: the retry resumes the marked upload (engine/records/upload_marks.py)."""
    return float(os.environ.get("FERRY_LARGE_OBJECT_PASS_SECONDS", "90"))


def main() -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    job_id, batch_id = os.environ["FERRY_JOB_ID"], os.environ["FERRY_BATCH_ID"]
    item = json.loads(os.environ["FERRY_ITEM"])
    logger.append_keys(job_id=job_id, batch_id=batch_id)
    try:
        result = copy_large_object(
            job_id,
            batch_id,
            item,
            services(),
            keep_going=lambda: not stop.is_set(),
            pass_seconds=pass_seconds(),
        )
    except Exception:
        logger.exception("large object copy failed; the state machine retries, then records it")
        return EXIT_FAILED
    if result is None:
        logger.warning("stopped at a checkpoint (SIGTERM); a retry resumes from it")
        return EXIT_STOPPED
    logger.info("large object settled", extra={"result": result.to_dict()})
    publish_lags(replication_lags([(item, result)]))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
