"""Streaming copy: ranged GETs from the source into the destination, through this process.

Used when no single identity can read the source and write the destination (other account,
partition or S3-compatible endpoint). Object data in memory is bounded by the shared byte
budget: a part's buffer is granted before its GET and returned after its UploadPart.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import (
    ConnectionClosedError,
    EndpointConnectionError,
    FlexibleChecksumError,
    IncompleteReadError,
    ReadTimeoutError,
    ResponseStreamingError,
)
from urllib3.exceptions import ProtocolError

from ferry.engine.parts.multipart import MultipartUpload, open_upload
from ferry.engine.parts.resume_parts import part_check, source_part_checksums
from ferry.engine.proofs import checksums
from ferry.engine.proofs.in_order import InOrder
from ferry.engine.proofs.layout_etag import LayoutEtag
from ferry.engine.proofs.source import SourceInfo, confirm, guess_layout, learn_layout
from ferry.engine.proofs.verify import (
    PartProof,
    StreamProof,
    needs_part_md5,
    needs_whole_md5,
    prove_by_etag,
    source_algorithms,
    verify_stream,
    verify_written,
)
from ferry.engine.records.checkpoints import Checkpoint
from ferry.engine.run.budget import SlotsAndBytes
from ferry.engine.run.buffers import request_body
from ferry.engine.run.context import TransferContext
from ferry.engine.run.degradations import is_not_implemented
from ferry.engine.run.outcome import Outcome, written
from ferry.engine.strategies.attributes import new_object_args, tagging_string
from ferry.errors import (
    CopyFailed,
    ListingWasStale,
    TruncatedBody,
    VerificationFailed,
    describe,
    describe_destination,
    error_code,
)
from ferry.limits import (
    DEFAULT_STREAM_PART_SIZE,
    MAX_REPRODUCED_STREAM_PART,
    MAX_SINGLE_COPY,
    Part,
    choose_part_size,
    format_size,
    uniform_parts,
)
from ferry.models import Strategy, Target

log = logging.getLogger(__name__)
READ_ATTEMPTS = 5
# The listed evidence no longer holds: the ETag changed (If-Match failed) or the object was archived.
STALE = ("PreconditionFailed", "412", "InvalidObjectState")
READ_ERRORS = (
    TruncatedBody,
    FlexibleChecksumError,  # botocore found the body unlike the checksum S3 stored: damaged on the way
    ResponseStreamingError,
    IncompleteReadError,
    ReadTimeoutError,
    ConnectionClosedError,
    EndpointConnectionError,
    ProtocolError,
)


READ_CHUNK = 256 * 1024  # bytes copied from the response into the part buffer at a time


class RangeIgnored(CopyFailed):
    """A ranged GET was answered with other bytes than the range: asking again brings the same."""


def check_range(response: Mapping[str, Any], start: int, end: int) -> None:
    """A ranged GET must answer with the range asked for. A server or proxy that ignores Range
    sends the whole object from its first byte, which are no part's bytes but the first's; the
    object fails at once, its body closed unread. A range that is the whole object may come
    back whole, 200 without Content-Range (HTTP lets a server answer so): those are its bytes."""
    got = response.get("ContentRange")
    if got is None and start == 0 and response.get("ContentLength") == end:
        return
    if not str(got or "").startswith(f"bytes {start}-{end - 1}/"):
        response["Body"].close()
        raise RangeIgnored(
            f"the source ignores Range: a GET of bytes {start}-{end - 1} brought "
            f"{got or 'the whole object'}, so the object cannot be read in parts"
        )


def read_into(client: Any, info: SourceInfo, part: Part | None, view: memoryview) -> dict[str, Any]:
    """GET the whole object or one range into `view`, retrying a body that breaks or comes up short.

    botocore retries the request; only reading the body is retried here. `If-Match` pins the
    ETag seen at HEAD (or in the listing), so a source replaced mid-copy fails instead of
    mixing two versions. The body is copied into the (reused) buffer in small chunks, never
    held whole twice. Returns the response's headers: for provisional evidence they are the
    HEAD this copy did not send (with the stored checksum, asked for with ChecksumMode).
    """
    args: dict[str, Any] = {"Bucket": info.obj.bucket, "Key": info.obj.key, "IfMatch": f'"{info.etag}"'}
    args.update(info.version_args())
    if info.provisional:
        args["ChecksumMode"] = "ENABLED"
    expected = info.size
    if part is not None:
        args["Range"] = part.http_range
        expected = part.size
    last_error: BaseException | None = None
    for attempt in range(READ_ATTEMPTS):
        try:
            response = client.get_object(**args)
            if part is not None:
                check_range(response, part.start, part.end)
            body = response["Body"]
            try:
                got = 0
                while got < expected:
                    chunk = body.read(min(READ_CHUNK, expected - got))
                    if not chunk:
                        break
                    view[got : got + len(chunk)] = chunk
                    got += len(chunk)
                if got == expected and body.read(1):  # at the end, also checks Content-Length
                    raise TruncatedBody(f"got more than the {expected} bytes expected")
            finally:
                body.close()
            if got != expected:
                raise TruncatedBody(f"got {got} of {expected} bytes")
            return response
        except READ_ERRORS as error:
            last_error = error
            time.sleep(min(8.0, 0.2 * 2**attempt) * random.uniform(0.5, 1.0))
        except RangeIgnored:
            raise
        except Exception as error:
            raise CopyFailed(
                describe(
                    error, side="source", action="s3:GetObject", bucket=info.obj.bucket, key=info.obj.key
                )
            ) from error
    raise CopyFailed(
        f"reading the source failed {READ_ATTEMPTS} times ({type(last_error).__name__}: {last_error})"
    )


# GetObject's response algorithms in the order botocore (and ferry.lean_s3, which follows it)
# picks the one to check the body against when ChecksumMode is ENABLED.
_CHECKED_ORDER = ("CRC64NVME", "CRC32", "CRC32C", "SHA256", "SHA1")


def checked_by_get(response: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (algorithm, value) a whole-object GET with ChecksumMode=ENABLED was checked against
    as its body was read (a mismatch raises FlexibleChecksumError, and the read is retried):
    those bytes have that checksum, so it is not computed a second time. A part's composite
    value ("-N") is never checked, as in botocore."""
    for algorithm in _CHECKED_ORDER:
        value = response.get(f"Checksum{algorithm}")
        if value and "-" not in value:
            return algorithm, value
    return None


def send_part(
    client: Any, target: Target, upload_id: str, number: int, data: memoryview, algorithm: str, value: str
) -> dict[str, Any]:
    """UploadPart of bytes in memory with their checksum (S3 refuses the part if they differ);
    a refusal names the destination and the action."""
    try:
        return client.upload_part(  # type: ignore[no-any-return]
            Bucket=target.bucket,
            Key=target.key,
            UploadId=upload_id,
            PartNumber=number,
            Body=request_body(data),
            **{f"Checksum{algorithm}": value},
        )
    except Exception as error:
        raise CopyFailed(
            describe_destination(error, "s3:PutObject (UploadPart)", target.bucket, target.key)
        ) from error


def put_whole(
    ctx: TransferContext, target: Target, data: memoryview, algorithm: str, value: str, args: dict[str, Any]
) -> dict[str, Any]:
    """PutObject of bytes in memory with their checksum (S3 refuses the object if they differ);
    a refusal names the destination and the action, or the tags a store would not take."""
    try:
        return ctx.dest_client.put_object(  # type: ignore[no-any-return]
            Bucket=target.bucket,
            Key=target.key,
            Body=request_body(data),
            **{f"Checksum{algorithm}": value},
            **args,
        )
    except Exception as error:
        refused = tags_refused(ctx, error, args, "PutObject")
        if refused is not None:
            raise refused from error
        raise CopyFailed(
            describe(error, side="destination", action="s3:PutObject", bucket=target.bucket, key=target.key)
        ) from error


class OrderedMd5(InOrder):
    """MD5 of a whole object whose parts finish out of order."""

    def __init__(self, first: int = 1) -> None:
        super().__init__(first)
        self._md5 = hashlib.md5()

    def _consume(self, data: bytes | memoryview) -> None:
        self._md5.update(data)

    def hexdigest(self) -> str:
        return self._md5.hexdigest()


def stream_copy(ctx: TransferContext, info: SourceInfo, target: Target, deadline: float | None) -> Outcome:
    if info.provisional and info.size > ctx.policy.multipart_threshold:
        confirm(ctx.source_client, info)  # parts are planned from the HEAD's evidence
    if info.size <= single_put_limit(ctx, info) and not _layout_proves(ctx, info):
        try:
            return _stream_single(ctx, info, target)
        except CopyFailed as failure:
            if not (info.provisional and error_code(failure.__cause__ or failure) in STALE):
                raise
            confirm(ctx.source_client, info)  # changed or archived since the listing: decide again
            raise ListingWasStale(str(failure)) from failure
    algorithm = ctx.upload_algorithm(info)
    args = _new_object_args(ctx, info)
    return _stream_multipart(ctx, info, target, algorithm, args, deadline)


def _new_object_args(ctx: TransferContext, info: SourceInfo) -> dict[str, Any]:
    return new_object_args(info, ctx.policy, ctx.tags_for(info), ctx.reusable_source_key(info))


def tags_refused(
    ctx: TransferContext, error: BaseException, args: dict[str, Any], action: str
) -> CopyFailed | None:
    """The run-level failure for a write with tags that the destination does not implement."""
    if "Tagging" in args and is_not_implemented(error):
        return ctx.refuse_dest_tags(f"{action} with x-amz-tagging answered NotImplemented")
    return None


def check_tags_kept(
    ctx: TransferContext, info: SourceInfo, target: Target, version_id: str | None, args: dict[str, Any]
) -> None:
    """Read a written object's tags back until the destination has once kept them.

    Some stores accept `x-amz-tagging` and keep nothing. Until one read-back finds the tags
    Ferry wrote, each copy with tags is read back (one GetObjectTagging); one that finds them
    missing removes the copy (a re-run would otherwise skip it as identical, tags lost) and
    fails with the run's one sentence. A read-back that is refused proves nothing either way:
    the destination identity may lack s3:GetObjectTagging, so the copy stands.
    """
    if "Tagging" not in args or ctx.dest_tags_kept.is_set():
        return
    extra = {"VersionId": version_id} if version_id and version_id != "null" else {}
    try:
        tag_set = ctx.dest_client.get_object_tagging(Bucket=target.bucket, Key=target.key, **extra)["TagSet"]
    except Exception as error:
        if not is_not_implemented(error):
            log.info(
                "cannot read back the tags of s3://%s/%s (%s): not checked", target.bucket, target.key, error
            )
            return
        tag_set = []
    if tagging_string({t["Key"]: t["Value"] for t in tag_set}) == args["Tagging"]:
        ctx.dest_tags_kept.set()
        return
    failure = ctx.refuse_dest_tags("a written object kept none of its tags")
    in_place = (info.obj.bucket, info.obj.key) == (target.bucket, target.key)
    raise discard_copy(ctx.dest_client, target, version_id, failure, in_place=in_place)


def single_put_limit(ctx: TransferContext, info: SourceInfo) -> int:
    """A single-part source with no checksum is proved only by its MD5 ETag, which a multipart
    copy would lose, so the next run could not tell it is identical and would copy it again.
    Such sources go in one PutObject up to the memory limit (still bounded by the budget)."""
    if not info.is_multipart and needs_whole_md5(info):
        return max(ctx.policy.multipart_threshold, min(ctx.memory.capacity, MAX_SINGLE_COPY))
    return ctx.policy.multipart_threshold


def _layout_proves(ctx: TransferContext, info: SourceInfo) -> bool:
    """True when only a copy in the source's own parts can be proved identical to it.

    A multipart source with no full-object CRC is proved by its `-N` ETag (MD5 of part MD5s)
    or its COMPOSITE checksum, and both are over its parts: one PutObject's ETag can never
    equal them, so the copy would be verified by size alone and copied again on every run.
    Such a source goes multipart in its learned layout even below the multipart threshold,
    as a server-side copy uses UploadPartCopy for it rather than CopyObject.
    """
    if not info.is_multipart:
        return False
    src = info.checksum
    if src is not None and src.is_full_object and src.algorithm in checksums.CRC_ALGORITHMS:
        return False  # combined from any parts, so one PutObject is proved as well
    composite = src is not None and not src.is_full_object
    return (info.etag_is_md5 or composite) and (
        _reproducible_layout(ctx, info) is not None or _guessed_layout(ctx, info) is not None
    )


def _guessed_layout(ctx: TransferContext, info: SourceInfo) -> list[Part] | None:
    """A likely layout (source.guess_layout) where the source's could not be learned, within
    the memory limit: its copy is proved by the ETag it gets, if that comes out equal."""
    if ctx.policy.part_size is not None or info.layout:
        return None
    guess = guess_layout(info)
    largest = min(MAX_REPRODUCED_STREAM_PART, ctx.memory.capacity)
    return guess if guess and max(p.size for p in guess) <= largest else None


def _reproducible_layout(ctx: TransferContext, info: SourceInfo) -> list[Part] | None:
    """The source's learned parts, when the caller chose no part size and each part fits the
    memory limit: a part's whole buffer is granted at once, and a part larger than the budget
    would run alone past it (ByteBudget), so such a layout is not reproduced."""
    if ctx.policy.part_size is not None or not info.is_multipart:
        return None
    layout = learn_layout(ctx.source_client, info)
    largest = min(MAX_REPRODUCED_STREAM_PART, ctx.memory.capacity)
    if layout and max(p.size for p in layout) <= largest:
        return layout
    return None


def _stream_single(ctx: TransferContext, info: SourceInfo, target: Target) -> Outcome:
    """One GET, one PutObject. The attributes are taken after the GET, whose headers complete
    provisional evidence."""
    ctx.memory.acquire(info.size)
    buffer = ctx.buffers.take(info.size)
    try:
        with memoryview(buffer)[: info.size] as data:
            asked_checksum = info.provisional  # the GET asked for it (ChecksumMode): it was checked
            headers = read_into(ctx.source_client, info, None, data)
            if info.provisional:
                info.confirm(headers)
            algorithm = ctx.upload_algorithm(info)
            args = _new_object_args(ctx, info)
            checked = checked_by_get(headers) if asked_checksum else None
            sums = {
                a: checked[1] if checked and checked[0] == a else checksums.b64(checksums.digest(a, data))
                for a in source_algorithms(info, algorithm)
            }
            whole_md5 = hashlib.md5(data).hexdigest() if needs_whole_md5(info) else None
            proof = StreamProof(
                [PartProof(1, len(data), sums)], multipart=False, layout_reproduced=False, whole_md5=whole_md5
            )
            verified_by = verify_stream(info, proof)
            response = put_whole(ctx, target, data, algorithm, sums[algorithm], args)
    finally:
        ctx.buffers.give(buffer)
        ctx.memory.release(info.size)
    _check_written(ctx, info, target, proof, algorithm, response)
    check_tags_kept(ctx, info, target, response.get("VersionId"), args)
    return written(
        Strategy.STREAM_PUT, response, verified_by=verified_by, checksum=f"{algorithm}:{sums[algorithm]}"
    )


def _plan(ctx: TransferContext, info: SourceInfo) -> tuple[list[Part], bool]:
    """Reproduce the source's parts when known and affordable, so its ETag can be matched."""
    layout = _reproducible_layout(ctx, info)
    if layout is not None:
        return layout, True
    guess = _guessed_layout(ctx, info)
    if guess is not None:
        return guess, False
    part_size = choose_part_size(info.size, ctx.policy.part_size or DEFAULT_STREAM_PART_SIZE)
    return uniform_parts(info.size, part_size), False


def _stream_multipart(
    ctx: TransferContext,
    info: SourceInfo,
    target: Target,
    algorithm: str,
    args: dict[str, Any],
    deadline: float | None,
) -> Outcome:
    plan, reproduced = _plan(ctx, info)
    algorithms = source_algorithms(info, algorithm)
    part_md5 = needs_part_md5(info, reproduced) and not _composite_proves(info, plan, reproduced, algorithms)
    upload = open_source_upload(
        ctx,
        info,
        target,
        algorithms=algorithms,
        keep_md5=part_md5,
        plan=plan,
        algorithm=algorithm,
        strategy=Strategy.STREAM_MULTIPART,
        create_args=args,
    )
    ordered = OrderedMd5() if needs_whole_md5(info) and not upload.done else None
    layout_etag = _layout_etag(ctx, info, reproduced, algorithms) if not upload.done else None

    def copy_part(part: Part, upload_id: str) -> PartProof:
        buffer = ctx.buffers.take(part.size)
        try:
            with memoryview(buffer)[: part.size] as data:
                read_into(ctx.source_client, info, part, data)
                sums = {a: checksums.b64(checksums.digest(a, data)) for a in algorithms}
                md5 = hashlib.md5(data).digest() if part_md5 else None
                response = send_part(
                    ctx.dest_client, target, upload_id, part.number, data, algorithm, sums[algorithm]
                )
                if ordered is not None:
                    ordered.feed(part.number, data)
                if layout_etag is not None:
                    layout_etag.feed(part.number, data)
            return PartProof(part.number, part.size, sums, md5, response["ETag"])
        except BaseException:
            if ordered is not None:
                ordered.cancel()
            if layout_etag is not None:
                layout_etag.cancel()
            raise
        finally:
            ctx.buffers.give(buffer)

    gate = SlotsAndBytes(max(1, ctx.part_concurrency), ctx.memory)
    if not upload.run(copy_part, ctx.part_executor, gate, deadline):
        return upload.handed_over(Strategy.STREAM_MULTIPART)
    proof = StreamProof(
        upload.ordered_proofs(),
        multipart=True,
        layout_reproduced=reproduced,
        whole_md5=ordered.hexdigest() if ordered is not None else None,
    )
    try:
        verified_by = verify_stream(info, proof)
        if verified_by == "size" and layout_etag is not None:
            verified_by = _prove_by_layout_etag(info, layout_etag)
    except VerificationFailed:
        upload.abort()
        raise
    response = upload.complete()
    _check_written(ctx, info, target, proof, algorithm, response)
    check_tags_kept(ctx, info, target, response.get("VersionId"), args)
    verified_by = prove_by_etag(verified_by, info, response)
    full = proof.full_object(algorithm)
    checksum = f"{algorithm}:{full}" if full else f"{algorithm}:{proof.composite(algorithm)}"
    return written(
        Strategy.STREAM_MULTIPART,
        response,
        verified_by=verified_by,
        checksum=checksum,
        parts_resumed=upload.resumed_parts,
        note=None if reproduced else _layout_note(ctx, info, plan, verified_by),
    )


def open_source_upload(
    ctx: TransferContext,
    info: SourceInfo,
    target: Target,
    *,
    algorithms: Sequence[str] = (),
    keep_md5: bool = False,
    keep_listed_checksum: bool = False,
    plan: list[Part],
    algorithm: str | None,
    strategy: str,
    create_args: dict[str, Any],
    checkpoint_read: tuple[Checkpoint | None] | None = None,
) -> MultipartUpload:
    """Start or resume the upload of an S3 source (multipart.open_upload). A crashed run's
    parts are kept once they check out against the source, by its own part checksums where it
    has them, else by reading its ranges; `algorithms`, `keep_md5` and `keep_listed_checksum`
    are what the copy's proof needs of each part (resume_parts.part_check)."""
    return open_upload(
        ctx,
        info,
        target,
        plan=plan,
        algorithm=algorithm,
        strategy=strategy,
        create_args=create_args,
        check_parts=part_check(
            ctx,
            lambda part, view: read_into(ctx.source_client, info, part, view),
            algorithm=algorithm,
            algorithms=algorithms,
            keep_md5=keep_md5,
            keep_listed_checksum=keep_listed_checksum,
            source_sums=lambda numbers: source_part_checksums(
                ctx.source_client, info, algorithm, plan, numbers
            ),
        ),
        checkpoint_read=checkpoint_read,
    )


def _layout_etag(
    ctx: TransferContext, info: SourceInfo, reproduced: bool, algorithms: list[str]
) -> LayoutEtag | None:
    """The source's ETag recomputed over its own parts, when streamed in other parts and
    nothing stronger can prove it (its ETag is its only evidence, and its layout is known)."""
    src = info.checksum
    if reproduced or not info.is_multipart or not info.etag_is_md5:
        return None
    if src is not None and src.is_full_object and src.algorithm in algorithms:
        return None  # the full-object CRC proves it
    layout = learn_layout(ctx.source_client, info)
    return LayoutEtag(layout) if layout else None


def _prove_by_layout_etag(info: SourceInfo, layout_etag: LayoutEtag) -> str:
    local = layout_etag.etag()
    if local is None:
        return "size"
    if local != info.etag:
        raise VerificationFailed(
            f"verification failed: ETag of the bytes read (in the source's parts) is {local}, the source's is {info.etag}"
        )
    return "etag"


def _proof_words(verified_by: str) -> str:
    if verified_by == "etag":
        return "verified by the source's ETag over its own parts, but the copy's ETag differs"
    return "verified by size only"


def _layout_note(ctx: TransferContext, info: SourceInfo, plan: list[Part], verified_by: str) -> str | None:
    """Say why a learned layout was not kept: the copy's ETag differs from the source's, so the
    next run copies it again (and without the source's ETag recomputed over its own parts,
    layout_etag, the copy is proved by size alone)."""
    if verified_by not in ("size", "etag") or not info.layout or ctx.policy.part_size is not None:
        return None
    largest = max(p.size for p in info.layout)
    if ctx.memory.capacity < largest:
        limit = f"exceed the memory limit ({format_size(ctx.memory.capacity)})"
        fix = f"raise the memory limit to at least {format_size(largest)} to keep the source's ETag"
    else:
        limit = f"exceed the {format_size(MAX_REPRODUCED_STREAM_PART)} a streamed part may hold"
        fix = "a server-side copy (same endpoint) keeps its ETag"
    return (
        f"the source's parts (up to {format_size(largest)}) {limit}: copied in parts of "
        f"{format_size(plan[0].size)}, {_proof_words(verified_by)}, so the next run copies it again; {fix}"
    )


def _composite_proves(info: SourceInfo, plan: list[Part], reproduced: bool, algorithms: list[str]) -> bool:
    """A COMPOSITE source checksum matched over the reproduced layout proves the copy before
    the ETag would be looked at (verify_stream), so part MD5s (about 600 MB/s a core) are
    not needed for it."""
    src = info.checksum
    return (
        reproduced
        and src is not None
        and not src.is_full_object
        and src.parts_count == len(plan)
        and src.algorithm in algorithms
    )


def _check_written(
    ctx: TransferContext,
    info: SourceInfo,
    target: Target,
    proof: StreamProof,
    algorithm: str,
    response: dict[str, Any],
) -> None:
    try:
        verify_written(proof, algorithm, checksums.from_response(response))
    except VerificationFailed as failure:
        raise discard_copy(
            ctx.dest_client,
            target,
            response.get("VersionId"),
            failure,
            in_place=ctx.onto_itself(info.obj, target),
        ) from failure


def discard_copy(
    client: Any, target: Target, version_id: str | None, failure: CopyFailed, *, in_place: bool = False
) -> CopyFailed:
    """Delete a copy that could not be proved: exactly the version Ferry wrote, if versioned.

    Never an unversioned copy made in place (onto the object it read): that copy IS the
    object now, and deleting it would delete the only copy. Returns the failure to raise; if
    the copy stays, the reason says so.
    """
    if in_place and not version_id:
        return type(failure)(
            f"{failure}; the object was rewritten in place and is left as written "
            f"(removing it would remove the only copy of s3://{target.bucket}/{target.key})"
        )
    args = {"VersionId": version_id} if version_id else {}
    try:
        client.delete_object(Bucket=target.bucket, Key=target.key, **args)
    except Exception as error:
        reason = describe(
            error, side="destination", action="s3:DeleteObject", bucket=target.bucket, key=target.key
        )
        return type(failure)(
            f"{failure}; the unproved copy at s3://{target.bucket}/{target.key} could not be removed ({reason})"
        )
    return failure
