"""A replication's deletes, run by its starter: the "Object Deleted" events of one drained
batch (the newest event of their key, starter.latest_per_key) handed to
`deletes.apply_deletes` with S3 clients for the replication's two locations and the copy
records on the ledger table.

Nothing is silent: every deletion's outcome is logged with its reason (deleted, kept and why,
failed and why), and the messages of FAILED deletions are returned so the starter reports them
as batch item failures: SQS delivers them again, and after maxReceiveCount receives moves them
to the dead-letter queue, whose alarm then fires. A kept deletion is an answer, not a failure:
its message is done.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ferry.models import Endpoint
from ferry.pipeline.ledger.copy_records import CopyRecords
from ferry.pipeline.ledger.dynamodb import DynamoCopyRecords
from ferry.pipeline.locations import Location
from ferry.pipeline.replication.deletes import (
    DeleteCounts,
    DeleteStatus,
    Deletion,
    Replication,
    apply_deletes,
)
from ferry.s3.clients import make_client

log = logging.getLogger(__name__)

# The session a starter deletes with when it reaches the destination through a role: that role
# holds s3:DeleteObjectVersion for the workers (they remove an unproved copy by its version id),
# the deletes never need it. A session's permissions are the role's intersected with the session
# policy (IAM user guide, "Permissions for AssumeRole"), and an explicit Deny always wins.
NO_VERSION_DELETES = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "*", "Resource": "*"},
            {"Effect": "Deny", "Action": "s3:DeleteObjectVersion", "Resource": "*"},
        ],
    },
    separators=(",", ":"),
)


@dataclass(frozen=True)
class DeleteServices:
    """What apply_deletes needs: a client per side, and where the copy records are."""

    source_client: Any
    destination_client: Any
    record_store: CopyRecords


def endpoint_of(location: Location) -> Endpoint:
    """How to reach a replication's location: its role, region, endpoint or secret (the same
    as the workers' FERRY_LOCATIONS entry for it, config._reached_as_workers), and
    its owner on every request (ExpectedBucketOwner)."""
    return Endpoint(
        endpoint_url=location.endpoint_url,
        region=location.region,
        role_arn=location.role_arn,
        credentials_secret=location.credentials_secret,
        bucket_owners=((location.bucket, location.owner),) if location.owner else (),
    )


def source_client(replication: Any) -> Any:
    """A client for the replication's source, as its workers reach it: the starter lists the
    forms of an event's key there (event_keys.resolve_created)."""
    return make_client(endpoint_of(replication.source))


def delete_services(replication: Any, *, dynamodb: Any, table_name: str) -> DeleteServices:
    """Clients for the two sides; the destination's, when reached through a role, in a session
    that may not delete a version (NO_VERSION_DELETES)."""
    destination = replace(endpoint_of(replication.destination), session_policy=NO_VERSION_DELETES)
    return DeleteServices(
        source_client=make_client(endpoint_of(replication.source)),
        destination_client=make_client(destination),
        record_store=DynamoCopyRecords(dynamodb, table_name),
    )


def run_deletes(
    deletions: Sequence[tuple[str, Deletion]],
    replication: Replication,
    services: Callable[[], DeleteServices],
) -> list[str]:
    """Apply the batch's deletions ((message id, deletion) pairs); returns the message ids of
    those that FAILED. Clients that cannot even be made (a role that cannot be assumed, a
    secret that cannot be read) fail every deletion, with the reason."""
    if not deletions:
        return []
    try:
        made = services()
        outcomes = apply_deletes(
            [d for _, d in deletions],
            source_client=made.source_client,
            destination_client=made.destination_client,
            record_store=made.record_store,
            replication=replication,
        )
    except Exception as error:  # noqa: BLE001 - reported per message below, retried by SQS
        log.error(
            "replication %s: %d deletions not tried: cannot reach s3://%s or s3://%s (%s: %s); their "
            "messages return to the queue",
            replication.name,
            len(deletions),
            replication.source.bucket,
            replication.destination.bucket,
            type(error).__name__,
            error,
        )
        return [message_id for message_id, _ in deletions]
    failed = []
    for (message_id, _), outcome in zip(deletions, outcomes, strict=True):
        level = logging.ERROR if outcome.status == DeleteStatus.FAILED else logging.INFO
        log.log(
            level,
            "replication %s: delete %s: %s",
            replication.name,
            outcome.status,
            json.dumps({**outcome.to_dict(), "message_id": message_id}, sort_keys=True),
        )
        if outcome.status == DeleteStatus.FAILED:
            failed.append(message_id)
    counts = DeleteCounts.of(outcomes)
    log.info("replication %s: deletes %s", replication.name, json.dumps(counts.counts(), sort_keys=True))
    return failed
