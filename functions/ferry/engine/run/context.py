"""What every strategy needs for one job: the two clients, the policy and the shared resources."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ferry.engine.proofs.checksums import CRC_ALGORITHMS
from ferry.engine.proofs.source import SourceInfo, tags_to_write
from ferry.engine.records.checkpoints import CheckpointStore
from ferry.engine.records.upload_marks import MarkableBuckets
from ferry.engine.run.budget import ByteBudget
from ferry.engine.run.buffers import BufferPool
from ferry.engine.run.degradations import (
    DEST_TAGS_REFUSED,
    SOURCE_TAGGING_NOT_IMPLEMENTED,
    Degradations,
    DestinationDropsTags,
    is_not_implemented,
)
from ferry.engine.run.encryption_probe import EncryptionProbe
from ferry.errors import CopyFailed
from ferry.models import CopyPolicy, Endpoint, SourceObject, Target


@dataclass
class TransferContext:
    source: Endpoint
    destination: Endpoint
    source_client: Any
    dest_client: Any
    policy: CopyPolicy
    part_executor: ThreadPoolExecutor
    part_concurrency: int
    memory: ByteBudget
    checkpoints: CheckpointStore | None
    buffers: BufferPool = field(init=False)
    # Set once the destination has refused UploadPartCopy into an upload with a checksum
    # algorithm (MinIO does): later server-side multipart copies go without one from the start.
    part_copy_checksums_refused: threading.Event = field(default_factory=threading.Event)
    # Set once a listed object turned out to need another request than the listing allowed
    # (its encryption): later server-side copies of the run start from a HEAD again.
    listing_copies_off: threading.Event = field(default_factory=threading.Event)
    # The KMS keys the destination identity may write with (kms:GenerateDataKey), when the
    # caller knows them (the pipeline's `destination_kms_key_arns`). None: not known, and a
    # source key on the same endpoint and in its region is presumed usable (the CLI's case).
    reusable_kms_keys: frozenset[str] | None = None
    # What this run learned about an endpoint lacking a feature, said once (degradations.py).
    degradations: Degradations = field(default_factory=Degradations)
    # Set once the source answered GetObjectTagging with NotImplemented: it holds no tags.
    source_tagging_unsupported: threading.Event = field(default_factory=threading.Event)
    # Set once a destination read-back found the tags Ferry wrote: no more read-backs.
    dest_tags_kept: threading.Event = field(default_factory=threading.Event)
    # The sentence every object with tags fails with, once the destination proved it drops them.
    dest_tags_refused: str | None = None
    # The pipeline job this run belongs to, written into upload marks (None for the CLI).
    job_id: str | None = None
    # Whether a destination store can hold encrypted objects (asked once per bucket).
    encryption_probe: EncryptionProbe = field(default_factory=EncryptionProbe)
    # Whether a destination bucket may hold Ferry's marks (asked once per bucket).
    markable: MarkableBuckets = field(default_factory=MarkableBuckets)
    # Told the bytes of each part of a multipart copy as it lands (the CLI's progress bar
    # counts bytes before a large object completes); called from part threads, must not raise.
    on_part: Callable[[Target, int], None] | None = None

    def __post_init__(self) -> None:
        # Part buffers are reused, and the pool keeps no more than the memory limit.
        self.buffers = BufferPool(self.memory.capacity)

    def onto_itself(self, obj: SourceObject, target: Target) -> bool:
        """A copy onto the very object it reads (an in-place rewrite): same endpoint, bucket
        and key."""
        same_endpoint = (self.source.endpoint_url, self.source.partition) == (
            self.destination.endpoint_url,
            self.destination.partition,
        )
        return same_endpoint and (obj.bucket, obj.key) == (target.bucket, target.key)

    def marks_prefix_for(self, bucket: str) -> str | None:
        """Where Ferry's own objects (upload marks, the encryption probe) go in a destination
        bucket; None when marks are off, or the bucket locks every new version until a retention
        ends (upload_marks.MarkableBuckets): nothing Ferry wrote there could be removed. The
        run says so once."""
        prefix = self.policy.marks_prefix
        if prefix is None:
            return None
        refusal = self.markable.refusal(self.dest_client, bucket)
        if refusal is not None:
            self.degradations.add(refusal)
            return None
        return prefix

    def holds_no_encryption(self, bucket: str) -> bool:
        """True when the destination's store is known to encrypt nothing (encryption_probe),
        so a copy answered without an encryption has lost none."""
        return self.encryption_probe.store_holds_no_encryption(
            self.dest_client, bucket, self.marks_prefix_for(bucket)
        )

    def payer_args(self) -> dict[str, str]:
        """Server-side requests go through the destination client but also bill the source."""
        return {"RequestPayer": "requester"} if self.source.requester_pays else {}

    def reusable_source_key(self, info: SourceInfo) -> str | None:
        """The source's KMS key, if the destination can be encrypted with it too.

        KMS keys are regional and live in one account: only a copy on the same endpoint into
        the key's own region can keep it, and only by an identity allowed to write with it
        (`reusable_kms_keys`, where known: reading needs only kms:Decrypt). Otherwise None: the
        destination bucket's default applies, and the result's note says so where that is not
        KMS. A wrong guess fails with a KMS reason, never silently.
        """
        key = info.head.get("SSEKMSKeyId")
        if not key or self.source.endpoint_url != self.destination.endpoint_url:
            return None
        if self.reusable_kms_keys is not None and key not in self.reusable_kms_keys:
            return None
        fields = key.split(":")
        key_region = fields[3] if key.startswith("arn:") and len(fields) > 3 else None
        dest_region = self.destination.region or self.source.region or self._dest_client_region()
        if key_region and dest_region and key_region != dest_region:
            return None
        return key

    def _dest_client_region(self) -> str | None:
        """Where the destination client sends requests when no endpoint names a region (the
        pipeline's workers: their own region, where the stack's destinations are)."""
        return getattr(getattr(self.dest_client, "meta", None), "region_name", None)

    def upload_algorithm(self, info: SourceInfo) -> str:
        """The caller's choice; else the source's own full-object CRC, so the two can be compared."""
        if self.policy.checksum_algorithm:
            return self.policy.checksum_algorithm
        src = info.checksum
        if src is not None and src.is_full_object and src.algorithm in CRC_ALGORITHMS:
            return src.algorithm
        return "CRC32C"

    def tags_for(self, info: SourceInfo) -> dict[str, str]:
        """The tags a new destination object gets (see source.tags_to_write), for this run.

        A source that does not implement tagging (GetObjectTagging answers NotImplemented)
        holds no tags to lose: learned from the first object, said once, and later objects do
        not ask. Tags for a destination known to drop them fail at once, with one sentence.
        """
        wants_source_tags = self.policy.tags is None and self.policy.preserve_tags
        if wants_source_tags and self.source_tagging_unsupported.is_set():
            tags: dict[str, str] = {}
        else:
            try:
                tags = tags_to_write(self.source_client, info, self.policy)
            except CopyFailed as failure:
                if not is_not_implemented(failure):
                    raise
                self.source_tagging_unsupported.set()
                self.degradations.add(SOURCE_TAGGING_NOT_IMPLEMENTED)
                info.tags = tags = {}
        if tags and self.dest_tags_refused:
            raise DestinationDropsTags(self.dest_tags_refused)
        return tags

    def refuse_dest_tags(self, how: str) -> DestinationDropsTags:
        """Learn that the destination cannot keep tags; the failure every tagged object gets."""
        if self.dest_tags_refused is None:
            self.dest_tags_refused = DEST_TAGS_REFUSED.format(how=how)
            self.degradations.add(self.dest_tags_refused)
        return DestinationDropsTags(self.dest_tags_refused)
