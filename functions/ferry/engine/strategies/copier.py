"""The copy engine's public face: copy one object, or a batch of them before a deadline.

Every door calls this: the CLI, the Lambda batch worker and the Fargate worker. It never
raises for an object: each one comes back copied, skipped, failed or pending, with a reason.
"""

from __future__ import annotations

import itertools
import logging
import os
import statistics
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ferry.engine.compare.dest_listing import DestinationIndex, Listed
from ferry.engine.compare.skip import already_as_asked, identical_reason, settled_by_listing, sized_only
from ferry.engine.proofs.source import SourceInfo, confirm, from_listed_size, from_listing, inspect
from ferry.engine.records.checkpoints import CheckpointStore
from ferry.engine.run.bandwidth import Bandwidth, metered
from ferry.engine.run.budget import ByteBudget
from ferry.engine.run.context import TransferContext
from ferry.engine.run.deadlines import due, stopping
from ferry.engine.run.degradations import SERVER_SIDE_NOT_IMPLEMENTED, NotImplementedByServer
from ferry.engine.run.outcome import WOULD_COPY, Outcome
from ferry.engine.strategies.archive import archived_outcome
from ferry.engine.strategies.server_side import ServerSideRefusedObject, server_side_copy
from ferry.engine.strategies.streaming import single_put_limit, stream_copy
from ferry.errors import CopySourceDenied, FerryError, ListingWasStale
from ferry.limits import (
    DEFAULT_COPY_PART_SIZE,
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_STREAM_PART_SIZE,
    MAX_OBJECT_SIZE,
    MAX_PART_SIZE,
    MAX_REPRODUCED_STREAM_PART,
    MAX_SINGLE_COPY,
    MiB,
    choose_part_size,
    format_size,
)
from ferry.models import (
    CopyPolicy,
    CopyResult,
    Endpoint,
    Mode,
    SourceObject,
    Status,
    Target,
    check_server_side_reach,
)
from ferry.s3.clients import make_client
from ferry.s3.listing import FIRST_PAGE

log = logging.getLogger(__name__)

# Bytes per second assumed for one request that cannot be checkpointed (a CopyObject of up to
# 5 GiB, a PutObject, one part) when judging whether it can finish before a deadline. A
# cross-region CopyObject can run at tens of MiB/s, not the hundreds seen within a region: too
# optimistic a rate starts a copy that the Lambda's timeout then kills (Sandbox.Timedout).
DEFAULT_SINGLE_REQUEST_RATE = 16 * MiB
Pair = tuple[SourceObject, Target]
WINDOW = 1000  # pairs read (and destination keys listed) at a time
# A command's first window: its listing's first page (s3.listing.FIRST_PAGE), so that copying
# starts once that is read, while the next window is read ahead.
FIRST_WINDOW = FIRST_PAGE


def default_concurrency(sizes: Sequence[int | None], cpus: int | None = None) -> int:
    """Small objects are bound by requests per second, large ones by bandwidth and memory.

    Many threads hide request latency for small objects; large objects get their parallelism
    from parts instead, so fewer of them run at once.
    """
    cpus = cpus or os.cpu_count() or 2
    known = [s for s in sizes if s is not None]
    if known and statistics.median(known) > 8 * MiB:
        return max(2, min(16, 2 * cpus))
    return max(8, min(128, 32 * cpus))


def default_part_concurrency() -> int:
    return max(4, min(64, 8 * (os.cpu_count() or 2)))


def client_pool_size(concurrency: int | None, part_concurrency: int | None) -> int:
    """Connections a side's client keeps for a Copier: one per object and part in flight. A
    caller that makes the clients first (to check the buckets) hands the same ones over, so
    the run pays for one client per side, not two."""
    return (concurrency or 128) + (part_concurrency or default_part_concurrency())


class Copier:
    """Copies objects from one side to another under one policy.

    `concurrency` is how many objects are copied at once; `part_concurrency` how many parts
    run at once across all of them; `memory_limit` caps object bytes held in memory by
    streaming copies (part size x parts in flight). `reusable_kms_keys` names the KMS keys the
    destination identity may encrypt with, where the caller knows them: an SSE-KMS source keeps
    its key only if it is one of them (see TransferContext.reusable_source_key). `on_part` is
    told (target, bytes) each time a part of a multipart copy lands, so a caller can show bytes
    moving before a large object completes; the object's result still reports all its bytes.
    """

    def __init__(
        self,
        source: Endpoint,
        destination: Endpoint,
        policy: CopyPolicy | None = None,
        *,
        concurrency: int | None = None,
        part_concurrency: int | None = None,
        memory_limit: int = DEFAULT_MEMORY_LIMIT,
        checkpoints: CheckpointStore | None = None,
        source_client: Any = None,
        dest_client: Any = None,
        reusable_kms_keys: Collection[str] | None = None,
        single_request_rate: int | None = DEFAULT_SINGLE_REQUEST_RATE,
        job_id: str | None = None,
        on_part: Callable[[Target, int], None] | None = None,
        bandwidth: Bandwidth | None = None,
    ) -> None:
        # None: no time limit on one request (a Fargate task, whose deadlines only mark where
        # to checkpoint): an object is started whatever its longest request.
        if single_request_rate is not None and single_request_rate <= 0:
            raise ValueError(
                f"single_request_rate must be positive bytes per second, not {single_request_rate}"
            )
        self.policy = policy or CopyPolicy()
        check_server_side_reach(self.policy.mode, source, destination)
        self.single_request_rate = single_request_rate
        self.concurrency = concurrency
        self.part_concurrency = part_concurrency or default_part_concurrency()
        pool = client_pool_size(concurrency, self.part_concurrency)
        self._executor = ThreadPoolExecutor(self.part_concurrency, thread_name_prefix="ferry-part")
        self.ctx = TransferContext(
            source=source,
            destination=destination,
            # Every object byte either client moves passes the run's one limiter, if any.
            source_client=metered(source_client or make_client(source, pool), bandwidth),
            dest_client=metered(dest_client or make_client(destination, pool), bandwidth),
            policy=self.policy,
            part_executor=self._executor,
            part_concurrency=self.part_concurrency,
            memory=ByteBudget(memory_limit),
            checkpoints=checkpoints,
            reusable_kms_keys=frozenset(reusable_kms_keys) if reusable_kms_keys is not None else None,
            job_id=job_id,
            on_part=on_part,
        )
        self._server_side_denied = threading.Event()
        self._server_side_off: str | None = None  # why server-side copies stopped, if they did

    def __enter__(self) -> Copier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    @property
    def degradations(self) -> list[str]:
        """What this run learned an endpoint lacks, and did instead: each sentence once."""
        return self.ctx.degradations.list()

    @property
    def memory_peak(self) -> int:
        return self.ctx.memory.peak

    # -- one object ---------------------------------------------------------------------------

    def copy(
        self,
        obj: SourceObject,
        target: Target,
        deadline: float | None = None,
        *,
        listed: Listed | str | None = None,
    ) -> CopyResult:
        """Copy one object. `listed` is what a destination listing showed for the target, if
        one was made (copy_batch makes them), so skip-existing need not HEAD it."""
        started = time.monotonic()
        result = CopyResult(
            source_key=obj.key,
            dest_key=target.key,
            status=Status.FAILED,
            source_bucket=obj.bucket,
            dest_bucket=target.bucket,
        )
        try:
            outcome, info = self._copy(obj, target, deadline, listed)
            result.status = outcome.status
            result.strategy = outcome.strategy
            result.reason = outcome.reason
            result.verified_by = outcome.verified_by
            result.checksum = outcome.checksum
            result.version_id = outcome.version_id
            result.parts_resumed = outcome.parts_resumed
            result.handed_over = outcome.handed_over
            result.bytes = info.size if info else 0
            result.note = _join(outcome.note, _encryption_note(info, outcome))
        except FerryError as error:
            result.reason = str(error)
        except Exception as error:  # nothing lost: an unexpected fault fails this object, not the batch
            log.error(
                "unexpected %s copying s3://%s/%s: %s", type(error).__name__, obj.bucket, obj.key, error
            )
            log.debug("traceback", exc_info=True)
            result.reason = f"unexpected {type(error).__name__}: {error}"
        result.seconds = round(time.monotonic() - started, 3)
        return result

    def _copy(
        self, obj: SourceObject, target: Target, deadline: float | None, listed: Listed | str | None
    ) -> tuple[Outcome, SourceInfo | None]:
        server_side = self._use_server_side()
        info = self._evidence(obj, target, server_side)
        try:
            return self._decide(info, target, deadline, listed, server_side), info
        except ListingWasStale:
            # The listing was out of date: skip, archive and deadline are decided again from
            # the HEAD the provisional copy has just taken.
            return self._decide(info, target, deadline, listed, server_side), info

    def _decide(
        self,
        info: SourceInfo,
        target: Target,
        deadline: float | None,
        listed: Listed | str | None,
        server_side: bool,
    ) -> Outcome:
        """Skip, restore, hand over, or copy: one object's course, from its evidence."""
        if info.size > MAX_OBJECT_SIZE:
            return Outcome(
                Status.FAILED, "none", reason=f"object of {format_size(info.size)} exceeds S3's 5 TiB"
            )
        if self.policy.skip_existing and self._in_place(info.obj, target):
            confirm(self.ctx.source_client, info)
            reason = already_as_asked(self.ctx.source_client, info, self.policy)
            if reason:
                return Outcome(Status.SKIPPED, "none", reason=reason)
        elif self.policy.skip_existing:
            if not settled_by_listing(listed, info, self.policy.compare):
                confirm(self.ctx.source_client, info)  # the checksums decide: they need the HEAD
            reason = identical_reason(self.ctx.dest_client, info, target, self.policy.compare, listed)
            if reason:
                return Outcome(Status.SKIPPED, "none", reason=reason)
        if info.listed_for_skip:
            confirm(self.ctx.source_client, info)  # a copy needs the HEAD the skip did without
        archived = archived_outcome(self.ctx.source_client, info, self.policy)
        if archived is not None:
            return archived
        if due(deadline, self._seconds_needed(info, server_side)):
            # One request cannot be interrupted: start the object only if its longest can finish.
            return Outcome(
                Status.PENDING,
                "none",
                reason="not started: would not finish before the deadline",
                handed_over=True,
            )
        if self.policy.dry_run:
            how = "server-side" if server_side else "stream"
            return Outcome(Status.PENDING, how, reason=f"{WOULD_COPY} ({how})")
        if not server_side:
            outcome = stream_copy(self.ctx, info, target, deadline)
            if self.policy.mode == Mode.AUTO:
                outcome.note = _join(self._stream_note(), outcome.note)
            return outcome
        try:
            return server_side_copy(self.ctx, info, target, deadline)
        except NotImplementedByServer as error:
            if self.policy.mode != Mode.AUTO:
                raise
            # The endpoint lacks this copy: stream it, and stop asking the endpoint for
            # server-side copies for the rest of the run; said once, in the run's degradations.
            self._server_side_off = "not-implemented"
            self._server_side_denied.set()
            self.ctx.degradations.add(_not_implemented_sentence(error))
            return stream_copy(self.ctx, info, target, deadline)
        except ServerSideRefusedObject as error:
            if self.policy.mode != Mode.AUTO:
                raise
            outcome = stream_copy(self.ctx, info, target, deadline)
            outcome.note = _join(
                f"server-side copy refused for this object ({error}); streamed instead", outcome.note
            )
            return outcome
        except CopySourceDenied as error:
            if self.policy.mode != Mode.AUTO:
                raise
            # The destination identity cannot read the source: stream it, and once a stream
            # has worked, stop asking for server-side copies that will be denied too.
            outcome = stream_copy(self.ctx, info, target, deadline)
            if outcome.status == Status.COPIED:
                self._server_side_denied.set()
            outcome.note = f"server-side copy was denied ({error}); streamed instead"
            return outcome

    def _in_place(self, obj: SourceObject, target: Target) -> bool:
        return self.ctx.onto_itself(obj, target)

    def _evidence(self, obj: SourceObject, target: Target, server_side: bool) -> SourceInfo:
        """The listing's word where one request can complete it (a CopyObject, or one GET of
        an object below the multipart threshold); a HEAD otherwise, and always for a copy onto
        itself (a storage class or encryption change), which must not be copied twice."""
        small = obj.size is not None and obj.size <= self.policy.multipart_threshold
        in_place = (obj.bucket, obj.key) == (target.bucket, target.key) and server_side
        if in_place:
            return inspect(self.ctx.source_client, obj)
        if (server_side and not self.ctx.listing_copies_off.is_set()) or (not server_side and small):
            provisional = from_listing(obj, self.policy)
            if provisional is not None:
                return provisional
        return self._listed_for_skip(obj) or inspect(self.ctx.source_client, obj)

    def _listed_for_skip(self, obj: SourceObject) -> SourceInfo | None:
        """With --size-only or --ignore-existing, the listing's word for any object whose size
        it gave: the skip needs no more (confirmed in _decide if the object is copied)."""
        if not self._listed_size_decides():
            return None
        provisional = from_listed_size(obj)
        if provisional is not None:
            provisional.listed_for_skip = True
        return provisional

    def _listed_size_decides(self) -> bool:
        """--size-only and --ignore-existing: the listed size settles the skip, whatever the object."""
        return self.policy.skip_existing and sized_only(self.policy.compare)

    def _seconds_needed(self, info: SourceInfo, server_side: bool) -> float:
        if self.single_request_rate is None:
            return 0.0
        return _seconds_needed(self._longest_request(info, server_side), self.single_request_rate)

    def _longest_request(self, info: SourceInfo, server_side: bool) -> int:
        """Bytes moved by the longest single request of this copy: a CopyObject of up to 5 GiB
        server-side; for a stream above the multipart threshold, one part (checkpointed after)."""
        if server_side:
            return info.size if info.size <= MAX_SINGLE_COPY else self._largest_copy_part(info)
        if info.size <= single_put_limit(self.ctx, info):
            return min(info.size, MAX_SINGLE_COPY)
        if self.policy.part_size is None and info.is_multipart:
            return min(info.size, MAX_REPRODUCED_STREAM_PART)  # the source's own layout, if kept
        return choose_part_size(info.size, self.policy.part_size or DEFAULT_STREAM_PART_SIZE)

    def _largest_copy_part(self, info: SourceInfo) -> int:
        """The largest UploadPartCopy of a server-side copy above 5 GiB (each part is
        checkpointed as it lands): the source's own parts where its layout may be reproduced
        (n parts of which n-1 are whole are each at most size/(n-1)), else the planned size."""
        planned = choose_part_size(info.size, self.policy.part_size or DEFAULT_COPY_PART_SIZE)
        count = info.parts_count or 0
        if self.policy.part_size is None and count > 1:
            return min(max(planned, -(-info.size // (count - 1))), MAX_PART_SIZE)
        return planned

    def _use_server_side(self) -> bool:
        if self.policy.mode == Mode.SERVER_SIDE:
            return True
        if self.policy.mode == Mode.STREAM:
            return False
        return self._one_identity() and not self._server_side_denied.is_set()

    def _one_identity(self) -> bool:
        """A server-side copy is one request, signed by the destination's identity, that reads
        the source: only possible within one endpoint and partition, and only known to be
        allowed when one identity reaches both sides. Two roles (or profiles, or secrets) mean
        the destination's may not read the source: auto mode streams (GET as the source's
        identity, PUT as the destination's)."""
        source, destination = self.ctx.source, self.ctx.destination
        return source.identity == destination.identity and source.partition == destination.partition

    def _stream_note(self) -> str | None:
        if self._server_side_off == "not-implemented":
            return None  # said once, in the run's degradations
        if self._server_side_denied.is_set():
            return "streamed: an earlier server-side copy was denied to the destination identity"
        if self.ctx.source.endpoint_url != self.ctx.destination.endpoint_url or (
            self.ctx.source.partition != self.ctx.destination.partition
        ):
            return "streamed: source and destination are different endpoints or partitions"
        return (
            "streamed: source and destination are reached by different identities (roles, profiles or keys)"
        )

    # -- many objects -------------------------------------------------------------------------

    def _destination_index(self) -> DestinationIndex | None:
        """With skip-existing, the destination bucket is listed a window of keys at a time
        (dest_listing); a destination that is no bucket (a local folder) is looked at per file."""
        return DestinationIndex(self.ctx.dest_client) if self.policy.skip_existing else None

    def copy_batch(
        self,
        pairs: Iterable[Pair],
        deadline: float | None = None,
        on_result: Callable[[CopyResult], None] | None = None,
        *,
        collect: bool = True,
        first_window: int = WINDOW,
    ) -> list[CopyResult]:
        """Copy all pairs; objects not started before the deadline come back `pending`.

        Pairs are read lazily, a window of WINDOW at a time, one window ahead, with a bounded
        number in flight, so a listing of millions of keys streams through. With
        skip-existing, each window's destination keys are listed once (dest_listing) instead
        of a HEAD each. Results come back in input order when `collect` is set. If reading the
        pairs fails, every pair already read is still copied and reported before the error is
        raised. `first_window`: the pairs read before the first copy starts (FIRST_WINDOW for a
        command, whose first byte waits on its listing; a worker's batch, already in memory,
        lists its destination once for the whole window).
        """
        reader = _WindowReader(iter(pairs), self._destination_index(), deadline)
        results: dict[int, CopyResult] = {}

        def copy_one(position: int, obj: SourceObject, target: Target, listed: Listed | str | None) -> None:
            if due(deadline):
                result = _not_started(obj, target)
            else:
                result = self.copy(obj, target, deadline, listed=listed)
            if collect:
                results[position] = result
            if on_result:
                on_result(result)

        with ThreadPoolExecutor(1, thread_name_prefix="ferry-read") as read_ahead:
            first = reader.next_window(first_window)
            workers = self.concurrency or default_concurrency([obj.size for obj, _ in first.pairs])
            if (
                not self.concurrency
                and len(first.pairs) >= first_window
                and workers < default_concurrency([])
            ):
                # Large objects' few threads, judged on a short first window: judged on a whole
                # window instead, as before, so that small objects after them are not left few.
                first = first.joined(reader.next_window(WINDOW - len(first.pairs)))
                workers = default_concurrency([obj.size for obj, _ in first.pairs])
            feed = _Feed(first, reader, read_ahead)
            # No more threads than objects, where the first window holds them all.
            known = len(first.pairs) if len(first.pairs) < first_window else workers
            threads = [
                threading.Thread(target=feed.work, args=(copy_one,), name=f"ferry-object-{n}", daemon=True)
                for n in range(min(workers, max(1, known)))
            ]
            for thread in threads:
                thread.start()
            try:
                for thread in threads:
                    thread.join()
            except BaseException as interrupted:  # Ctrl-C: start no more; those in flight finish
                feed.stop(interrupted)
                raise
        if feed.failure is not None:
            raise feed.failure
        if feed.window.error is not None:
            raise feed.window.error
        return [results[i] for i in sorted(results)]


class _Feed:
    """Hands the pairs out to long-lived worker threads, one at a time, in input order.

    Each worker takes its next pair under one lock: a pair costs a lock and a list index,
    where a task per object (submit, Future, semaphore, condition) cost 12 % of the CPU of
    copying small objects. The next window is read ahead on its own thread while this one is
    copied. A worker's unexpected error (in a result callback) stops the feed; the others
    finish the pair they hold and the error is raised to the caller.
    """

    def __init__(self, first: _Window, reader: _WindowReader, read_ahead: ThreadPoolExecutor) -> None:
        self.window = first
        self._reader = reader
        self._read_ahead = read_ahead
        self._upcoming: Future[_Window] | None = self._read_next(first)
        self._next = 0
        self._position = 0
        self._lock = threading.Lock()
        self.failure: BaseException | None = None

    def _read_next(self, window: _Window) -> Future[_Window] | None:
        if window.error is not None or not window.pairs:
            return None
        return self._read_ahead.submit(self._reader.next_window)

    def take(self) -> tuple[int, Pair, Listed | str | None] | None:
        with self._lock:
            while self.failure is None:
                window = self.window
                if self._next < len(window.pairs):
                    pair = window.pairs[self._next]
                    self._next += 1
                    self._position += 1
                    return self._position - 1, pair, window.known.get(pair[1])
                if self._upcoming is None:
                    return None
                self.window, self._next = self._upcoming.result(), 0
                self._upcoming = self._read_next(self.window)
            return None

    def work(self, copy_one: Callable[[int, SourceObject, Target, Listed | str | None], None]) -> None:
        try:
            while (item := self.take()) is not None:
                position, (obj, target), listed = item
                copy_one(position, obj, target, listed)
        except BaseException as error:  # raised again by copy_batch
            self.stop(error)

    def stop(self, error: BaseException) -> None:
        with self._lock:
            self.failure = self.failure or error


@dataclass
class _Window:
    pairs: list[Pair]
    known: dict[Target, Listed | str]
    error: BaseException | None = None

    def joined(self, after: _Window) -> _Window:
        """This window and the one read after it, as one."""
        return _Window(self.pairs + after.pairs, {**self.known, **after.known}, after.error)


class _WindowReader:
    """Reads the pairs a window at a time and lists the window's destination keys.

    Runs on one read-ahead thread, so reading the source listing and the destination listing
    overlaps with copying the window before.
    """

    def __init__(self, pairs: Iterator[Pair], index: DestinationIndex | None, deadline: float | None) -> None:
        self.pairs = pairs
        self.index = index
        self.deadline = deadline

    def next_window(self, size: int = WINDOW) -> _Window:
        window = _Window([], {})
        try:
            for pair in itertools.islice(self.pairs, size):
                window.pairs.append(pair)
        except Exception as error:  # copy what was read; the caller raises after
            window.error = error
        past_deadline = due(self.deadline)
        if self.index is not None and window.pairs and not past_deadline:
            window.known = self.index.window([target for _, target in window.pairs])
        return window


def _seconds_needed(request_bytes: int, rate: int) -> float:
    """A cautious time for one request at `rate` bytes per second (see
    DEFAULT_SINGLE_REQUEST_RATE); multipart copies check the deadline again before each part."""
    return 1.0 + request_bytes / rate


def local_result(
    transfer: Callable[[], tuple[Outcome, int]],
    result: CopyResult,
    *,
    doing: str,
    local_reason: Callable[[OSError], str],
    logger: logging.Logger,
) -> CopyResult:
    """`result`, made failed, filled in by one upload's or download's `transfer` (its outcome
    and bytes): every outcome, failures included, comes back as a result. A local file's error
    is said in `local_reason`'s words; an unexpected one fails this object, not the batch, and
    is logged in the caller's log with what was being done."""
    started = time.monotonic()
    try:
        outcome, result.bytes = transfer()
        result.status, result.strategy, result.reason = outcome.status, outcome.strategy, outcome.reason
        result.verified_by, result.checksum = outcome.verified_by, outcome.checksum
        result.version_id, result.parts_resumed = outcome.version_id, outcome.parts_resumed
    except FerryError as error:
        result.reason = str(error)
    except OSError as error:
        result.reason = local_reason(error)
    except Exception as error:
        logger.error("unexpected %s %s: %s", type(error).__name__, doing, error)
        logger.debug("traceback", exc_info=True)
        result.reason = f"unexpected {type(error).__name__}: {error}"
    result.seconds = round(time.monotonic() - started, 3)
    return result


def _join(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def _encryption_note(info: SourceInfo | None, outcome: Outcome) -> str | None:
    """Say so when an SSE-KMS source landed without KMS (the destination bucket's default)."""
    if info is None or outcome.status != Status.COPIED or not (info.encryption or "").startswith("aws:kms"):
        return None
    if outcome.encryption is None or outcome.encryption.startswith("aws:kms"):
        return None
    return f"the source is SSE-KMS; the destination bucket's default ({outcome.encryption}) applied: pass --kms-key-id to keep SSE-KMS"


def _not_implemented_sentence(error: NotImplementedByServer) -> str:
    cause = error.__cause__
    response = getattr(cause, "response", {}) if cause is not None else {}
    code = response.get("Error", {}).get("Code", "NotImplemented")
    message = response.get("Error", {}).get("Message", "") or "not implemented"
    return SERVER_SIDE_NOT_IMPLEMENTED.format(code=code, message=message)


def _not_started(obj: SourceObject, target: Target) -> CopyResult:
    return CopyResult(
        source_key=obj.key,
        dest_key=target.key,
        status=Status.PENDING,
        reason="not started: interrupted" if stopping() else "not started: deadline reached",
        source_bucket=obj.bucket,
        dest_bucket=target.bucket,
        handed_over=True,
    )
