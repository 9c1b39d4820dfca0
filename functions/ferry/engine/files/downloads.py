"""Downloading S3 objects to local files, verified, in bounded memory whatever their size.

An object up to the multipart threshold, in one part, takes one GET (ChecksumMode=ENABLED, so
its stored checksum comes with it), streamed into a temporary file beside the final name a
chunk at a time, its checksum computed from the chunks as they are written. A larger one, or
one in parts, is fetched by ranged GETs, several at once, each written in place at its offset
(`os.pwrite`) into the temporary file; memory holds one chunk per GET in flight (granted by
the memory budget), never a part. Every GET is pinned to the ETag first seen (If-Match): an
object replaced mid-download fails instead of mixing two versions.

Proof (local_proof.py): the object's full-object checksum, combined from the parts' CRCs; or
its COMPOSITE checksum or `-N` ETag, over its own parts (the download then uses its layout);
or its MD5 ETag, taken over the file in order. Only a proved file is renamed into place, with
the object's LastModified as its modification time (so `--compare size-mtime` skips it next
time); anything else removes the temporary file and fails with the reason. An object nothing
can prove (no checksum, an ETag that is no MD5) fails before a byte is written.

Resume: beside the temporary file, a record names the object and the part plan, then each part
written. A run killed mid-download leaves both; the next run, if the object (ETag, size,
version) and plan are the same, checks each recorded part against the bytes in the file and
fetches only the rest. A download that fails on reading the source keeps them too.
"""

from __future__ import annotations

import calendar
import datetime as dt
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from ferry.engine.compare.dest_listing import DestinationIndex, Listed
from ferry.engine.compare.skip import weak_verdict
from ferry.engine.parts.runner import Failures, run_parts
from ferry.engine.proofs import checksums
from ferry.engine.proofs.in_order import Cancelled
from ferry.engine.proofs.local_proof import CHUNK, Proof, compute, proof_for, unprovable
from ferry.engine.proofs.source import SourceInfo, confirm, from_listing, inspect
from ferry.engine.run.outcome import WOULD_COPY, Outcome
from ferry.engine.strategies.archive import archived_outcome
from ferry.engine.strategies.copier import Copier, local_result
from ferry.engine.strategies.streaming import READ_ATTEMPTS, READ_ERRORS, STALE, RangeIgnored, check_range
from ferry.errors import CopyFailed, TruncatedBody, VerificationFailed, describe, error_code
from ferry.limits import DEFAULT_STREAM_PART_SIZE, MiB, Part, choose_part_size, uniform_parts
from ferry.local.paths import LocalTarget
from ferry.local.reading import LocalReader
from ferry.local.writing import PartialFile, open_existing
from ferry.models import CopyPolicy, CopyResult, Endpoint, SourceObject, Status, Strategy

log = logging.getLogger(__name__)
RECORD_VERSION = 1
# A range whose body breaks is asked again from where it broke: as long as each answer brings
# bytes, up to this many times; READ_ATTEMPTS answers in a row that bring none end it.
MAX_RANGE_READS = 4 * READ_ATTEMPTS
# Consecutive parts of a download's plan are fetched by one ranged GET of up to this many bytes
# (s5cmd's are 50 MiB): a 2 GiB object in the AWS CLI's 8 MiB parts takes 32 GETs, not 256. Each
# part's value is still taken at its own end, so proofs by parts and the resume record stay per
# part; memory holds one chunk per GET in flight, whatever its length.
RANGE_BYTES = 64 * MiB


class _Unproved(CopyFailed):
    """The bytes written are not the object's: the temporary file goes."""


class Downloader(Copier):
    """Copies S3 objects to local files (ferry.local.paths.LocalTarget), a batch at a time."""

    def __init__(
        self, source: Endpoint, policy: CopyPolicy | None = None, *, source_client: Any = None, **options: Any
    ) -> None:
        # One side is S3: the engine's context holds its client as both.
        super().__init__(
            source, source, policy, source_client=source_client, dest_client=source_client, **options
        )

    def _destination_index(self) -> DestinationIndex | None:
        return None  # a file is looked at where it is, when its turn comes

    def copy(
        self,
        obj: SourceObject,
        target: LocalTarget,  # type: ignore[override]
        deadline: float | None = None,
        *,
        listed: Listed | str | None = None,
    ) -> CopyResult:
        """Download one object; every outcome, failures included, comes back as a result."""
        return local_result(
            lambda: self._download(obj, target),
            CopyResult(
                source_key=obj.key, dest_key=target.path, status=Status.FAILED, source_bucket=obj.bucket
            ),
            doing=f"downloading s3://{obj.bucket}/{obj.key}",
            local_reason=lambda error: _local_reason(error, target),
            logger=log,
        )

    def _download(self, obj: SourceObject, target: LocalTarget) -> tuple[Outcome, int]:
        if target.problem is not None:
            return Outcome(target.problem_status, "none", reason=target.problem), 0
        info = self._evidence(obj)
        if self.policy.skip_existing:
            reason = self._identical(info, target)
            if reason is not None:
                return Outcome(Status.SKIPPED, "none", reason=reason), info.size
        else:
            _refuse_non_file(target)
        if info.listed_for_skip:
            confirm(self.ctx.source_client, info)  # a download needs the HEAD the skip did without
        archived = archived_outcome(self.ctx.source_client, info, self.policy)
        if archived is not None:
            return archived, info.size
        if self.policy.dry_run:
            return Outcome(Status.PENDING, Strategy.DOWNLOAD, reason=f"{WOULD_COPY} (download)"), info.size
        if info.size <= self.policy.multipart_threshold and not info.is_multipart:
            try:
                return self._whole(info, target), info.size
            except CopyFailed as failure:
                if not (info.provisional and error_code(failure.__cause__ or failure) in STALE):
                    raise
                info = inspect(self.ctx.source_client, obj)  # changed since the listing: decide again
                return self._download_confirmed(info, target), info.size
        return self._download_confirmed(info, target), info.size

    def _download_confirmed(self, info: SourceInfo, target: LocalTarget) -> Outcome:
        confirm(self.ctx.source_client, info)
        if info.size <= self.policy.multipart_threshold and not info.is_multipart:
            return self._whole(info, target)
        return self._in_parts(info, target)

    def _evidence(self, obj: SourceObject) -> SourceInfo:
        """The listing's word for a small plain object (its GET brings the rest), or for any
        object whose listed size settles the skip (confirmed in _download if it is fetched);
        else a HEAD."""
        small = obj.size is not None and obj.size <= self.policy.multipart_threshold
        provisional = from_listing(obj, self.policy) if small else None
        if provisional is None:
            provisional = self._listed_for_skip(obj)
        return provisional if provisional is not None else inspect(self.ctx.source_client, obj)

    # -- is it there already? -----------------------------------------------------------------

    def _identical(self, info: SourceInfo, target: LocalTarget) -> str | None:
        """Why the file already at the target can stay, or None to download it."""
        reader = open_existing(target)
        if reader is None:
            return None
        with reader:
            decided, reason = weak_verdict(
                self.policy.compare, reader.size, info.size, lambda: _file_not_older(info, reader.mtime_ns)
            )
            if decided:
                return reason
            confirm(self.ctx.source_client, info)
            proof = proof_for(self.ctx.source_client, info)
            if proof is not None and compute(proof, reader.read_at, reader.size) == proof.expected:
                return proof.identical_reason()
        return None

    # -- one GET --------------------------------------------------------------------------------

    def _whole(self, info: SourceInfo, target: LocalTarget) -> Outcome:
        """One GET, streamed into the temporary file; retried whole if the body breaks."""
        granted = min(max(info.size, 1), CHUNK)  # one chunk in memory at a time, as a range holds
        self.ctx.memory.acquire(granted)
        try:
            partial = PartialFile.open(target, info.size, resume=False)
            try:
                proof, value = self._fetch_whole(info, partial)
                proof.check(value, "the bytes written")
                partial.finish(_modified_ns(info))
            except BaseException:
                partial.discard()
                raise
        finally:
            self.ctx.memory.release(granted)
        return _proved(Strategy.DOWNLOAD, proof, value, info)

    def _fetch_whole(self, info: SourceInfo, partial: PartialFile) -> tuple[Proof, str]:
        last: BaseException | None = None
        for attempt in range(READ_ATTEMPTS):
            try:
                response = self._get(info, None)
            except READ_ERRORS as error:
                last = error
                _pause(attempt)
                continue
            if info.provisional:
                info.confirm(response)
            proof = proof_for(self.ctx.source_client, info)
            if proof is None:
                response["Body"].close()
                raise _Unproved(unprovable(info))
            running = checksums.Running(proof.algorithm)
            try:
                _stream_whole(response["Body"], partial, info.size, running)
            except _PartlyRead as broken:
                last = broken.__cause__
                _pause(attempt)
                continue
            return proof, running.value()
        raise CopyFailed(f"reading the source failed {READ_ATTEMPTS} times ({type(last).__name__}: {last})")

    # -- ranged GETs ----------------------------------------------------------------------------

    def _in_parts(self, info: SourceInfo, target: LocalTarget) -> Outcome:
        proof = proof_for(self.ctx.source_client, info)
        if proof is None:
            raise CopyFailed(unprovable(info))
        plan = proof.parts or uniform_parts(
            info.size, choose_part_size(info.size, self.policy.part_size or DEFAULT_STREAM_PART_SIZE)
        )
        partial = PartialFile.open(target, info.size, resume=True)
        try:
            header = _record_header(info, plan, proof)
            done = self._resumed(partial, header, plan, proof)
            resumed = len(done)
            self._fetch_parts(info, partial, [p for p in plan if p.number not in done], proof, done)
            if proof.by_parts:
                value = proof.combine([(done[p.number], p.size) for p in plan])
            else:  # a SHA or MD5 of the whole, in order: over the bytes as written
                value = compute(proof, partial.read_at, info.size)
            try:
                proof.check(value, "the bytes written")
            except VerificationFailed as failure:
                raise _Unproved(str(failure)) from failure
            partial.finish(_modified_ns(info))
        except (_Unproved, RangeIgnored, OSError):
            # the bytes are wrong, no range can be read, or the disk refused them: start again
            partial.discard()
            raise
        except CopyFailed as failure:
            if error_code(failure.__cause__ or failure) in STALE:
                partial.discard()  # another object now: nothing here is worth resuming
            else:
                partial.keep()
            raise
        except BaseException:
            partial.keep()  # a later run resumes it
            raise
        return _proved(Strategy.DOWNLOAD_RANGES, proof, value, info, resumed)

    def _resumed(
        self, partial: PartialFile, header: dict[str, Any], plan: list[Part], proof: Proof
    ) -> dict[int, str]:
        """The parts a crashed run wrote that still hold their recorded values; the record is
        rewritten with only those."""
        record = partial.load_record()
        done: dict[int, str] = {}
        if record is not None and record[0] == header:
            claimed = {int(e["part"]): str(e.get("value", "")) for e in record[1] if "part" in e}
            by_number = {p.number: p for p in plan}
            for number, value in sorted(claimed.items()):
                part = by_number.get(number)
                if part is None:
                    continue
                if not proof.by_parts:
                    done[number] = value  # the whole is checked over the file at the end
                elif compute(Proof("full", proof.algorithm, ""), _shifted(partial, part), part.size) == value:
                    done[number] = value
            if done:
                log.info(
                    "resuming the download of %s: %d of %d parts written",
                    partial.target.path,
                    len(done),
                    len(plan),
                )
        partial.start_record(header, [{"part": n, "value": v} for n, v in sorted(done.items())])
        return done

    def _fetch_parts(
        self, info: SourceInfo, partial: PartialFile, parts: list[Part], proof: Proof, done: dict[int, str]
    ) -> None:
        """Fetch `parts` in parallel on the engine's part threads (runner.run_parts), consecutive
        ones together in runs of RANGE_BYTES (one GET each); each GET holds one chunk's bytes of
        the memory budget while it runs. The first failure stops the rest."""
        failures = Failures()
        lock = threading.Lock()
        algorithm = proof.algorithm if proof.by_parts else None

        def finished(part: Part, value: str) -> None:
            with lock:
                done[part.number] = value
            partial.add_to_record({"part": part.number, "value": value})

        run_parts(
            runs_of(parts),
            lambda run: self._fetch_run(info, partial, run, algorithm, failures, finished),
            pool=self.ctx.part_executor,
            gate=self.ctx.memory,
            grant=lambda run: min(run[-1].end - run[0].start, CHUNK),
            failures=failures,
        )

    def _fetch_run(
        self,
        info: SourceInfo,
        partial: PartialFile,
        run: list[Part],
        algorithm: str | None,
        failures: Failures,
        finished: Callable[[Part, str], None],
    ) -> None:
        """One GET of consecutive parts into the file at their offsets, each part's value taken
        at its own end; a body that breaks is asked again from where it broke (the part's
        running checksum goes on from there). Once another run has failed, this one stops at
        the end of the part it is in, not at the end of its GET (up to RANGE_BYTES)."""

        def finished_unless_stopped(part: Part, value: str) -> None:
            finished(part, value)
            if failures:
                raise Cancelled("stopped: another part failed")

        state = _RunState(run, algorithm, finished_unless_stopped)
        end = run[-1].end
        last: BaseException | None = None
        fruitless = 0  # breaks in a row that brought no byte
        for attempt in range(MAX_RANGE_READS):
            if failures:
                raise Cancelled("stopped: another part failed")
            offset = state.offset
            try:
                response = self._get(info, (offset, end))
                check_range(response, offset, end)
                _stream_run(response["Body"], partial, state, end)
                return
            except READ_ERRORS as error:
                last, fruitless = error, fruitless + 1
            except _PartlyRead as broken:
                fruitless = 0 if broken.offset > offset else fruitless + 1
                last = broken.__cause__
            if fruitless >= READ_ATTEMPTS:
                break
            _pause(min(attempt, fruitless))
        raise CopyFailed(f"reading the source failed {attempt + 1} times ({type(last).__name__}: {last})")

    # -- requests -------------------------------------------------------------------------------

    def _get(self, info: SourceInfo, byte_range: tuple[int, int] | None) -> dict[str, Any]:
        args: dict[str, Any] = {"Bucket": info.obj.bucket, "Key": info.obj.key, "IfMatch": f'"{info.etag}"'}
        if info.version_id and info.version_id != "null":
            args["VersionId"] = info.version_id
        if byte_range is None:
            args["ChecksumMode"] = "ENABLED"
        else:
            args["Range"] = f"bytes={byte_range[0]}-{byte_range[1] - 1}"
        try:
            return self.ctx.source_client.get_object(**args)
        except READ_ERRORS:
            raise
        except Exception as error:
            raise CopyFailed(
                describe(
                    error, side="source", action="s3:GetObject", bucket=info.obj.bucket, key=info.obj.key
                )
            ) from error


class _PartlyRead(Exception):
    """A body broke after `offset`: what came before is written and counted."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset


def _stream_whole(body: Any, partial: PartialFile, size: int, running: checksums.Running) -> None:
    """A whole object's GET into the file: one run of one part, its checksum in `running`."""
    _stream_run(body, partial, _RunState([Part(1, 0, size)], None, lambda _part, _value: None, running), size)


def runs_of(parts: list[Part]) -> list[list[Part]]:
    """The parts to fetch as runs of consecutive parts (a part already written ends a run), each
    of at most RANGE_BYTES (read at each call) unless one part alone is larger."""
    limit = RANGE_BYTES
    runs: list[list[Part]] = []
    for part in parts:
        run = runs[-1] if runs else None
        if run and run[-1].end == part.start and part.end - run[0].start <= limit:
            run.append(part)
        else:
            runs.append([part])
    return runs


class _RunState:
    """Where a run's GET stands: the next byte, the part it falls in and that part's running
    checksum (which a GET asked again after a break goes on with); `running`, the first part's
    if the caller keeps it (a whole object's GET)."""

    def __init__(
        self,
        parts: list[Part],
        algorithm: str | None,
        finished: Callable[[Part, str], None],
        running: checksums.Running | None = None,
    ) -> None:
        self.parts, self.algorithm, self.finished = parts, algorithm, finished
        self.index, self.offset = 0, parts[0].start
        self.running = running or (checksums.Running(algorithm) if algorithm else None)

    def wrote(self, chunk: bytes) -> None:
        if self.running is not None:
            self.running.update(chunk)
        self.offset += len(chunk)
        part = self.parts[self.index]
        if self.offset == part.end:
            self.finished(part, self.running.value() if self.running is not None else "")
            self.index += 1
            self.running = checksums.Running(self.algorithm) if self.algorithm else None


def _stream_run(body: Any, partial: PartialFile, state: _RunState, end: int) -> None:
    """Write the body's bytes from `state.offset` to `end` a chunk at a time, no chunk crossing
    a part's end; a body that breaks or ends short raises _PartlyRead with how far it got."""
    start = state.offset
    try:
        while state.offset < end:
            chunk = body.read(min(CHUNK, state.parts[state.index].end - state.offset))
            if not chunk:
                raise TruncatedBody(f"got {state.offset - start} of {end - start} bytes")
            partial.write_at(state.offset, chunk)
            state.wrote(chunk)
        if body.read(1):  # at the end: also where a checked body compares its checksum
            raise TruncatedBody(f"got more than the {end - start} bytes expected")
    except READ_ERRORS as error:
        raise _PartlyRead(state.offset) from error
    finally:
        body.close()


def _pause(attempt: int) -> None:
    time.sleep(min(8.0, 0.2 * 2**attempt) * random.uniform(0.5, 1.0))


def _record_header(info: SourceInfo, plan: list[Part], proof: Proof) -> dict[str, Any]:
    """What a resumed download must find unchanged: the object, the proof and the plan."""
    return {
        "version": RECORD_VERSION,
        "bucket": info.obj.bucket,
        "key": info.obj.key,
        "version_id": info.version_id,
        "etag": info.etag,
        "size": info.size,
        "proof": [proof.kind, proof.algorithm, proof.expected],
        "parts": [[p.start, p.end] for p in plan],
    }


def _shifted(partial: PartialFile, part: Part) -> Callable[[int, memoryview], None]:
    """`read_at` over one part of the file, from the part's first byte."""

    def read_at(offset: int, view: memoryview) -> None:
        partial.read_at(part.start + offset, view)

    return read_at


def _refuse_non_file(target: LocalTarget) -> None:
    """A folder, a link or a special file at the target's name is never replaced."""
    reader: LocalReader | None = open_existing(target)
    if reader is not None:
        reader.close()


def _file_not_older(info: SourceInfo, mtime_ns: int) -> str | None:
    """To the second: S3 says LastModified in seconds in headers, to the millisecond in some
    listings."""
    modified = info.head.get("LastModified") or info.obj.last_modified
    if modified is not None and mtime_ns // 10**9 >= _nanoseconds(modified) // 10**9:
        return "the file has the same size and is not older"
    return None


def _nanoseconds(value: dt.datetime) -> int:
    return calendar.timegm(value.utctimetuple()) * 1_000_000_000 + value.microsecond * 1000


def _modified_ns(info: SourceInfo) -> int | None:
    modified = info.head.get("LastModified") or info.obj.last_modified
    return _nanoseconds(modified) if isinstance(modified, dt.datetime) else None


def _proved(strategy: str, proof: Proof, value: str, info: SourceInfo, resumed: int = 0) -> Outcome:
    """A download proved by `value` over the bytes written; its checksum said where it is one
    S3 keeps of the object (full or composite), not an MD5 or an ETag."""
    checksum = f"{proof.algorithm}:{value}" if proof.kind in ("full", "composite") else None
    return Outcome(
        Status.COPIED,
        strategy,
        verified_by=proof.verified_by,
        checksum=checksum,
        version_id=info.version_id,
        parts_resumed=resumed,
    )


def _local_reason(error: OSError, target: LocalTarget) -> str:
    """A local error, naming the file and not the temporary one it went through."""
    return f"cannot write {target.path}: {error.strerror or error}"
