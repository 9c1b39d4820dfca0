"""Replication lag: seconds from an S3 event's time to the verified copy of its object.

The replication starter writes the replication's name and the event's time into each
manifest row (`replication`, `event_time`); the workers carry the row unchanged to the copy,
so the lag needs no other lookup. Only `copied` results count: a copy is `copied` only once
verified, and an object found identical already (a redelivered event) was not copied by this
event. CloudWatch computes p50/p99 from the values (EMF metric Ferry/ReplicationLag).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from ferry.models import CopyResult, Status

REPLICATION_FIELD, EVENT_TIME_FIELD = "replication", "event_time"


def replication_lags(
    copies: Iterable[tuple[Mapping[str, Any], CopyResult]], now: dt.datetime | None = None
) -> dict[str, list[float]]:
    """Replication name -> lag seconds of each verified copy whose row came from an event."""
    now = now or dt.datetime.now(dt.UTC)
    lags: dict[str, list[float]] = {}
    for item, result in copies:
        if result.status != Status.COPIED or not isinstance(item, Mapping):
            continue
        name, moment = item.get(REPLICATION_FIELD), parse_event_time(item.get(EVENT_TIME_FIELD))
        if isinstance(name, str) and name and moment is not None:
            lags.setdefault(name, []).append(max(0.0, round((now - moment).total_seconds(), 3)))
    return lags


def parse_event_time(value: Any) -> dt.datetime | None:
    """An event's `time` (ISO 8601, `2021-11-12T00:00:00Z`) in UTC; None when unreadable."""
    if not isinstance(value, str):
        return None
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
