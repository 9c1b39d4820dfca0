"""How many Lambdas the account can run at once, and how many copy workers a job may take.

New accounts get a reduced concurrent-execution quota (the Lambda quotas page: it can be 10),
not the 1,000 most accounts have. A Distributed Map whose MaxConcurrency is above what the
account can run would have its children's invokes throttled (`Lambda.TooManyRequestsException`)
and would take every slot, leaving none for RecordFailure, Finalize or the account's other
functions. `cap_max_concurrency` decides the Map's MaxConcurrency from the account's numbers
(Lambda GetAccountSettings), read by Prepare for each job and by `ferry estimate`.

Why one slot per child: a child runs its Lambda steps one after another (CopyBatch, then
ResumeHandOver or RecordFailedBatch, each on the slot the last one freed), so children at once
bound the job's copy Lambdas. Large objects run on Fargate; only when several of one batch's
large objects fail at once does a child ask for several (short) RecordFailure calls, which the
headroom below and the state machine's throttle retry absorb.

Reserved concurrency counts differently: a function with reserved concurrency draws only on
its reservation, and every reservation in the account is taken out of
UnreservedConcurrentExecutions, the pool the other functions share. AWS refuses a reservation
that would leave fewer than 100 unreserved ("Configuring reserved concurrency", Lambda
developer guide): an account whose quota is 100 or less can reserve nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

DEFAULT_ACCOUNT_CONCURRENCY = 1_000  # most regions' default quota; new accounts get less
MIN_UNRESERVED = 100  # what AWS keeps unreserved, whatever is reserved
# Slots a job's copies leave to the rest of the pool: RecordFailure (when it has no reservation
# of its own), ResumeHandOver of children waiting, Finalize and Prepare of other jobs, the
# replication and schedule starters, and the account's other functions.
HEADROOM_SHARE = 0.10
MIN_HEADROOM = 2


@dataclass(frozen=True)
class AccountConcurrency:
    """Lambda GetAccountSettings' AccountLimit: the quota and its unreserved part."""

    limit: int  # ConcurrentExecutions
    unreserved: int  # UnreservedConcurrentExecutions: the quota less every reservation

    @classmethod
    def from_settings(cls, response: dict[str, Any]) -> AccountConcurrency:
        limit = response["AccountLimit"]
        return cls(int(limit["ConcurrentExecutions"]), int(limit["UnreservedConcurrentExecutions"]))

    def to_dict(self) -> dict[str, int]:
        return {"concurrent_executions": self.limit, "unreserved_concurrent_executions": self.unreserved}


def read_account_concurrency(client: Any) -> AccountConcurrency:
    """Ask Lambda (GetAccountSettings; the caller handles its errors)."""
    return AccountConcurrency.from_settings(client.get_account_settings())


def headroom(pool: int) -> int:
    """Slots of a shared pool the copies leave free: a tenth, at least MIN_HEADROOM."""
    return max(MIN_HEADROOM, math.ceil(pool * HEADROOM_SHARE))


@dataclass(frozen=True)
class ConcurrencyCap:
    """The Map's MaxConcurrency for one job and, when it is below what the settings ask, why."""

    max_concurrency: int
    asked: int
    account: AccountConcurrency | None = None
    note: str | None = None  # set when the cap lowered max_concurrency, or could not be decided

    @property
    def lowered(self) -> bool:
        return self.max_concurrency < self.asked

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"max_concurrency": self.max_concurrency, "asked": self.asked}
        if self.account is not None:
            out["account"] = self.account.to_dict()
        if self.note:
            out["note"] = self.note
        return out


def cap_max_concurrency(asked: int, account: AccountConcurrency, *, copy_reserved: int = 0) -> ConcurrencyCap:
    """The children a job may run at once: `asked` (the max_concurrency setting), lowered to
    what the copy function can run without taking every slot.

    With `copy_reserved` (the CopyBatch function's reserved concurrency) the copies draw on the
    reservation alone, and never on the slots others use: the reservation is the cap. Without
    it they share the account's unreserved pool, of which `headroom` stays free."""
    if copy_reserved > 0:
        if asked <= copy_reserved:
            return ConcurrencyCap(asked, asked, account)
        return ConcurrencyCap(
            copy_reserved,
            asked,
            account,
            f"max_concurrency {asked} lowered to {copy_reserved}: the CopyBatch function's reserved "
            f"concurrency (copy_reserved_concurrency) is {copy_reserved}, and children beyond it would "
            "only wait, throttled",
        )
    pool = account.unreserved
    kept = headroom(pool)
    room = max(1, pool - kept)
    if asked <= room:
        return ConcurrencyCap(asked, asked, account)
    quota = f"the account's Lambda concurrency quota is {account.limit:,}"
    if account.limit < DEFAULT_ACCOUNT_CONCURRENCY:
        quota += f" (reduced: the default is {DEFAULT_ACCOUNT_CONCURRENCY:,})"
    reserved = account.limit - account.unreserved
    if reserved > 0:
        quota += f", {reserved:,} of it reserved by functions"
    return ConcurrencyCap(
        room,
        asked,
        account,
        f"max_concurrency {asked} lowered to {room}: {quota}; the {pool:,} unreserved are shared by "
        f"the copies, RecordFailure, Finalize and the account's other functions, and {pool - room:,} "
        "of them are left free for those (Lambda GetAccountSettings; ask AWS for a higher quota to "
        "run more at once)",
    )


def unknown_account(asked: int, error: str) -> ConcurrencyCap:
    """The account's quota could not be read: the setting is used as it is, and said so."""
    return ConcurrencyCap(
        asked,
        asked,
        None,
        f"max_concurrency {asked} used as configured: the account's Lambda concurrency could not "
        f"be read ({error}); if the account runs fewer Lambdas at once, children wait, throttled",
    )


def reservations_refused(reserved: int, account_limit: int) -> str | None:
    """Why AWS would refuse `reserved` slots of reserved concurrency in an account whose quota
    is `account_limit` (None when the quota leaves room; other functions' reservations count
    too, which only GetAccountSettings' unreserved part knows)."""
    if reserved <= 0 or account_limit - reserved >= MIN_UNRESERVED:
        return None
    return (
        f"reserving {reserved:,} concurrent executions needs a Lambda concurrency quota of at least "
        f"{reserved + MIN_UNRESERVED:,} (AWS keeps {MIN_UNRESERVED} unreserved); this account's is "
        f"{account_limit:,}: set copy_reserved_concurrency and record_failure_reserved_concurrency to 0, "
        "or ask AWS for a higher quota"
    )
