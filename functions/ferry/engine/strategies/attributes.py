"""What the destination object carries: the source's headers, metadata, tags, class and encryption.

S3 copies preserve nothing the caller does not ask for, so every request that creates an
object (PutObject, CreateMultipartUpload, CopyObject) gets its attributes from here.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from ferry.engine.proofs.source import SourceInfo
from ferry.models import CopyPolicy

CONTENT_HEADERS = (
    "ContentType",
    "ContentEncoding",
    "ContentDisposition",
    "ContentLanguage",
    "CacheControl",
    "Expires",
)


def encryption_args(info: SourceInfo, policy: CopyPolicy, source_key: str | None) -> dict[str, Any]:
    """A configured destination key wins; otherwise an SSE-KMS source may keep its key.

    An SSE-KMS source keeps its own key where that key can serve the destination (`source_key`,
    see TransferContext.reusable_source_key); elsewhere no header is sent, so the destination
    bucket's default encryption and key apply (`aws:kms` without a key id would mean the
    AWS-managed `aws/s3` key, which bucket policies often forbid and other accounts cannot use).

    An SSE-S3 source sends no header either: S3 encrypts a new object or copy that states no
    encryption with the destination bucket's default, which is at least SSE-S3 on every bucket
    (CopyObject `ServerSideEncryption` in the S3 API reference). An explicit `AES256` would
    override a bucket's default SSE-KMS, and be refused where a bucket policy requires aws:kms.
    """
    if policy.dest_kms_key_id:
        return {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": policy.dest_kms_key_id}
    encryption = info.encryption
    if encryption and encryption.startswith("aws:kms"):
        if not source_key:
            return {}
        args: dict[str, Any] = {"ServerSideEncryption": encryption, "SSEKMSKeyId": source_key}
        if info.head.get("BucketKeyEnabled"):
            args["BucketKeyEnabled"] = True
        return args
    return {}


def storage_class_args(info: SourceInfo, policy: CopyPolicy) -> dict[str, str]:
    storage_class = policy.storage_class or info.storage_class
    return {"StorageClass": storage_class} if storage_class and storage_class != "STANDARD" else {}


def content_args(info: SourceInfo) -> dict[str, Any]:
    return {name: info.head[name] for name in CONTENT_HEADERS if info.head.get(name) is not None}


def metadata(info: SourceInfo, policy: CopyPolicy) -> dict[str, str]:
    return dict(policy.metadata) if policy.metadata is not None else dict(info.head.get("Metadata") or {})


def tagging_string(tags: dict[str, str]) -> str:
    return urlencode(sorted(tags.items()))


def new_object_args(
    info: SourceInfo, policy: CopyPolicy, tags: dict[str, str] | None, source_key: str | None
) -> dict[str, Any]:
    """Arguments for PutObject or CreateMultipartUpload: everything is stated explicitly."""
    args: dict[str, Any] = {**content_args(info), "Metadata": metadata(info, policy)}
    args.update(storage_class_args(info, policy))
    args.update(encryption_args(info, policy, source_key))
    if tags:
        args["Tagging"] = tagging_string(tags)
    return args


def copy_object_args(
    info: SourceInfo, policy: CopyPolicy, source_key: str | None, *, in_place: bool = False
) -> dict[str, Any]:
    """Arguments for CopyObject: S3 copies metadata and tags itself unless told to replace them.

    A directive is sent only where it changes S3's default: `x-amz-metadata-directive` and
    `x-amz-tagging-directive` both default to COPY (CopyObject in the S3 API reference), and
    some S3-compatible stores answer any tagging directive with 501 NotImplemented. REPLACE
    is needed for replaced metadata, for replaced tags and for --no-tags (REPLACE with no tag
    header: the copy gets no tags); where a store refuses it, auto mode streams instead.

    A copy onto itself that changes only tags is refused by S3 ("without changing the object's
    metadata, storage class, website redirect location or encryption attributes"): in place,
    the metadata and content headers are restated from the HEAD with REPLACE, which S3 accepts.
    """
    args: dict[str, Any] = {}
    if policy.metadata is not None or in_place:
        args.update(content_args(info))
        args["Metadata"] = metadata(info, policy)
        args["MetadataDirective"] = "REPLACE"
    if policy.tags is not None:
        args["TaggingDirective"] = "REPLACE"
        args["Tagging"] = tagging_string(policy.tags)
    elif not policy.preserve_tags:
        args["TaggingDirective"] = "REPLACE"  # with no tag header: the copy gets no tags
    args.update(storage_class_args(info, policy))
    args.update(encryption_args(info, policy, source_key))
    return args
