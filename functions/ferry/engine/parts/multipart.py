"""One multipart upload from start to finish, shared by server-side and streaming copies and
by uploads of files.

It owns the upload's life: create it (or resume it from a checkpoint, or from the upload a
crashed run left, found by its mark), run parts under a gate and a deadline (runner.py), save
a checkpoint when time runs out, complete it, or abort it. Each upload Ferry creates is marked
in the destination bucket (upload_marks.py) until it is completed or aborted, so a process
killed mid-copy leaves an upload that the next run can find and finish. The mark goes by the
version it was stored as, so a versioned bucket keeps no trace of it; a bucket that locks
every new version (Object Lock's default retention) gets no mark at all (open_upload).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ferry.counts import plural
from ferry.engine.parts.lost_replies import completed_already, create_upload
from ferry.engine.parts.runner import Failures, Gate, run_parts
from ferry.engine.proofs.checksums import default_type
from ferry.engine.proofs.source import SourceInfo
from ferry.engine.proofs.verify import PartProof
from ferry.engine.records.checkpoints import Checkpoint, CheckpointStore, copy_id
from ferry.engine.records.upload_marks import (
    FerryUpload,
    UploadMark,
    abort_ferry_upload,
    delete_mark,
    key_uploads,
    write_mark,
)
from ferry.engine.run.context import TransferContext
from ferry.engine.run.deadlines import due, stopping
from ferry.engine.run.degradations import is_not_implemented
from ferry.engine.run.outcome import Outcome
from ferry.errors import CopyFailed, describe, describe_destination, error_code, is_client_error
from ferry.limits import Part
from ferry.models import Status, Target

log = logging.getLogger(__name__)


def _store_error(error: BaseException) -> str:
    """The store's refusal in a few words (a DynamoDB error code and message, or the error)."""
    if is_client_error(error):
        message = error.response.get("Error", {}).get("Message", "")  # type: ignore[attr-defined]
        return f"{error_code(error)}: {message}" if message else error_code(error)
    return f"{type(error).__name__}: {error}"


PartWork = Callable[[Part, str], PartProof]
# Checks parts a crashed run left in an upload against the source: given (planned part, the
# part as ListParts gave it), returns proofs for those that match; the others are sent again.
PartCheck = Callable[[Sequence[tuple[Part, dict[str, Any]]]], list[PartProof]]


@dataclass
class MultipartUpload:
    client: Any
    bucket: str
    key: str
    create_args: dict[str, Any]
    algorithm: str | None  # None: parts carry no checksum, for endpoints that refuse them
    checksum_type: str | None
    plan: list[Part]
    strategy: str
    source_etag: str
    source_size: int
    copy_id: str
    store: CheckpointStore | None
    upload_id: str | None = None
    done: dict[int, PartProof] = field(default_factory=dict)
    resumed_parts: int = 0
    # Marks (upload_marks.py): None turns them off (no mark written, no marked upload resumed).
    marks_prefix: str | None = None
    source_bucket: str = ""
    source_key: str = ""
    source_version: str | None = None
    job_id: str | None = None
    check_parts: PartCheck | None = None
    on_unmarked: Callable[[str], None] | None = None  # told once a mark could not be written
    on_mark_left: Callable[[str], None] | None = None  # told once a mark could not be deleted
    mark_stored_as: str | None = None  # the version the upload's mark was stored as, when known
    on_part: Callable[[int], None] | None = None  # told each part's size as it lands
    resumed_from_mark: bool = False
    # The copy's checkpoint as its caller already read it (a one-item tuple: None is "none
    # saved"), so that start() does not read the store a second time in the same pass.
    checkpoint_read: tuple[Checkpoint | None] | None = None

    def start(self) -> None:
        """Resume the checkpointed upload if it still matches the source; else the marked
        upload a crashed run left for this key and source; else create one (and mark it)."""
        checkpoint = self._saved_checkpoint()
        if checkpoint is not None:
            if self._matches(checkpoint) and self._adopt(checkpoint):
                return
            self._discard(checkpoint)
        elif self.marks_prefix is not None and self._resume_marked():
            return
        checksum_args = (
            {"ChecksumAlgorithm": self.algorithm, "ChecksumType": self.checksum_type}
            if self.algorithm
            else {}
        )
        try:
            response = create_upload(self.client, self.bucket, self.key, **checksum_args, **self.create_args)
        except Exception as error:
            raise CopyFailed(
                describe(error, side="destination", action="s3:PutObject", bucket=self.bucket, key=self.key)
            ) from error
        self.upload_id = response["UploadId"]
        self._write_mark()

    def _bounds(self) -> list[tuple[int, int]]:
        return [(p.start, p.end) for p in self.plan]

    def _write_mark(self) -> None:
        """Mark the new upload as Ferry's. Without its mark a crash leaves an upload that
        only a lifecycle rule removes: the copy goes on, and the run says so once."""
        if self.marks_prefix is None or self.upload_id is None:
            return
        mark = UploadMark(
            dest_key=self.key,
            upload_id=self.upload_id,
            job_id=self.job_id,
            source_bucket=self.source_bucket,
            source_key=self.source_key,
            source_version=self.source_version,
            source_etag=self.source_etag,
            source_size=self.source_size,
            strategy=self.strategy,
            algorithm=self.algorithm,
            part_bounds=tuple(self._bounds()),
            created=datetime.now(UTC),
        )
        try:
            self.mark_stored_as = write_mark(self.client, self.bucket, mark, marks_prefix=self.marks_prefix)
        except Exception as error:
            log.warning(
                "could not mark upload %s of s3://%s/%s: %s", self.upload_id, self.bucket, self.key, error
            )
            if self.on_unmarked:
                self.on_unmarked(
                    f"multipart uploads could not be marked under s3://{self.bucket}/{self.marks_prefix} "
                    f"({describe(error, side='destination', action='s3:PutObject', bucket=self.bucket)}): "
                    "a copy killed mid-way starts again and leaves its upload to a lifecycle rule"
                )

    def _mark_matches(self, mark: UploadMark) -> bool:
        return (
            mark.source_bucket == self.source_bucket
            and mark.source_key == self.source_key
            and mark.source_version == self.source_version
            and mark.source_etag == self.source_etag
            and mark.source_size == self.source_size
            and mark.strategy == self.strategy
            and mark.algorithm == self.algorithm
            and list(mark.part_bounds) == self._bounds()
        )

    def _resume_marked(self) -> bool:
        """Adopt the newest of Ferry's open uploads of this key made for this very source and
        plan; abort Ferry's other uploads of the key (stale: another source, plan or
        algorithm, or a duplicate). Uploads without a mark are someone else's: untouched.

        A part is kept only if it checks out against the source's range (check_parts); the
        rest are sent again. Any failure to look merely means a new upload.
        """
        try:
            found = sorted(
                key_uploads(self.client, self.bucket, self.key, marks_prefix=self.marks_prefix or ""),
                key=lambda u: u.initiated,
                reverse=True,
            )
        except Exception as error:
            log.warning(
                "could not look for uploads to resume at s3://%s/%s: %s", self.bucket, self.key, error
            )
            return False
        chosen: tuple[FerryUpload, dict[int, dict[str, Any]]] | None = None
        for upload in found:
            if chosen is None and self._mark_matches(upload.mark):
                try:
                    chosen = (upload, self._listed_parts(upload.upload_id))
                    continue
                except Exception as error:  # gone since the listing: nothing to resume
                    log.info("upload %s could not be listed (%s): not resumed", upload.upload_id, error)
            self._abort_marked(upload)
        if chosen is None:
            return False
        upload, listed = chosen
        self.upload_id = upload.upload_id
        self.mark_stored_as = upload.mark.stored_as
        self.resumed_from_mark = True
        candidates = [
            (part, listed[part.number])
            for part in self.plan
            if part.number in listed and listed[part.number].get("Size") == part.size
        ]
        proofs = self.check_parts(candidates) if self.check_parts and candidates else []
        self.done = {proof.number: proof for proof in proofs}
        self.resumed_parts = len(self.done)
        log.info(
            "resuming upload %s of s3://%s/%s: %d of %d listed parts check out",
            upload.upload_id,
            self.bucket,
            self.key,
            len(proofs),
            len(listed),
        )
        return True

    def _listed_parts(self, upload_id: str) -> dict[int, dict[str, Any]]:
        """Every part S3 holds for the upload (ListParts, paginated), by number."""
        parts: dict[int, dict[str, Any]] = {}
        paginator = self.client.get_paginator("list_parts")
        for page in paginator.paginate(Bucket=self.bucket, Key=self.key, UploadId=upload_id):
            for part in page.get("Parts", []) or []:
                parts[part["PartNumber"]] = part
        return parts

    def _abort_marked(self, upload: FerryUpload) -> None:
        try:
            abort_ferry_upload(self.client, self.bucket, upload, marks_prefix=self.marks_prefix or "")
        except Exception as error:
            log.warning(
                "could not abort stale upload %s of s3://%s/%s: %s",
                upload.upload_id,
                self.bucket,
                self.key,
                error,
            )

    def _saved_checkpoint(self) -> Checkpoint | None:
        if self.checkpoint_read is not None:
            return self.checkpoint_read[0]
        return self.store.load(self.copy_id) if self.store else None

    def _matches(self, checkpoint: Checkpoint) -> bool:
        bounds = [(p.start, p.end) for p in self.plan]
        return (
            checkpoint.source_etag == self.source_etag
            and checkpoint.source_size == self.source_size
            and checkpoint.strategy == self.strategy
            and checkpoint.algorithm == self.algorithm
            and [tuple(b) for b in checkpoint.part_bounds] == bounds
        )

    def _adopt(self, checkpoint: Checkpoint) -> bool:
        """Keep the parts S3 still holds with the ETag the checkpoint recorded, and the parts
        S3 holds beyond it once they check out against the source (check_parts): a run killed
        after this checkpoint (a Lambda timeout) sent them but saved no newer one."""
        try:
            listed = self._listed_parts(checkpoint.upload_id)
        except Exception:
            return False  # the upload is gone (completed, aborted or expired): start again
        self.upload_id = checkpoint.upload_id
        for number, saved in checkpoint.parts.items():
            if listed.get(number, {}).get("ETag") == saved["etag"]:
                self.done[number] = PartProof(
                    number=number,
                    size=saved["size"],
                    checksums=saved.get("checksums", {}),
                    md5=bytes.fromhex(saved["md5"]) if saved.get("md5") else None,
                    etag=saved["etag"],
                )
        later = [
            (part, listed[part.number])
            for part in self.plan
            if part.number not in self.done
            and part.number in listed
            and listed[part.number].get("Size") == part.size
        ]
        if later and self.check_parts:
            for proof in self.check_parts(later):
                self.done[proof.number] = proof
        self.resumed_parts = len(self.done)
        return True

    def _discard(self, checkpoint: Checkpoint) -> None:
        self._abort_quietly(checkpoint.upload_id)
        self._delete_mark(checkpoint.upload_id)
        if self.store:
            self.store.delete(self.copy_id)

    def run(self, work: PartWork, executor: Executor, gate: Gate, deadline: float | None) -> bool:
        """Copy the parts not done yet (runner.run_parts). True when all are done; False when
        the deadline came first (a checkpoint saved).

        On any part failure the upload is aborted and its checkpoint dropped before raising.
        """
        upload_id = self.upload_id
        assert upload_id is not None
        lock = threading.Lock()
        failures = Failures()

        def landed(part: Part, proof: PartProof) -> None:
            with lock:
                self.done[part.number] = proof
            if self.on_part:
                self.on_part(part.size)

        try:
            finished = run_parts(
                [part for part in self.plan if part.number not in self.done],
                lambda part: work(part, upload_id),
                pool=executor,
                gate=gate,
                on_done=landed,
                stop=lambda: due(deadline),
                failures=failures,
            )
        except BaseException:
            if failures:
                self.abort()
            raise
        if not finished and len(self.done) < len(self.plan):
            self.save_checkpoint()
            return False
        return True

    def handed_over(self, strategy: str) -> Outcome:
        """The copy stopped between its parts: pending, for a later call (or run) to finish."""
        return Outcome(
            Status.PENDING,
            strategy,
            reason=self.stopped_reason(),
            parts_resumed=self.resumed_parts,
            handed_over=True,
        )

    def stopped_reason(self) -> str:
        """Why a copy stopped between its parts: its deadline (a checkpoint saved) or an
        interruption (the upload kept in the destination bucket for the next run)."""
        parts = f"{len(self.done)} of {plural(len(self.plan), 'part')}"
        if stopping():
            return f"interrupted: {parts} copied; the next run resumes the upload"
        return f"deadline: checkpointed {parts}"

    def save_checkpoint(self) -> None:
        if self.store is None:
            if stopping() and self.marks_prefix is not None and self.upload_id is not None:
                # Interrupted (Ctrl-C): the upload and its mark stay, and the next run finds
                # them in the destination bucket and resumes from the parts already there.
                return
            # Nobody could resume it: abort instead of leaving an upload that costs storage.
            self.abort()
            raise CopyFailed(
                "deadline reached before the copy finished and no checkpoint store is configured"
            )
        checkpoint = Checkpoint(
            copy_id=self.copy_id,
            upload_id=self.upload_id or "",
            strategy=self.strategy,
            source_etag=self.source_etag,
            source_size=self.source_size,
            algorithm=self.algorithm,
            part_bounds=[(p.start, p.end) for p in self.plan],
            parts={
                n: {
                    "etag": p.etag,
                    "size": p.size,
                    "checksums": p.checksums,
                    "md5": p.md5.hex() if p.md5 else None,
                }
                for n, p in self.done.items()
            },
        )
        try:
            self.store.save(checkpoint)
        except Exception as error:
            # Nothing could resume this upload from a checkpoint that is not there, and a part
            # record the store cannot hold would fail every retry the same way: stop here.
            self.abort()
            raise CopyFailed(
                f"the checkpoint of {len(self.done)} of {len(self.plan)} parts could not be saved "
                f"({_store_error(error)}); the upload was aborted"
            ) from error

    def ordered_proofs(self) -> list[PartProof]:
        return [self.done[p.number] for p in self.plan]

    def complete(self) -> dict[str, Any]:
        parts = []
        for proof in self.ordered_proofs():
            entry: dict[str, Any] = {"PartNumber": proof.number, "ETag": proof.etag}
            value = proof.checksums.get(self.algorithm) if self.algorithm else None
            if value:
                entry[f"Checksum{self.algorithm}"] = value
            parts.append(entry)
        try:
            response = self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=self.key, UploadId=self.upload_id, MultipartUpload={"Parts": parts}
            )
        except Exception as error:
            etags = [str(entry["ETag"]) for entry in parts]
            made = completed_already(self.client, self.bucket, self.key, etags, self.source_size, error)
            if made is not None:  # the first send completed it; the retry found it gone
                self._forget()
                return made
            self.abort()
            raise CopyFailed(
                describe_destination(error, "CompleteMultipartUpload", self.bucket, self.key)
            ) from error
        self._forget()
        return response

    def abort(self) -> None:
        if self.upload_id:
            self._abort_quietly(self.upload_id)
        self._forget()

    def _forget(self) -> None:
        if self.upload_id:
            self._delete_mark(self.upload_id)
        if self.store:
            try:
                self.store.delete(self.copy_id)
            except Exception as error:  # it names an upload that is gone: it expires, or is discarded
                log.warning("could not delete the checkpoint of upload %s: %s", self.upload_id, error)

    def _delete_mark(self, upload_id: str) -> None:
        """The upload ended: its mark goes, by the version it was stored as when this run knows
        it (upload_marks.delete_mark asks otherwise). One left behind is said once in the run's
        notes and removed by `ferry clean-uploads`."""
        if self.marks_prefix is None:
            return
        stored_as = self.mark_stored_as if upload_id == self.upload_id else None
        try:
            delete_mark(
                self.client,
                self.bucket,
                self.key,
                upload_id,
                marks_prefix=self.marks_prefix,
                stored_as=stored_as,
            )
        except Exception as error:
            log.warning(
                "could not delete the mark of upload %s of s3://%s/%s: %s",
                upload_id,
                self.bucket,
                self.key,
                error,
            )
            if self.on_mark_left:
                self.on_mark_left(
                    f"upload marks could not be deleted from s3://{self.bucket}/{self.marks_prefix} "
                    f"({describe(error, side='destination', action='s3:DeleteObjectVersion', bucket=self.bucket)}): "
                    "they stay until `ferry clean-uploads` removes them"
                )

    def _abort_quietly(self, upload_id: str) -> None:
        try:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=self.key, UploadId=upload_id)
        except Exception as error:  # already gone is fine; anything else is worth a log line
            log.warning(
                "could not abort upload %s of s3://%s/%s: %s", upload_id, self.bucket, self.key, error
            )


def open_upload(
    ctx: TransferContext,
    info: SourceInfo,
    target: Target,
    *,
    plan: list[Part],
    algorithm: str | None,
    strategy: str,
    create_args: dict[str, Any],
    check_parts: PartCheck | None = None,
    checkpoint_read: tuple[Checkpoint | None] | None = None,
) -> MultipartUpload:
    """Start (or resume from its checkpoint or its mark) the upload of one source into one
    target. `check_parts` proves parts found in a crashed run's upload; without it none is kept.
    `checkpoint_read`: the checkpoint as the caller read it this pass (MultipartUpload's field)."""
    upload = MultipartUpload(
        client=ctx.dest_client,
        bucket=target.bucket,
        key=target.key,
        create_args=create_args,
        algorithm=algorithm,
        checksum_type=default_type(algorithm) if algorithm else None,
        plan=plan,
        strategy=strategy,
        source_etag=info.etag,
        source_size=info.size,
        copy_id=copy_id(info.obj.bucket, info.obj.key, info.obj.version_id, target.bucket, target.key),
        store=ctx.checkpoints,
        marks_prefix=ctx.marks_prefix_for(target.bucket),
        source_bucket=info.obj.bucket,
        source_key=info.obj.key,
        source_version=info.obj.version_id,
        job_id=ctx.job_id,
        check_parts=check_parts,
        checkpoint_read=checkpoint_read,
        on_unmarked=ctx.degradations.add,
        on_mark_left=ctx.degradations.add,
        on_part=functools.partial(ctx.on_part, target) if ctx.on_part else None,
    )
    try:
        upload.start()
    except CopyFailed as failure:
        if "Tagging" in create_args and is_not_implemented(failure):
            raise ctx.refuse_dest_tags(
                "CreateMultipartUpload with x-amz-tagging answered NotImplemented"
            ) from failure
        raise
    return upload
