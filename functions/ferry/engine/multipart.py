"""One multipart upload from start to finish, shared by server-side and streaming copies.

It owns the upload's life: create it (or resume it from a checkpoint), run parts under a
gate and a deadline, save a checkpoint when time runs out, complete it, or abort it. An
upload is never left open unless a checkpoint names it for a later call to finish.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from ferry.engine.checkpoints import Checkpoint, CheckpointStore, copy_id
from ferry.engine.checksums import default_type
from ferry.engine.context import TransferContext
from ferry.engine.degradations import is_not_implemented
from ferry.engine.lost_replies import completed_already, create_upload
from ferry.engine.source import SourceInfo
from ferry.engine.verify import PartProof
from ferry.errors import CopyFailed, describe
from ferry.limits import Part
from ferry.models import Target

log = logging.getLogger(__name__)


def _root_cause(failures: list[BaseException]) -> BaseException:
    """The failure that started it, not a part that merely stopped because of it."""
    for error in failures:
        if not getattr(error, "is_cancellation", False):
            return error
    return failures[0]


class Gate(Protocol):
    def acquire(self, n: int) -> None: ...
    def release(self, n: int) -> None: ...


PartWork = Callable[[Part, str], PartProof]


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

    def start(self) -> None:
        """Resume the checkpointed upload if it still matches the source, else create one."""
        checkpoint = self.store.load(self.copy_id) if self.store else None
        if checkpoint is not None:
            if self._matches(checkpoint) and self._adopt(checkpoint):
                return
            self._discard(checkpoint)
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
        """Keep only parts S3 still holds with the ETag the checkpoint recorded."""
        try:
            listed = self._list_parts(checkpoint.upload_id)
        except Exception:
            return False  # the upload is gone (completed, aborted or expired): start again
        self.upload_id = checkpoint.upload_id
        for number, saved in checkpoint.parts.items():
            if listed.get(number) == saved["etag"]:
                self.done[number] = PartProof(
                    number=number,
                    size=saved["size"],
                    checksums=saved.get("checksums", {}),
                    md5=bytes.fromhex(saved["md5"]) if saved.get("md5") else None,
                    etag=saved["etag"],
                )
        self.resumed_parts = len(self.done)
        return True

    def _list_parts(self, upload_id: str) -> dict[int, str]:
        parts: dict[int, str] = {}
        paginator = self.client.get_paginator("list_parts")
        for page in paginator.paginate(Bucket=self.bucket, Key=self.key, UploadId=upload_id):
            for part in page.get("Parts", []):
                parts[part["PartNumber"]] = part["ETag"]
        return parts

    def _discard(self, checkpoint: Checkpoint) -> None:
        self._abort_quietly(checkpoint.upload_id)
        if self.store:
            self.store.delete(self.copy_id)

    def run(self, work: PartWork, executor: Executor, gate: Gate, deadline: float | None) -> bool:
        """Copy the parts not done yet. True when all are done; False when the deadline came first.

        On any part failure the upload is aborted and its checkpoint dropped before raising.
        """
        assert self.upload_id is not None
        failure: list[BaseException] = []
        futures: list[Future[PartProof]] = []
        stopped = False
        lock = threading.Lock()

        def run_one(part: Part) -> PartProof:
            try:
                proof = work(part, self.upload_id)  # type: ignore[arg-type]
                with lock:
                    self.done[part.number] = proof
                return proof
            except BaseException as error:
                failure.append(error)
                raise
            finally:
                gate.release(part.size)

        for part in self.plan:
            if part.number in self.done:
                continue
            if failure:
                break
            if deadline is not None and time.monotonic() >= deadline:
                stopped = True
                break
            gate.acquire(part.size)
            if failure:  # a part failed while this one waited for its slot
                gate.release(part.size)
                break
            if deadline is not None and time.monotonic() >= deadline:  # the wait used up the time
                gate.release(part.size)
                stopped = True
                break
            try:
                futures.append(executor.submit(run_one, part))
            except BaseException as error:
                gate.release(part.size)
                failure.append(error)
                break
        for future in futures:
            future.exception()  # wait for every part in flight, failed or not
        if failure:
            self.abort()
            raise _root_cause(failure)
        if stopped and len(self.done) < len(self.plan):
            self.save_checkpoint()
            return False
        return True

    def save_checkpoint(self) -> None:
        if self.store is None:
            # Nobody could resume it: abort instead of leaving an upload that costs storage.
            self.abort()
            raise CopyFailed(
                "deadline reached before the copy finished and no checkpoint store is configured"
            )
        self.store.save(
            Checkpoint(
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
        )

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
                describe(
                    error,
                    side="destination",
                    action="CompleteMultipartUpload",
                    bucket=self.bucket,
                    key=self.key,
                )
            ) from error
        self._forget()
        return response

    def abort(self) -> None:
        if self.upload_id:
            self._abort_quietly(self.upload_id)
        self._forget()

    def _forget(self) -> None:
        if self.store:
            self.store.delete(self.copy_id)

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
) -> MultipartUpload:
    """Start (or resume from its checkpoint) the upload of one source into one target."""
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
