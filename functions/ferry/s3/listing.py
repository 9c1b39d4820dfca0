"""From `s3://bucket/prefix` arguments to (source object, destination key) pairs.

A source naming one object copies that object; otherwise it is a prefix, listed page by page
(never held whole in memory), and each key lands under the destination prefix with its path
relative to the source prefix. `object_or_prefix` decides which, for every command that reads
SRC (a copy, a sync, a check, a history copy, a download): the HEAD, the object's name, whether
the filters admit it, and where it lands (`landing_key`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ferry.bucket_names import bucket_name_problem
from ferry.errors import ConfigError, describe, error_code, explain_bare
from ferry.filters import Filters, is_ferrys_own, marks_prefixes, matches_globs, split_pattern
from ferry.jobspec import JobOptions, as_folder, check_not_overlapping
from ferry.models import SourceObject, Target

# Keys the first request of a copy's listing asks for: the copy starts on them while the rest
# is listed S3's 1,000 a page (a full page took 28 ms to list and read from MinIO, 100 keys 4 ms).
FIRST_PAGE = 100


@dataclass(frozen=True)
class S3Url:
    bucket: str
    key: str

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def parse_s3_url(text: str, what: str) -> S3Url:
    if not text.startswith("s3://") or not text[5:].split("/", 1)[0]:
        raise ConfigError(f"{what} {text!r} is not an S3 URL: write s3://bucket or s3://bucket/prefix")
    bucket, _, key = text[5:].partition("/")
    problem = bucket_name_problem(bucket)
    if problem and not problem.legacy:  # no S3 has such a bucket: say so before any request
        raise ConfigError(f"{what} {text!r}: {problem.sentence(bucket)}")
    return S3Url(bucket, key)


def check_bucket(client: Any, bucket: str, side: str, region_flag: str | None = None) -> None:
    """Fail before any copy when a bucket is missing or unreachable: nothing is written.

    HeadBucket's error has no body: a bare 403 (or, on versitygw, a 404 for an unknown access
    key id) is asked again as a one-key listing, whose error says what is wrong. `region_flag`
    is the option that sets this side's region in the command at hand (default: `ferry
    copy`'s --source-region or --dest-region)."""
    region_flag = region_flag or f"--{_flag(side)}-region"
    try:
        client.head_bucket(Bucket=bucket)
    except ClientError as bare:
        error = explain_bare(bare, lambda: client.list_objects_v2(Bucket=bucket, MaxKeys=1))
        if error is None:
            raise ConfigError(_head_refused_but_listed(bare, bucket, side, region_flag)) from bare
        code = error_code(error)
        problem = bucket_name_problem(bucket)
        if problem and code in ("400", "404", "NoSuchBucket", "NotFound", "InvalidBucketName"):
            # A name only an old us-east-1 bucket could have, and the endpoint has no such bucket.
            raise ConfigError(f"{side} bucket {problem.sentence(bucket)}") from error
        if code in ("404", "NoSuchBucket", "NotFound"):
            raise ConfigError(
                f"{side} bucket {bucket!r} does not exist (check the name, {region_flag} and the endpoint)"
            ) from error
        raise ConfigError(
            describe(error, side=side, action="s3:ListBucket", bucket=bucket, region_flag=region_flag)
        ) from error
    except Exception as error:
        raise ConfigError(describe(error, side=side, action="s3:ListBucket", bucket=bucket)) from error


def _head_refused_but_listed(bare: ClientError, bucket: str, side: str, region_flag: str) -> str:
    """Garage refuses a request signed for a region other than its `s3_region` (its default:
    `garage`); a HEAD's refusal is a bare 400, while a listing's error names the region and
    botocore quietly retries there. Every other request of the copy would fail as the HEAD did."""
    status = bare.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return (
        f"the {side} endpoint refused HeadBucket on s3://{bucket} ({status} without a reason) but lists it: "
        f"most likely it expects another region: set {region_flag} to the endpoint's (Garage's default: garage)"
    )


def _flag(side: str) -> str:
    return "source" if side == "source" else "dest"


def single_object(client: Any, url: S3Url) -> SourceObject | None:
    """The object SRC names, with what its HEAD says (size, ETag, time: the filters judge it
    as a listed one), or None when SRC is a prefix."""
    if not url.key or url.key.endswith("/"):
        return None
    try:
        head = client.head_object(Bucket=url.bucket, Key=url.key)
    except ClientError as error:
        if error_code(error) in ("404", "NoSuchKey", "NotFound", "403", "AccessDenied"):
            return None
        raise ConfigError(
            describe(error, side="source", action="s3:GetObject", bucket=url.bucket, key=url.key)
        ) from error
    return SourceObject(
        url.bucket,
        url.key,
        size=head.get("ContentLength"),
        etag=(head.get("ETag") or "").strip('"') or None,
        storage_class=head.get("StorageClass"),
        last_modified=head.get("LastModified"),
    )


@dataclass(frozen=True)
class OneObject:
    """SRC names one object (its HEAD found it). `found` is what the HEAD says (size, ETag,
    time: the filters judge it as a listed one); `name`, its key's last part, is what the
    filters see and what lands in a folder. `own`: it is one of Ferry's upload marks, never
    an object of a copy; `admitted`: it is not, and the filters take it."""

    found: SourceObject
    name: str
    own: bool
    admitted: bool

    def key_in(self, dst_key: str) -> str:
        """Where it lands in DST: see `landing_key`."""
        return landing_key(dst_key, self.name)


@dataclass(frozen=True)
class Prefix:
    """SRC is a prefix: its key as a folder (`photos` is `photos/`), whose objects land under
    DST's folder by their keys relative to it."""

    folder: str


def object_or_prefix(
    client: Any, src: S3Url, filters: Filters | None = None, marks: Sequence[str] = ()
) -> OneObject | Prefix:
    """SRC as one object or as a prefix, decided one way for every door (copy, sync, check,
    --all-versions, a download): one HEAD, none for a key that is empty or ends in `/`. An
    object is judged by `filters` unless it falls under `marks` (no filters: admitted, and no
    filter asked: a --files-from list counts each name it is asked of as met)."""
    found = single_object(client, src)
    if found is None:
        return Prefix(as_folder(src.key))
    name = src.key.rsplit("/", 1)[-1]
    own = is_ferrys_own(src.key, marks)
    admitted = not own and (filters is None or filters.admits(name, found.size, found.last_modified))
    return OneObject(found, name, own, admitted)


def landing_key(dst_key: str, name: str) -> str:
    """One object (or one file) lands on DST's key, or into DST's folder under its own name
    when DST is a bucket or ends in `/`."""
    return dst_key + name if (not dst_key or dst_key.endswith("/")) else dst_key


def admitted_under(
    client: Any, src: S3Url, filters: Filters, marks: Sequence[str]
) -> Iterator[tuple[SourceObject, str]]:
    """Each object under SRC's prefix the filters take, with its key relative to the prefix;
    never one of Ferry's upload marks (`marks`)."""
    prefix = as_folder(src.key)
    for obj in list_objects(client, src.bucket, filters.listing_prefix(prefix), first_page=FIRST_PAGE):
        relative = obj.key[len(prefix) :]
        if not is_ferrys_own(obj.key, marks) and filters.admits(relative, obj.size, obj.last_modified):
            yield obj, relative


def listed_entry(client: Any, bucket: str, key: str) -> dict[str, Any] | None:
    """The key's listing entry (Key, ETag, Size, ...), None when the listing shows it absent.
    A listing, not a HEAD: S3 answers a HEAD of a missing key with 403 when the caller may
    not list the bucket (HeadObject, "Permissions"), and Ferry's identities may list only
    with an `s3:prefix` inside their locations, which a HEAD does not carry; a listing whose
    prefix is the key itself is allowed, and returns the key first if it exists. Raises the
    listing's own error."""
    page = client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
    contents = page.get("Contents") or []
    return contents[0] if contents and contents[0].get("Key") == key else None


def list_pages(client: Any, *, first_page: int | None = None, **params: Any) -> Iterator[dict[str, Any]]:
    """ListObjectsV2 page by page, as botocore's paginator pages it, through the client's
    own `list_objects_v2`: the lean path's where the client has one (a listed key costs a
    tenth of botocore's parsing there). `first_page`: the first request asks for that many
    keys only, the next ones for S3's page."""
    first = {"MaxKeys": first_page} if first_page else {}
    while True:
        page = client.list_objects_v2(**params, **first)
        first = {}
        yield page
        token = page.get("NextContinuationToken")
        if not page.get("IsTruncated") or not token:
            return
        params["ContinuationToken"] = token


def list_objects(
    client: Any,
    bucket: str,
    prefix: str,
    start_after: str = "",
    *,
    side: str = "source",
    first_page: int | None = None,
) -> Iterator[SourceObject]:
    """The objects under `prefix`, in key order; after `start_after` when given. `side` names
    the side in an error (the source, or the destination that sync and check list too);
    `first_page`, see list_pages."""
    after = {"StartAfter": start_after} if start_after else {}
    try:
        for page in list_pages(client, first_page=first_page, Bucket=bucket, Prefix=prefix, **after):
            for item in page.get("Contents", []):
                yield SourceObject(
                    bucket=bucket,
                    key=item["Key"],
                    size=item.get("Size"),
                    etag=item.get("ETag", "").strip('"') or None,
                    storage_class=item.get("StorageClass"),
                    last_modified=item.get("LastModified"),
                )
    except ClientError as error:
        raise ConfigError(describe(error, side=side, action="s3:ListBucket", bucket=bucket)) from error


def matches(relative_key: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    """Globs apply to the key relative to the source prefix; excludes win over includes."""
    return matches_globs(relative_key, include, exclude)


def plan_pairs(
    client: Any,
    src: S3Url,
    dst: S3Url,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    *,
    filters: Filters | None = None,
    marks_prefix: str | None = None,
) -> Iterator[tuple[SourceObject, Target]]:
    """Each source object the filters take (`filters`, else the globs) and where it lands. An
    object left out is not yielded: it is no object of the copy, and is not counted. Ferry's
    own upload marks (filters.marks_prefixes: the configured folder and the default one) are
    never objects, as sync and check leave them out: a source that is itself a Ferry
    destination holds them."""
    chosen = filters or Filters(include=tuple(include), exclude=tuple(exclude))
    marks = marks_prefixes(marks_prefix)
    source = object_or_prefix(client, src, chosen, marks)
    if isinstance(source, OneObject):
        if source.admitted:
            # Only the name goes on: the copy takes its evidence from its own HEAD, as always.
            yield SourceObject(src.bucket, src.key), Target(dst.bucket, source.key_in(dst.key))
        return
    dest_prefix = as_folder(dst.key)
    for obj, relative in admitted_under(client, src, chosen, marks):
        yield obj, Target(dst.bucket, dest_prefix + relative)


def check_overlap(client: Any, src: S3Url, dst: S3Url, options: JobOptions, *, same_endpoint: bool) -> None:
    """Refuse SRC and DST that overlap on one endpoint (see `check_not_overlapping`), before
    anything is written. Only a same-bucket copy pays the HEAD that tells an object from a prefix."""
    if not same_endpoint or src.bucket != dst.bucket:
        return
    source = object_or_prefix(client, src)
    if isinstance(source, OneObject):
        check_not_overlapping(
            src.bucket, src.key, dst.bucket, source.key_in(dst.key), options, source_is_object=True
        )
    else:
        check_not_overlapping(src.bucket, source.folder, dst.bucket, as_folder(dst.key), options)


def wildcard_source(client: Any, src: S3Url, filters: Filters) -> tuple[S3Url, Filters]:
    """SRC with wildcards (`s3://b/logs/*.gz`) as its folder (`s3://b/logs/`) and the filters
    with its pattern (`*.gz`), which every door then applies to keys relative to that folder,
    as --include does (filters.KeyPattern says how it matches); SRC unchanged without
    wildcards. A key that holds a wildcard character and names an existing object is that
    object, as it was before wildcards were read (one HEAD, which the copy would make anyway)."""
    split = split_pattern(src.key)
    if split is None or isinstance(object_or_prefix(client, src), OneObject):
        return src, filters
    folder, pattern = split
    return S3Url(src.bucket, folder), replace(filters, pattern=pattern)


def nothing_matched(client: Any, src: S3Url, filters: Filters) -> str:
    """Why SRC matched nothing: globs that left out every object, or no object there; then
    the nearest key listed from SRC as typed (`s3://b/photo` when `photos/` exists). A request
    or two, on this path only."""
    if filters.pattern is not None:
        return _nothing_matched_pattern(client, src, filters)
    shown = f"s3://{src.bucket}/{src.key}"
    if filters != Filters() and _first_key(client, src.bucket, src.key) is not None:
        return f"nothing matched {shown}: there are objects, but the filters (--include, --exclude, sizes, ages, --files-from) left out every one"
    near = _near_prefix(client, src)
    hint = f"; did you mean s3://{src.bucket}/{near}?" if near else ""
    return f"nothing matched {shown}: no object under it{hint}"


def _nothing_matched_pattern(client: Any, src: S3Url, filters: Filters) -> str:
    """Why a SRC with wildcards matched nothing: no key under its folder matches it; or keys
    do, but the filters left out every one; or there is no object under the folder at all
    (then the nearest folder, as for a mistyped prefix)."""
    assert filters.pattern is not None
    folder = f"s3://{src.bucket}/{src.key}"
    shown = folder + filters.pattern.text
    if _first_key(client, src.bucket, src.key) is None:
        near = _near_prefix(client, src)
        hint = f"; did you mean s3://{src.bucket}/{near}?" if near else ""
        return f"nothing matched {shown}: no object under {folder}{hint}"
    if filters.chooses and _any_matching(client, src, replace(Filters(), pattern=filters.pattern)):
        return (
            f"nothing matched {shown}: keys match it, but the filters (--include, --exclude, sizes, ages, "
            "--files-from) left out every one"
        )
    return f"nothing matched {shown}: no key under {folder} matches it"


def _any_matching(client: Any, src: S3Url, filters: Filters) -> bool:
    """Whether a key under SRC's folder matches the filters (the listing read to the first)."""
    prefix = as_folder(src.key)
    try:
        listed = list_objects(client, src.bucket, filters.listing_prefix(prefix))
        return any(filters.admits_key(obj.key[len(prefix) :]) for obj in listed)
    except (ConfigError, ClientError, BotoCoreError):
        return False


def _near_prefix(client: Any, src: S3Url) -> str | None:
    """The first key listed from SRC's own text (no folder slash added), cut after the next
    `/`: `photo` finds `photos/`, `photos/2024` finds `photos/2024-01/`."""
    typed = src.key.rstrip("/")
    key = _first_key(client, src.bucket, typed) if typed else None
    if key is None:
        return None
    slash = key.find("/", len(typed))
    return key if slash < 0 else key[: slash + 1]


def _first_key(client: Any, bucket: str, prefix: str) -> str | None:
    try:
        page = client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
    except (ClientError, BotoCoreError):
        return None  # only a hint: the one-line refusal stands without it
    contents = page.get("Contents") or []
    return str(contents[0]["Key"]) if contents else None
