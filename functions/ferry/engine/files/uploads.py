"""Uploading local files to S3, verified: each file read once, its checksum computed from the
bytes as read, and the copy kept only when S3 stored that same checksum.

A file up to the multipart threshold is read whole into a pooled buffer (its bytes granted by
the memory budget first), checksummed there and sent in one PutObject, on the lean request
path as a streamed small object is. A larger file goes in parts, several at once: each part
is read at its offset into a buffer, checksummed, sent with UploadPart, and its buffer given
back; the memory budget bounds the parts in flight. The upload is marked in the destination
bucket (upload_marks.py) like every multipart upload Ferry makes, so a process killed
mid-way leaves an upload the next run finds and finishes, keeping each part that still
matches the file's bytes.

Proof: PutObject and CompleteMultipartUpload answer with the checksum S3 stored; it must equal
the one computed from the bytes read (a CRC combined from the parts' CRCs for a multipart
upload). A store that answers without one is asked with a HEAD; a single PUT with none at all
is proved by an MD5 ETag. A copy that cannot be proved is deleted and fails with the reason.
A file that changed while it was read (size or modification time) is not kept either.

Skip-existing compares the file with what the destination holds: size, then the
destination's own checksum (or MD5 ETag) computed over the file (local_proof.py), or with
`--compare size-mtime` size and time (the object is not older than the file, to the second
S3 keeps). A small file is compared in the same buffer it would be sent from: read once.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import mimetypes
import os
from typing import Any

from ferry.engine.compare.dest_listing import ABSENT, Listed
from ferry.engine.compare.skip import head_destination, weak_verdict
from ferry.engine.parts.multipart import open_upload
from ferry.engine.parts.resume_parts import part_check
from ferry.engine.proofs import checksums
from ferry.engine.proofs.local_proof import Proof, compute, compute_in_memory, proof_for
from ferry.engine.proofs.source import SourceInfo, from_head
from ferry.engine.proofs.verify import PartProof, StreamProof
from ferry.engine.run.outcome import WOULD_COPY, Outcome, written
from ferry.engine.strategies.attributes import new_object_args
from ferry.engine.strategies.copier import Copier, local_result
from ferry.engine.strategies.streaming import check_tags_kept, discard_copy, put_whole, send_part
from ferry.errors import CopyFailed, VerificationFailed
from ferry.limits import DEFAULT_STREAM_PART_SIZE, choose_part_size, uniform_parts
from ferry.local.files import LocalFile
from ferry.local.reading import LocalReader
from ferry.models import CopyPolicy, CopyResult, Endpoint, SourceObject, Status, Strategy, Target

log = logging.getLogger(__name__)
DEFAULT_ALGORITHM = "CRC32C"


class Uploader(Copier):
    """Copies local files (ferry.local.files) to S3 targets, a batch at a time (copy_batch)."""

    def __init__(
        self,
        destination: Endpoint,
        policy: CopyPolicy | None = None,
        *,
        follow_symlinks: bool = False,
        dest_client: Any = None,
        **options: Any,
    ) -> None:
        # One side is S3: the engine's context holds its client as both.
        super().__init__(
            destination, destination, policy, source_client=dest_client, dest_client=dest_client, **options
        )
        self.follow_symlinks = follow_symlinks
        mimetypes.init()  # once, here: the part threads then only read its tables

    def copy(
        self,
        obj: LocalFile,  # type: ignore[override]
        target: Target,
        deadline: float | None = None,
        *,
        listed: Listed | str | None = None,
    ) -> CopyResult:
        """Upload one file; every outcome, failures included, comes back as a result."""
        return local_result(
            lambda: self._upload(obj, target, listed),
            CopyResult(
                source_key=obj.path, dest_key=target.key, status=Status.FAILED, dest_bucket=target.bucket
            ),
            doing=f"uploading {obj.path}",
            local_reason=lambda error: f"cannot read the file: {error.strerror or error}",
            logger=log,
        )

    def _upload(self, file: LocalFile, target: Target, listed: Listed | str | None) -> tuple[Outcome, int]:
        if file.problem is not None:
            return Outcome(file.problem_status, "none", reason=file.problem), 0
        with LocalReader.open(file.path, follow_symlinks=self.follow_symlinks or file.named) as reader:
            return self._upload_open(file, reader, target, listed), reader.size

    def _upload_open(
        self, file: LocalFile, reader: LocalReader, target: Target, listed: Listed | str | None
    ) -> Outcome:
        proof = None
        if self.policy.skip_existing:
            reason, proof = self._existing(target, listed, reader)
            if reason is not None:
                return Outcome(Status.SKIPPED, "none", reason=reason)
        small = reader.size <= self.policy.multipart_threshold
        if proof is not None and (self.policy.dry_run or not small):
            if compute(proof, reader.read_at, reader.size) == proof.expected:
                reader.check_unchanged()
                return Outcome(Status.SKIPPED, "none", reason=proof.identical_reason())
            proof = None
        if self.policy.dry_run:
            return Outcome(Status.PENDING, Strategy.UPLOAD, reason=f"{WOULD_COPY} (upload)")
        if small:
            return self._put(file, reader, target, proof)
        return self._multipart(file, reader, target)

    # -- is it there already? -----------------------------------------------------------------

    def _existing(
        self, target: Target, listed: Listed | str | None, reader: LocalReader
    ) -> tuple[str | None, Proof | None]:
        """(why to skip, or None; a proof to compare the file with, where the sizes match and
        the destination's checksum must decide)."""
        compare = self.policy.compare
        if listed == ABSENT:
            return None, None
        if isinstance(listed, Listed):
            decided, reason = weak_verdict(
                compare, listed.size, reader.size, lambda: _not_older(listed.last_modified, reader.mtime_ns)
            )
            if decided:
                return reason, None
        head = head_destination(self.ctx.dest_client, target)
        there = None if head is None else int(head["ContentLength"])
        decided, reason = weak_verdict(
            compare,
            there,
            reader.size,
            lambda: _not_older(head.get("LastModified") if head else None, reader.mtime_ns),
        )
        if decided or head is None:
            return reason, None
        return None, proof_for(self.ctx.dest_client, _object_info(target, head))

    # -- one request ----------------------------------------------------------------------------

    def _put(self, file: LocalFile, reader: LocalReader, target: Target, proof: Proof | None) -> Outcome:
        size = reader.size
        self.ctx.memory.acquire(size)
        buffer = self.ctx.buffers.take(size)
        try:
            with memoryview(buffer)[:size] as data:
                reader.read_at(0, data)
                reader.check_unchanged()
                if proof is not None and compute_in_memory(proof, data) == proof.expected:
                    return Outcome(Status.SKIPPED, "none", reason=proof.identical_reason())
                algorithm = self._algorithm()
                value = checksums.b64(checksums.digest(algorithm, data))
                args = self._object_args(file.path)
                response = put_whole(self.ctx, target, data, algorithm, value, args)
                verified_by = self._prove_written(
                    target, algorithm, response, full=value, composite=None, data=data
                )
        finally:
            self.ctx.buffers.give(buffer)
            self.ctx.memory.release(size)
        check_tags_kept(self.ctx, _file_info(file, reader), target, response.get("VersionId"), args)
        return written(Strategy.UPLOAD, response, verified_by=verified_by, checksum=f"{algorithm}:{value}")

    # -- in parts -------------------------------------------------------------------------------

    def _multipart(self, file: LocalFile, reader: LocalReader, target: Target) -> Outcome:
        algorithm = self._algorithm()
        size = reader.size
        plan = uniform_parts(size, choose_part_size(size, self.policy.part_size or DEFAULT_STREAM_PART_SIZE))
        info = _file_info(file, reader)
        args = self._object_args(file.path)
        client = self.ctx.dest_client

        def read_part(part: Any, view: memoryview) -> None:
            reader.read_at(part.start, view)

        upload = open_upload(
            self.ctx,
            info,
            target,
            plan=plan,
            algorithm=algorithm,
            strategy=Strategy.UPLOAD_MULTIPART,
            create_args=args,
            check_parts=part_check(
                self.ctx, read_part, algorithm=algorithm, algorithms=[algorithm], keep_md5=False
            ),
        )

        def send(part: Any, upload_id: str) -> PartProof:
            buffer = self.ctx.buffers.take(part.size)
            try:
                with memoryview(buffer)[: part.size] as data:
                    reader.read_at(part.start, data)
                    value = checksums.b64(checksums.digest(algorithm, data))
                    response = send_part(client, target, upload_id, part.number, data, algorithm, value)
                return PartProof(part.number, part.size, {algorithm: value}, None, response["ETag"])
            finally:
                self.ctx.buffers.give(buffer)

        upload.run(send, self.ctx.part_executor, self.ctx.memory, None)
        try:
            reader.check_unchanged()
        except CopyFailed:
            upload.abort()
            raise
        proof = StreamProof(upload.ordered_proofs(), multipart=True, layout_reproduced=False)
        response = upload.complete()
        full, composite = proof.full_object(algorithm), proof.composite(algorithm)
        verified_by = self._prove_written(
            target, algorithm, response, full=full, composite=composite, data=None
        )
        check_tags_kept(self.ctx, info, target, response.get("VersionId"), args)
        return written(
            Strategy.UPLOAD_MULTIPART,
            response,
            verified_by=verified_by,
            checksum=f"{algorithm}:{full or composite}",
            parts_resumed=upload.resumed_parts,
        )

    # -- proof ----------------------------------------------------------------------------------

    def _prove_written(
        self,
        target: Target,
        algorithm: str,
        response: dict[str, Any],
        *,
        full: str | None,
        composite: str | None,
        data: memoryview | None,
    ) -> str:
        """How the object just written is proved to hold the bytes read; deleted if it is not."""
        version_id = response.get("VersionId")
        stored = checksums.from_response(response)
        if stored is None or stored.algorithm != algorithm:
            stored = self._stored_checksum(target, version_id)
        if stored is not None and stored.algorithm == algorithm:
            sent = full if stored.is_full_object else composite
            if sent != stored.value:
                raise self._discard(
                    target,
                    version_id,
                    f"verification failed: the destination stored {algorithm} {stored.value}, the file's is {sent}",
                )
            return f"{algorithm.lower()} ({'full object' if stored.is_full_object else 'composite'})"
        etag = str(response.get("ETag", "")).strip('"')
        if (
            data is not None
            and len(etag) == 32
            and not str(response.get("ServerSideEncryption", "")).startswith("aws:kms")
        ):
            md5 = hashlib.md5(data).hexdigest()
            if etag != md5:
                raise self._discard(
                    target,
                    version_id,
                    f"verification failed: the destination's ETag is {etag}, the file's MD5 {md5}",
                )
            return "md5"
        raise self._discard(
            target,
            version_id,
            f"cannot be proved: the destination keeps no {algorithm} checksum of it and no MD5 ETag",
        )

    def _stored_checksum(self, target: Target, version_id: str | None) -> checksums.Checksum | None:
        extra = {"VersionId": version_id} if version_id and version_id != "null" else {}
        try:
            head = self.ctx.dest_client.head_object(
                Bucket=target.bucket, Key=target.key, ChecksumMode="ENABLED", **extra
            )
        except Exception as error:
            log.info("cannot read back s3://%s/%s (%s)", target.bucket, target.key, error)
            return None
        return checksums.from_response(head)

    def _discard(self, target: Target, version_id: str | None, reason: str) -> CopyFailed:
        return discard_copy(self.ctx.dest_client, target, version_id, VerificationFailed(reason))

    # -- what the object gets -------------------------------------------------------------------

    def _algorithm(self) -> str:
        return self.policy.checksum_algorithm or DEFAULT_ALGORITHM

    def _object_args(self, path: str) -> dict[str, Any]:
        """Content type from the file's name (as the AWS CLI, s5cmd and rclone guess it), and
        what the caller asked for: metadata, tags, storage class, KMS key."""
        head: dict[str, Any] = {}
        content_type = mimetypes.guess_type(path)[0]
        if content_type:
            head["ContentType"] = content_type
        info = SourceInfo(SourceObject("", path), head, 0, "", None, "STANDARD", None)
        return new_object_args(info, self.policy, dict(self.policy.tags or {}), None)


def _file_info(file: LocalFile, reader: LocalReader) -> SourceInfo:
    """The file as the engine's multipart upload names its source in the upload's mark: its
    absolute path, and a fingerprint of size and modification time in place of an ETag, so a
    crashed upload is resumed only for the same file, unchanged."""
    return SourceInfo(
        obj=SourceObject("", os.path.abspath(file.path)),
        head={},
        size=reader.size,
        etag=f"file:{reader.size}:{reader.mtime_ns}",
        checksum=None,
        storage_class="STANDARD",
        version_id=None,
    )


def _object_info(target: Target, head: dict[str, Any]) -> SourceInfo:
    """A destination object's HEAD as evidence to compare a file with."""
    return from_head(SourceObject(target.bucket, target.key), head)


def _not_older(dest_time: dt.datetime | None, mtime_ns: int) -> str | None:
    """S3 keeps times to the second: an object not older than the file's whole second."""
    if dest_time is not None and dest_time.timestamp() >= mtime_ns // 1_000_000_000:
        return "destination has the same size and is not older"
    return None
