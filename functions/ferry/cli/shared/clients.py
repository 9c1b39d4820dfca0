"""A command's S3 clients, made one way for every command: a client for each side from its
endpoint (sides.endpoints), one client for both sides when they are the same endpoint,
identity and options, and each bucket the command names checked before anything is written
(s3.listing.check_bucket).

A command hands over the function that makes one client (`make`: s3.clients.make_client as
the command imports it), so that one command's clients can be watched or replaced through
that one name.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ferry.models import Endpoint
from ferry.s3.clients import DEFAULT_POOL_SIZE
from ferry.s3.lean_s3 import LEAN_ENV
from ferry.s3.listing import S3Url, check_bucket

MakeClient = Callable[[Endpoint, int], Any]


class SideClients(NamedTuple):
    """The source's client and the destination's: one object when the sides are one endpoint."""

    source: Any
    dest: Any


@dataclass(frozen=True)
class ClientMaker:
    """How a command makes its clients: with `make`, each keeping `pool` connections."""

    make: MakeClient
    pool: int = DEFAULT_POOL_SIZE

    def sides(self, source: Endpoint, destination: Endpoint, *, share: bool = True) -> SideClients:
        """The two sides' clients. One client serves both sides when they are the same endpoint,
        identity and options: a client costs tens of milliseconds to make, a tenth of a small
        copy's start-up. `share=False` makes two all the same, each with its own connections
        (`ferry run` hands its pipeline one a side)."""
        source_client = self.make(source, self.pool)
        dest_client = source_client if share and destination == source else self.make(destination, self.pool)
        return SideClients(source_client, dest_client)

    def checked_sides(self, source: Endpoint, destination: Endpoint, src: S3Url, dst: S3Url) -> SideClients:
        """The two sides' clients (`sides`), SRC's bucket then DST's checked: a bucket that is
        missing or unreachable is refused in one line before any copy or comparison."""
        clients = self.sides(source, destination)
        check_bucket(clients.source, src.bucket, "source")
        check_bucket(clients.dest, dst.bucket, "destination")
        return clients

    def checked(self, endpoint: Endpoint, bucket: str, side: str, region_flag: str | None = None) -> Any:
        """The client of a command's one S3 side (a local folder on the other side, or a
        command of one location), its bucket checked; `region_flag` names the option that sets
        its region in the refusal (see check_bucket)."""
        client = self.make(endpoint, self.pool)
        check_bucket(client, bucket, side, region_flag)
        return client


def one_store(source: Endpoint, destination: Endpoint) -> bool:
    """Whether both sides' requests go to one store (one endpoint URL in one partition),
    whatever identity each side signs with: only then can SRC and DST overlap."""
    return (source.endpoint_url, source.partition) == (destination.endpoint_url, destination.partition)


def copy_pool_size(args: argparse.Namespace) -> int:
    """Connections each side's client keeps for a copy with these options (one per object and
    part in flight: engine.strategies.copier.client_pool_size). With --no-lean-requests, every
    client this process makes from here on, the Copier's too, sends its requests through
    botocore."""
    # The copy engine, imported for a copy only: `ferry check` and `ferry estimate` do without.
    from ferry.engine.strategies.copier import client_pool_size

    if args.no_lean_requests:
        os.environ[LEAN_ENV] = "0"
    return client_pool_size(args.concurrency, args.part_concurrency)
