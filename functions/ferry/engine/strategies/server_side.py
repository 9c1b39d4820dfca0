"""Server-side copy: S3 moves the bytes; Ferry sends requests and checks what S3 reports.

CopyObject when one request can do it and its result can be verified; otherwise parallel
UploadPartCopy, reproducing the source's part layout so that the ETags match.
"""

from __future__ import annotations

import logging
from typing import Any

from ferry.engine.proofs import checksums
from ferry.engine.proofs.source import SourceInfo, confirm, guess_layout, learn_layout
from ferry.engine.proofs.verify import PartProof, verify_server_copy
from ferry.engine.records.checkpoints import Checkpoint, copy_id
from ferry.engine.records.upload_marks import key_uploads
from ferry.engine.run.budget import SlotGate
from ferry.engine.run.context import TransferContext
from ferry.engine.run.degradations import NotImplementedByServer, is_not_implemented
from ferry.engine.run.outcome import Outcome
from ferry.engine.strategies.attributes import copy_object_args, new_object_args
from ferry.engine.strategies.streaming import STALE, check_tags_kept, discard_copy, open_source_upload
from ferry.errors import (
    CopyFailed,
    CopySourceDenied,
    ListingWasStale,
    describe,
    describe_destination,
    error_code,
    is_access_denied,
)
from ferry.limits import (
    DEFAULT_COPY_PART_SIZE,
    MAX_PART_SIZE,
    MAX_SINGLE_COPY,
    Part,
    choose_part_size,
    uniform_parts,
)
from ferry.models import Status, Strategy, Target

log = logging.getLogger(__name__)
NO_PART_CHECKSUMS_NOTE = (
    "the destination refuses UploadPartCopy with a checksum algorithm: copied without "
    "part checksums, verified by ETag or size"
)


class PartChecksumsRefused(CopyFailed):
    """The endpoint will not copy parts into an upload created with a checksum algorithm.

    MinIO answers InvalidArgument "checksum missing, want CRC32C": it expects the client to
    send each part's checksum, which a server-side part copy cannot. AWS S3 computes it.
    """


def _refuses_part_checksums(error: BaseException) -> bool:
    message = str(getattr(error, "response", {}).get("Error", {}).get("Message", ""))
    return error_code(error) == "InvalidArgument" and "checksum missing" in message.lower()


def server_side_copy(
    ctx: TransferContext, info: SourceInfo, target: Target, deadline: float | None
) -> Outcome:
    if info.provisional:
        if info.size <= MAX_SINGLE_COPY:
            return _copy_object_as_listed(ctx, info, target, deadline)
        confirm(ctx.source_client, info)  # a single-part ETag above 5 GiB: a multipart copy
    if info.size <= MAX_SINGLE_COPY and _single_request_is_verifiable(ctx, info):
        return _copy_object(ctx, info, target)
    return _copy_multipart(ctx, info, target, deadline)


def _single_request_is_verifiable(ctx: TransferContext, info: SourceInfo) -> bool:
    """CopyObject of a multipart source changes its ETag: use it only when a checksum can prove
    the copy, or when the layout cannot be reproduced anyway. One request is the cheapest copy."""
    if not info.is_multipart:
        return True
    src = info.checksum
    if src is not None and src.is_full_object and src.algorithm == ctx.upload_algorithm(info):
        return True
    if not info.etag_is_md5:
        return True  # a KMS ETag proves nothing even with the layout reproduced: one request will do
    return learn_layout(ctx.source_client, info) is None and guess_layout(info) is None


def _copy_object(ctx: TransferContext, info: SourceInfo, target: Target) -> Outcome:
    algorithm = ctx.upload_algorithm(info)
    try:
        response = ctx.dest_client.copy_object(
            Bucket=target.bucket,
            Key=target.key,
            CopySource=info.copy_source(),
            CopySourceIfMatch=f'"{info.etag}"',
            ChecksumAlgorithm=algorithm,
            **copy_object_args(
                info, ctx.policy, ctx.reusable_source_key(info), in_place=_onto_itself(info, target)
            ),
            **ctx.payer_args(),
        )
    except Exception as error:
        raise _copy_error(error, info, target) from error
    result = response.get("CopyObjectResult", {})
    return _verified_copy(
        ctx, info, target, response, result, Strategy.COPY_OBJECT, same_layout=not info.is_multipart
    )


def _copy_object_as_listed(
    ctx: TransferContext, info: SourceInfo, target: Target, deadline: float | None
) -> Outcome:
    """One CopyObject from the listing's evidence, proved by the ETag S3 gives the copy.

    No checksum algorithm is sent unless the caller chose one (S3 then copies the source's
    algorithm and value), and no encryption header. The copy stands as it is when it is what a
    HEAD-first copy makes: the listed MD5 ETag came back under SSE-S3 (an SSE-KMS source's
    ETag is not its MD5), or with no encryption from a store that holds no encrypted objects
    (encryption_probe). Otherwise the source's HEAD decides: the copy is verified from it,
    or, where a HEAD-first copy would have asked for the source's encryption (or the source
    changed since), copied again over itself from the HEAD; nothing is deleted in between.
    Refusals, a changed source (412) or an archived one come back as ListingWasStale before
    anything is written, to be decided again from the HEAD.
    """
    listed_etag = info.etag
    algorithm = {"ChecksumAlgorithm": ctx.policy.checksum_algorithm} if ctx.policy.checksum_algorithm else {}
    sent = copy_object_args(info, ctx.policy, None, in_place=_onto_itself(info, target))
    try:
        response = ctx.dest_client.copy_object(
            Bucket=target.bucket,
            Key=target.key,
            CopySource=info.copy_source(),
            CopySourceIfMatch=f'"{info.etag}"',
            **algorithm,
            **sent,
            **ctx.payer_args(),
        )
    except Exception as error:
        if error_code(error) not in STALE and not is_access_denied(error):
            raise _copy_error(error, info, target) from error
        confirm(ctx.source_client, info)
        raise ListingWasStale(f"the listed evidence did not hold: {error_code(error)}") from error
    result = response.get("CopyObjectResult", {})
    encryption = response.get("ServerSideEncryption")
    same_etag = result.get("ETag", "").strip('"') == listed_etag
    if same_etag and (
        encryption == "AES256" or (encryption is None and ctx.holds_no_encryption(target.bucket))
    ):
        dest_checksum = checksums.from_response(result)
        return Outcome(
            Status.COPIED,
            Strategy.COPY_OBJECT,
            verified_by="etag",
            checksum=str(dest_checksum) if dest_checksum else None,
            version_id=response.get("VersionId"),
            encryption=encryption,
        )
    confirm(ctx.source_client, info)
    wanted = copy_object_args(
        info, ctx.policy, ctx.reusable_source_key(info), in_place=_onto_itself(info, target)
    )
    if info.etag == listed_etag and not info.is_multipart and wanted == sent:
        return _verified_copy(ctx, info, target, response, result, Strategy.COPY_OBJECT, same_layout=True)
    if info.etag == listed_etag:
        ctx.listing_copies_off.set()  # this run's sources want their encryption asked for
    try:
        outcome = server_side_copy(ctx, info, target, deadline)
    except CopyFailed as failure:
        raise type(failure)(
            f"{failure}; the destination holds a first copy made without the source's encryption"
        ) from failure
    outcome.note = "copied again from the source's HEAD: the first copy lacked the source's encryption"
    if info.etag != listed_etag:
        outcome.note = "copied again: the source changed since the listing"
    return outcome


def _onto_itself(info: SourceInfo, target: Target) -> bool:
    """Server-side copies share one endpoint: the same bucket and key is the object itself."""
    return (info.obj.bucket, info.obj.key) == (target.bucket, target.key)


def _plan(ctx: TransferContext, info: SourceInfo) -> tuple[list[Part], bool]:
    layout = learn_layout(ctx.source_client, info) if ctx.policy.part_size is None else None
    if layout and max(p.size for p in layout) <= MAX_PART_SIZE:
        return layout, True
    guess = guess_layout(info) if ctx.policy.part_size is None and not info.layout else None
    if guess and max(p.size for p in guess) <= MAX_PART_SIZE:
        return guess, False  # proved only if the ETag comes out equal
    part_size = choose_part_size(info.size, ctx.policy.part_size or DEFAULT_COPY_PART_SIZE)
    return uniform_parts(info.size, part_size), False


def _copy_multipart(
    ctx: TransferContext, info: SourceInfo, target: Target, deadline: float | None
) -> Outcome:
    """Parts with checksums where the endpoint allows them; without, where it refuses them.

    Only Ferry's own choice of algorithm is dropped: one the caller asked for is kept, and
    the copy fails saying why.
    """
    chosen = ctx.policy.checksum_algorithm
    refused_before = ctx.part_copy_checksums_refused.is_set()
    saved = None if chosen or refused_before else _saved_checkpoint(ctx, info, target)
    if not chosen and (refused_before or _saved_without_checksums(ctx, info, target, saved)):
        outcome = _copy_parts(ctx, info, target, deadline, None, saved)
        outcome.note = NO_PART_CHECKSUMS_NOTE
        return outcome
    try:
        return _copy_parts(ctx, info, target, deadline, ctx.upload_algorithm(info), saved)
    except PartChecksumsRefused as refused:
        if chosen:
            raise CopyFailed(
                f"{refused}; the destination cannot store {chosen} on a server-side part copy: "
                "copy without --checksum-algorithm, or with --mode stream"
            ) from refused
        ctx.part_copy_checksums_refused.set()
        log.info("the destination refuses part copies with checksums; copying parts without them")
        outcome = _copy_parts(ctx, info, target, deadline, None)
        outcome.note = NO_PART_CHECKSUMS_NOTE
        return outcome


def _saved_checkpoint(
    ctx: TransferContext, info: SourceInfo, target: Target
) -> tuple[Checkpoint | None] | None:
    """This copy's checkpoint, read once a pass: as multipart.MultipartUpload.checkpoint_read
    (None where there is no store to read)."""
    if ctx.checkpoints is None:
        return None
    return (
        ctx.checkpoints.load(
            copy_id(info.obj.bucket, info.obj.key, info.obj.version_id, target.bucket, target.key)
        ),
    )


def _saved_without_checksums(
    ctx: TransferContext, info: SourceInfo, target: Target, read: tuple[Checkpoint | None] | None
) -> bool:
    """A checkpoint or a marked upload of this copy saved without checksums (by a process that
    learned the endpoint refuses them) is resumed without them, not discarded by a first try
    with one."""
    saved = read[0] if read is not None else None
    if saved is not None:
        return saved.algorithm is None and saved.strategy == Strategy.COPY_MULTIPART
    return _marked_without_checksums(ctx, info, target)


def _marked_without_checksums(ctx: TransferContext, info: SourceInfo, target: Target) -> bool:
    """A crashed run's marked upload of this source, made without part checksums."""
    if ctx.policy.marks_prefix is None:
        return False
    try:
        uploads = list(
            key_uploads(ctx.dest_client, target.bucket, target.key, marks_prefix=ctx.policy.marks_prefix)
        )
    except Exception as error:  # no resume then; the copy itself says what is wrong, if anything
        log.info("could not list uploads of s3://%s/%s: %s", target.bucket, target.key, error)
        return False
    return any(
        u.mark.algorithm is None
        and u.mark.strategy == Strategy.COPY_MULTIPART
        and (u.mark.source_bucket, u.mark.source_key, u.mark.source_etag)
        == (info.obj.bucket, info.obj.key, info.etag)
        for u in uploads
    )


def _copy_parts(
    ctx: TransferContext,
    info: SourceInfo,
    target: Target,
    deadline: float | None,
    algorithm: str | None,
    checkpoint_read: tuple[Checkpoint | None] | None = None,
) -> Outcome:
    plan, reproduced = _plan(ctx, info)
    create_args = new_object_args(info, ctx.policy, ctx.tags_for(info), ctx.reusable_source_key(info))
    upload = open_source_upload(
        ctx,
        info,
        target,
        keep_listed_checksum=True,  # a server-side copy's proof is what S3 reports for its parts
        plan=plan,
        algorithm=algorithm,
        strategy=Strategy.COPY_MULTIPART,
        create_args=create_args,
        checkpoint_read=checkpoint_read,
    )

    def copy_part(part: Part, upload_id: str) -> PartProof:
        try:
            response = ctx.dest_client.upload_part_copy(
                Bucket=target.bucket,
                Key=target.key,
                UploadId=upload_id,
                PartNumber=part.number,
                CopySource=info.copy_source(),
                CopySourceRange=part.http_range,
                CopySourceIfMatch=f'"{info.etag}"',
                **ctx.payer_args(),
            )
        except Exception as error:
            if algorithm and _refuses_part_checksums(error):
                raise PartChecksumsRefused(
                    describe_destination(error, "UploadPartCopy", target.bucket, target.key)
                ) from error
            raise _copy_error(error, info, target) from error
        result = response["CopyPartResult"]
        value = result.get(f"Checksum{algorithm}") if algorithm else None
        return PartProof(part.number, part.size, {algorithm: value} if value else {}, etag=result["ETag"])

    if not upload.run(copy_part, ctx.part_executor, SlotGate(ctx.part_concurrency), deadline):
        return upload.handed_over(Strategy.COPY_MULTIPART)
    response = upload.complete()
    check_tags_kept(ctx, info, target, response.get("VersionId"), create_args)
    return _verified_copy(
        ctx,
        info,
        target,
        response,
        response,
        Strategy.COPY_MULTIPART,
        same_layout=reproduced,
        parts_resumed=upload.resumed_parts,
    )


def _verified_copy(
    ctx: TransferContext,
    info: SourceInfo,
    target: Target,
    response: dict[str, Any],
    result: dict[str, Any],
    strategy: str,
    *,
    same_layout: bool,
    parts_resumed: int = 0,
) -> Outcome:
    """Check what S3 reports; where that proves nothing, what a HEAD of the copy gives. A
    mismatch removes the copy. `parts_resumed`: a multipart copy's parts kept from a crashed
    or stopped run.

    Not every server reports the copy's checksum: MinIO's CopyObject answer carries none,
    though the copy stores the source's full-object checksum. The HEAD (ChecksumMode) then
    gives it, with the copy's ETag and size, so the copy is proved by the strongest evidence
    both sides carry, as `ferry check` would compare them, and by its size only where they
    share nothing else."""
    version_id = response.get("VersionId")
    encryption = response.get("ServerSideEncryption")
    dest_checksum = checksums.from_response(result)
    try:
        verified_by = verify_server_copy(
            info,
            dest_etag=result.get("ETag"),
            dest_checksum=dest_checksum,
            dest_encryption=encryption,
            same_layout=same_layout,
            dest_size=None,
        )
        if verified_by == "unverified":
            head = _written_head(ctx, target, version_id)
            encryption = encryption or head.get("ServerSideEncryption")
            dest_checksum = dest_checksum or checksums.from_response(head)
            verified_by = verify_server_copy(
                info,
                dest_etag=result.get("ETag") or head.get("ETag"),
                dest_checksum=dest_checksum,
                dest_encryption=encryption,
                same_layout=same_layout,
                dest_size=int(head["ContentLength"]),
            )
    except CopyFailed as failure:
        raise discard_copy(
            ctx.dest_client, target, version_id, failure, in_place=_onto_itself(info, target)
        ) from failure
    return Outcome(
        Status.COPIED,
        strategy,
        verified_by=verified_by,
        checksum=str(dest_checksum) if dest_checksum else None,
        version_id=version_id,
        parts_resumed=parts_resumed,
        encryption=encryption,
    )


def _written_head(ctx: TransferContext, target: Target, version_id: str | None) -> dict[str, Any]:
    """A HEAD of the version just written, with its stored checksum (ChecksumMode). A `null`
    version id (an unversioned bucket, as moto reports it) names the object itself: it is not
    sent, as elsewhere in the engine, since some servers refuse `versionId=null`."""
    args = {"VersionId": version_id} if version_id and version_id != "null" else {}
    try:
        return ctx.dest_client.head_object(  # type: ignore[no-any-return]
            Bucket=target.bucket, Key=target.key, ChecksumMode="ENABLED", **args
        )
    except Exception as error:
        reason = describe(
            error, side="destination", action="s3:GetObject (to verify)", bucket=target.bucket, key=target.key
        )
        raise CopyFailed(f"the copy could not be verified: {reason}") from error


# Codes with which an endpoint refuses to copy one particular object server-side although a
# plain PUT of it works: versitygw 1.8.0 answers CopyObject of an empty folder marker
# ("dir/") with DirectoryObjectContainsData. Auto mode streams that object only.
OBJECT_REFUSALS = frozenset({"DirectoryObjectContainsData"})


class ServerSideRefusedObject(CopyFailed):
    """The endpoint will not copy this one object server-side; streaming it works."""


def _copy_error(error: BaseException, info: SourceInfo, target: Target) -> BaseException:
    if isinstance(error, CopyFailed):
        return error
    if is_not_implemented(error):
        # An endpoint without this copy (or a header it needs, such as
        # x-amz-tagging-directive: REPLACE for --no-tags): auto mode streams instead.
        message = getattr(error, "response", {}).get("Error", {}).get("Message", "")
        failure = NotImplementedByServer(
            f"NotImplemented on server-side copy of s3://{info.obj.bucket}/{info.obj.key}: {message}; "
            "this endpoint cannot copy it server-side: copy with --mode stream"
        )
        failure.__cause__ = error
        return failure
    if error_code(error) in OBJECT_REFUSALS:
        failure = ServerSideRefusedObject(
            f"{error_code(error)} on server-side copy of s3://{info.obj.bucket}/{info.obj.key}: the endpoint "
            "will not copy this object server-side: copy with --mode stream"
        )
        failure.__cause__ = error
        return failure
    kind = CopySourceDenied if is_access_denied(error) else CopyFailed
    failure = kind(
        describe(
            error,
            side="destination",
            action="server-side copy (s3:GetObject on the source, s3:PutObject on the destination)",
            bucket=info.obj.bucket,
            key=info.obj.key,
        )
    )
    failure.__cause__ = error
    return failure
