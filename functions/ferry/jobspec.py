"""The job spec: what a pipeline execution is asked to copy, and how. One schema, one validator.

The state machine's input is a job spec; `ferry job validate FILE` checks one offline; the
CLI's own options go through `parse_options` too, so a job means the same on every door.
Every error names the field that is wrong (`options.mode`, `source.manifest.format`) and
what would be right.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ferry.bucket_names import bucket_name_problem
from ferry.errors import ConfigError
from ferry.kms_keys import kms_key_problem
from ferry.limits import DEFAULT_MULTIPART_THRESHOLD, parse_size
from ferry.models import CHECKSUM_ALGORITHMS, DEFAULT_MARKS_PREFIX, RESTORE_TIERS, Compare, CopyPolicy, Mode

MANIFEST_FORMATS = ("csv", "jsonl", "inventory")
# A job id is its Step Functions execution's name, and a part of keys in S3, items in the
# ledger and folder names on disk (`ferry run`'s reports). Step Functions takes 1-80 characters
# without whitespace, brackets < > { } [ ], wildcards ? *, the characters " # % \ ^ | ~ ` $ & ,
# ; : / or control characters (U+0000-001F, U+007F-009F), and keeps CloudWatch logging only
# for names of 0-9, A-Z, a-z, - and _ (StartExecution API reference). Ferry's rule is the part
# of that every one of those places takes: ASCII letters, digits, - _ and ., a letter or digit
# first (so never `.` or `..`), matched whole: `$` would let a trailing newline through.
JOB_ID_SHAPE = "1-80 letters, digits, '-', '_' or '.', starting with a letter or digit"
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,79}")

# S3's own rules, checked before anything moves: broken, each would fail every object alike.
# The storage classes of PutObject/CopyObject's StorageClass (the S3 API model's enum; a test
# compares this list with botocore's model).
STORAGE_CLASSES = (
    "STANDARD",
    "REDUCED_REDUNDANCY",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER",
    "DEEP_ARCHIVE",
    "OUTPOSTS",
    "GLACIER_IR",
    "SNOW",
    "EXPRESS_ONEZONE",
    "FSX_OPENZFS",
    "FSX_ONTAP",
    "AWS_BACKUP_WARM",
    "AWS_BACKUP_LOW_COST_WARM",
)
MAX_KEY_BYTES = 1024  # an object key, UTF-8
MAX_TAGS = 10  # per object
MAX_TAG_KEY_CHARS, MAX_TAG_VALUE_CHARS = 128, 256
# Tag keys and values: Unicode letters, digits, spaces and + - = . _ : / @ (S3 object tagging).
_TAG_TEXT = re.compile(r"^[\w\s+\-=.:/@]*$")
MAX_METADATA_BYTES = 2048  # user metadata: the UTF-8 bytes of every key and value together
# Metadata names travel as x-amz-meta-NAME headers: an HTTP token (RFC 9110).
_HEADER_TOKEN = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
# Step Functions takes at most 256 KiB of execution input, and Prepare returns the spec again
# inside its result (the next state's input): a little is kept for the result's other fields.
MAX_SPEC_BYTES = 250 * 1024


class SpecError(ConfigError):
    """A job spec is wrong; the message starts with the field's name."""


def as_folder(prefix: str) -> str:
    """`photos` and `photos/` both mean the folder `photos/` (never `photos2/`); '' is the bucket."""
    return prefix if not prefix or prefix.endswith("/") else prefix + "/"


@dataclass(frozen=True)
class JobOptions:
    """How to copy: the engine's policy plus the key filters."""

    policy: CopyPolicy = field(default_factory=CopyPolicy)
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    # Finalize aborts the job's own marked uploads still open at least this old (a crash left
    # them); 0: every one, since no batch of the job is running any more.
    abort_uploads_after_seconds: int = 0
    # Every version of each key, oldest first, delete markers reproduced (engine/versions/version_copy):
    # the Map then reads the keys with a history (pipeline/history_keys.py), not the current objects.
    all_versions: bool = False


@dataclass(frozen=True)
class Manifest:
    bucket: str
    key: str
    format: str


@dataclass(frozen=True)
class ReplicationTag:
    """The replication a job runs for (set by the starter): with `deletes` on, the copy path
    records what it wrote at each destination key, so a later delete can be proved safe."""

    name: str
    deletes: bool = False


@dataclass(frozen=True)
class JobSpec:
    """A validated job. `source_prefix` is stripped from each key and replaced by
    `destination_prefix`; a manifest's rows name their own bucket or use `source_bucket`."""

    job_id: str
    destination_bucket: str
    destination_prefix: str
    options: JobOptions
    source_bucket: str | None = None
    source_prefix: str = ""
    manifest: Manifest | None = None
    replication: ReplicationTag | None = None

    @property
    def reader(self) -> str:
        """Which Distributed Map reads the items: `listing`, the manifest's format, or
        `versions` (the keys with a history, which the ListVersions loop lists:
        options.all_versions)."""
        if self.options.all_versions:
            return "versions"
        return self.manifest.format if self.manifest else "listing"

    def to_dict(self) -> dict[str, Any]:
        """The normalised spec, as stored in the job record and passed to every batch."""
        source: dict[str, Any] = {"prefix": self.source_prefix}
        if self.source_bucket:
            source["bucket"] = self.source_bucket
        if self.manifest:
            source["manifest"] = {
                "bucket": self.manifest.bucket,
                "key": self.manifest.key,
                "format": self.manifest.format,
            }
        spec = {
            "job_id": self.job_id,
            "source": source,
            "destination": {"bucket": self.destination_bucket, "prefix": self.destination_prefix},
            "options": options_to_dict(self.options),
        }
        if self.replication:
            spec["replication"] = {"name": self.replication.name, "deletes": self.replication.deletes}
        return spec


def changes_attributes(policy: CopyPolicy) -> bool:
    """True when a copy asks for something the source does not already say (a storage class,
    metadata, tags or their removal, a KMS key): a copy onto itself is then a rewrite."""
    return bool(
        policy.storage_class
        or policy.metadata is not None
        or policy.tags is not None
        or not policy.preserve_tags
        or policy.dest_kms_key_id
    )


def check_not_overlapping(
    source_bucket: str,
    source_prefix: str,
    destination_bucket: str,
    destination_prefix: str,
    options: JobOptions,
    *,
    source_is_object: bool = False,
) -> None:
    """Refuse a copy whose writes land in what it lists, before anything is written.

    Callers pass the two sides only when they are the same place (one endpoint; a bucket name
    is one bucket there). A destination under the source prefix would list its own copies and
    copy them again without end; a source under the destination prefix writes some objects
    back into the source, over other source objects. Both are allowed once an exclude glob
    keeps the overlapping keys out of the listing. The same prefix is an in-place rewrite:
    allowed when it changes an attribute, refused when nothing would change.
    """
    src, dst = f"s3://{source_bucket}/{source_prefix}", f"s3://{destination_bucket}/{destination_prefix}"
    if source_bucket != destination_bucket:
        return
    if source_is_object:
        if source_prefix == destination_prefix and not changes_attributes(options.policy):
            raise SpecError(f"destination: {dst} is the source object itself: nothing would change; {_ASK}")
        return
    if source_prefix == destination_prefix:
        if not changes_attributes(options.policy):
            raise SpecError(f"destination: {dst} is the source itself: nothing would change; {_ASK}")
        return
    if destination_prefix.startswith(source_prefix):
        inner = destination_prefix[len(source_prefix) :]
        if not _excluded(inner, options.exclude):
            raise SpecError(
                f"destination: {dst} is inside the source {src}: its copies would be listed and "
                f"copied again, without end; choose a destination outside the source, or exclude "
                f"it with the glob '{inner}*'"
            )
    elif source_prefix.startswith(destination_prefix):
        inner = source_prefix[len(destination_prefix) :]
        if not _excluded(inner, options.exclude):
            raise SpecError(
                f"destination: {dst} contains the source {src}: objects under {src}{inner} would "
                f"be written back into the source, over other source objects; choose another "
                f"destination, or exclude them with the glob '{inner}*'"
            )


_ASK = "to rewrite objects in place, ask for a change (storage class, metadata, tags or a KMS key)"


def _excluded(relative_prefix: str, exclude: Sequence[str]) -> bool:
    """True when an exclude glob surely matches every key under `relative_prefix`: a literal
    stem that the prefix starts with, then `*` (fnmatch's `*` also matches `/`)."""
    return any(
        glob.endswith("*")
        and not any(c in glob[:-1] for c in "*?[")
        and relative_prefix.startswith(glob[:-1])
        for glob in exclude
    )


def parse_job_spec(data: Any, default_job_id: str | None = None) -> JobSpec:
    """Validate a job spec (the state machine's input, or a file) into a `JobSpec`."""
    spec = _mapping(data, "the job spec")
    _no_unknown(spec, {"job_id", "source", "destination", "options", "replication"}, "")
    job_id = check_job_id(spec.get("job_id", default_job_id))
    source = _mapping(spec.get("source"), "source")
    destination = _mapping(spec.get("destination"), "destination")
    _no_unknown(destination, {"bucket", "prefix"}, "destination.")
    _no_unknown(source, {"bucket", "prefix", "manifest"}, "source.")
    manifest = _manifest(source["manifest"]) if "manifest" in source else None
    source_bucket = source.get("bucket")
    if source_bucket is not None or manifest is None:
        source_bucket = _bucket(source_bucket, "source.bucket")
    prefix = _string(source.get("prefix", ""), "source.prefix")
    check_spec_size(spec)
    parsed = JobSpec(
        job_id=job_id,
        source_bucket=source_bucket,
        source_prefix=as_folder(prefix) if manifest is None else prefix,
        manifest=manifest,
        destination_bucket=_bucket(destination.get("bucket"), "destination.bucket"),
        destination_prefix=as_folder(_string(destination.get("prefix", ""), "destination.prefix")),
        options=parse_options(spec.get("options", {})),
        replication=_replication(spec["replication"]) if "replication" in spec else None,
    )
    _check_keys(parsed)
    return parsed


def check_job_id(job_id: Any) -> str:
    """The one rule for a job id (JOB_ID_SHAPE), wherever an id comes from: a spec, `--job-id`,
    an execution's name (Prepare), or one Ferry makes (a replication's batch, a retry)."""
    if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
        raise SpecError(f"job_id: {job_id!r} must be {JOB_ID_SHAPE} (it names the job's execution)")
    return job_id


def validate_job_spec(data: Any, default_job_id: str | None = None) -> JobSpec:
    """The one validator of a job spec, used by every door (`ferry job validate`, `ferry job
    start`, `ferry run`, Prepare, `cdk synth`'s schedules): the spec's shape and S3's rules
    (`parse_job_spec`), then a listing job whose destination overlaps its source."""
    spec = parse_job_spec(data, default_job_id)
    check_all_versions(spec)
    check_spec_not_overlapping(spec)
    return spec


def check_all_versions(spec: JobSpec) -> None:
    """What options.all_versions cannot go with, refused before anything is written. A history
    is listed from the source bucket (a manifest names objects, not histories), found at the
    destination by its own history (skip_existing off would copy every version again, doubling
    the history), and is copied onto another place (onto itself it would already be there)."""
    if not spec.options.all_versions:
        return
    if spec.manifest:
        raise SpecError(
            "options.all_versions: cannot go with source.manifest: every version of each key is listed "
            "from source.bucket; give source.bucket and source.prefix, or copy the manifest's objects "
            "without all_versions"
        )
    if not spec.options.policy.skip_existing:
        raise SpecError(
            "options.skip_existing: all_versions finds what is already there by the destination's "
            "history; leave out skip_existing (or set it true)"
        )
    if spec.options.policy.compare != Compare.CHECKSUM:  # the history's own test: any other is not run
        raise SpecError(
            f"options.compare: {spec.options.policy.compare} cannot go with all_versions: a history "
            "is matched version by version by its contents; leave out compare"
        )
    if spec.replication:
        raise SpecError(
            "options.all_versions: a replication job copies the objects its events name; "
            "run all_versions as a job of its own"
        )
    if (spec.source_bucket, spec.source_prefix) == (spec.destination_bucket, spec.destination_prefix):
        raise SpecError(
            f"destination: s3://{spec.destination_bucket}/{spec.destination_prefix} is the source "
            "itself: a history cannot be copied onto itself; choose another destination"
        )


def check_spec_not_overlapping(spec: JobSpec) -> None:
    """Prepare's rule for a listing job: its destination must not overlap what it lists (a
    manifest names its keys: a row onto itself is settled per row, items.plan_item)."""
    if spec.source_bucket and not spec.manifest:
        check_not_overlapping(
            spec.source_bucket,
            spec.source_prefix,
            spec.destination_bucket,
            spec.destination_prefix,
            spec.options,
        )


def check_spec_size(data: Any) -> None:
    """A spec over Step Functions' input quota would be refused by StartExecution, or (through
    `ferry run`) cost minutes and hundreds of MiB for every batch that reads it."""
    size = len(
        json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8", "replace")
    )
    if size > MAX_SPEC_BYTES:
        raise SpecError(
            f"the job spec: {size:,} bytes, over the {MAX_SPEC_BYTES:,} a job can take (Step Functions "
            "takes 256 KiB of input): shorten options.include/options.exclude with wider globs, or "
            "list the keys in a manifest (source.manifest)"
        )


def key_text_problem(value: str) -> str | None:
    """Why `value` cannot be (part of) an S3 key, or None: not UTF-8 (a lone surrogate), a
    control character (S3's XML listings cannot carry it; S3 advises against it), or over
    S3's 1,024 bytes."""
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid Unicode text (a lone surrogate): S3 keys are UTF-8"
    for char in value:
        if unicodedata.category(char) == "Cc":
            return f"holds the control character U+{ord(char):04X}: S3 listings cannot carry it; remove it"
    if size > MAX_KEY_BYTES:
        return f"is {size:,} bytes in UTF-8, over S3's {MAX_KEY_BYTES:,}-byte key limit"
    return None


def _check_keys(spec: JobSpec) -> None:
    """Prefixes and keys S3 could never hold: every object would fail alike after the fan-out."""
    texts = {"source.prefix": spec.source_prefix, "destination.prefix": spec.destination_prefix}
    if spec.manifest:
        texts["source.manifest.key"] = spec.manifest.key
    texts["options.marks_prefix"] = spec.options.policy.marks_prefix
    for where, text in texts.items():
        problem = key_text_problem(text)
        if problem:
            raise SpecError(f"{where}: {text[:60]!r} {problem}")
    if len(spec.destination_prefix.encode()) >= MAX_KEY_BYTES:
        raise SpecError(
            f"destination.prefix: {len(spec.destination_prefix.encode()):,} bytes leaves no room for a key "
            f"under S3's {MAX_KEY_BYTES:,}-byte limit: every object would fail; shorten it"
        )


def _check_storage_class(value: str, where: str) -> str:
    upper = value.upper()
    if upper not in STORAGE_CLASSES:
        raise SpecError(f"{where}: {value!r} is not an S3 storage class; one of {', '.join(STORAGE_CLASSES)}")
    return upper


def _check_tags(tags: Mapping[str, str] | None, where: str) -> None:
    """S3's object tag rules (at most 10; key 1-128 and value 0-256 characters of letters,
    digits, spaces and + - = . _ : / @; no aws: keys)."""
    if not tags:
        return
    if len(tags) > MAX_TAGS:
        raise SpecError(f"{where}: {len(tags)} tags; S3 keeps at most {MAX_TAGS} per object")
    for key, value in tags.items():
        if not 1 <= len(key) <= MAX_TAG_KEY_CHARS:
            raise SpecError(f"{where}: tag key {key[:40]!r} must be 1-{MAX_TAG_KEY_CHARS} characters")
        if len(value) > MAX_TAG_VALUE_CHARS:
            raise SpecError(f"{where}.{key}: the value must be at most {MAX_TAG_VALUE_CHARS} characters")
        if key.lower().startswith("aws:"):
            raise SpecError(f"{where}: tag key {key!r}: keys starting with aws: are reserved for AWS")
        for text, what in ((key, "key"), (value, "value")):
            if not _TAG_TEXT.match(text):
                raise SpecError(
                    f"{where}: tag {what} {text[:40]!r} may hold only letters, digits, spaces and + - = . _ : / @"
                )


def _check_metadata(metadata: Mapping[str, str] | None, where: str) -> None:
    """User metadata travels as x-amz-meta-* headers: names are HTTP tokens, values ASCII
    (botocore sends nothing else), and S3 keeps at most 2 KB of them in all."""
    if not metadata:
        return
    size = 0
    for name, value in metadata.items():
        if not _HEADER_TOKEN.match(name):
            raise SpecError(
                f"{where}: name {name[:40]!r} must be letters, digits and - _ . (an HTTP header name)"
            )
        if not value.isascii() or any(unicodedata.category(c) == "Cc" and c != "\t" for c in value):
            raise SpecError(
                f"{where}.{name}: the value must be printable ASCII (S3 metadata travels in HTTP headers)"
            )
        size += len(name.encode()) + len(value.encode())
    if size > MAX_METADATA_BYTES:
        raise SpecError(
            f"{where}: {size:,} bytes of names and values; S3 keeps at most {MAX_METADATA_BYTES:,}"
        )


def _replication(data: Any) -> ReplicationTag:
    tag = _mapping(data, "replication")
    _no_unknown(tag, {"name", "deletes"}, "replication.")
    name = tag.get("name")
    if not isinstance(name, str) or not name:
        raise SpecError("replication.name: give the replication's name")
    return ReplicationTag(name, _bool(tag.get("deletes", False), "replication.deletes"))


def _manifest(data: Any) -> Manifest:
    manifest = _mapping(data, "source.manifest")
    _no_unknown(manifest, {"bucket", "key", "format"}, "source.manifest.")
    key = manifest.get("key")
    if not isinstance(key, str) or not key:
        raise SpecError("source.manifest.key: give the manifest's object key")
    fmt = manifest.get("format")
    if fmt not in MANIFEST_FORMATS:
        raise SpecError(f"source.manifest.format: {fmt!r} is not one of {', '.join(MANIFEST_FORMATS)}")
    return Manifest(_bucket(manifest.get("bucket"), "source.manifest.bucket"), key, fmt)


OPTION_FIELDS = (
    "mode",
    "storage_class",
    "checksum_algorithm",
    "include",
    "exclude",
    "skip_existing",
    "compare",
    "restore_tier",
    "restore_days",
    "metadata",
    "tags",
    "preserve_tags",
    "kms_key_id",
    "part_size",
    "multipart_threshold",
    "dry_run",
    "marks_prefix",
    "abort_uploads_after_seconds",
    "all_versions",
)
MAX_ABORT_AFTER_SECONDS = 365 * 24 * 3600


def parse_options(data: Any, name: Callable[[str], str] | None = None) -> JobOptions:
    """Validate copy options. `name` turns a field into what the user wrote (the CLI passes
    `--part-size` for `part_size`); by default errors say `options.part_size`."""
    label = name or (lambda f: f"options.{f}")
    options = _mapping(data, "options")
    unknown = set(options) - set(OPTION_FIELDS)
    if unknown:
        raise SpecError(f"{label(sorted(unknown)[0])}: unknown option; known are {', '.join(OPTION_FIELDS)}")
    get = options.get

    def choice(f: str, choices: Sequence[str], default: str | None) -> str | None:
        value = get(f, default)
        if value is None:
            return None
        if not isinstance(value, str) or value.lower() not in choices:
            raise SpecError(f"{label(f)}: {value!r} is not one of {', '.join(choices)}")
        return value.lower()

    algorithm = get("checksum_algorithm")
    if algorithm is not None and (
        not isinstance(algorithm, str) or algorithm.upper() not in CHECKSUM_ALGORITHMS
    ):
        raise SpecError(
            f"{label('checksum_algorithm')}: {algorithm!r} is not one of {', '.join(CHECKSUM_ALGORITHMS)}"
        )
    storage_class = get("storage_class")
    if storage_class is not None:
        storage_class = _check_storage_class(
            _string(storage_class, label("storage_class")), label("storage_class")
        )
    tags, metadata = _string_map(get("tags"), label("tags")), _string_map(get("metadata"), label("metadata"))
    _check_tags(tags, label("tags"))
    _check_metadata(metadata, label("metadata"))
    restore_days = get("restore_days", 7)
    if isinstance(restore_days, bool) or not isinstance(restore_days, int) or not 1 <= restore_days <= 30000:
        raise SpecError(
            f"{label('restore_days')}: {restore_days!r} must be a whole number of days, 1 or more"
        )
    abort_after = get("abort_uploads_after_seconds", 0)
    if (
        isinstance(abort_after, bool)
        or not isinstance(abort_after, int)
        or not 0 <= abort_after <= MAX_ABORT_AFTER_SECONDS
    ):
        raise SpecError(
            f"{label('abort_uploads_after_seconds')}: {abort_after!r} must be a whole number of "
            f"seconds from 0 (abort at Finalize) to {MAX_ABORT_AFTER_SECONDS} (a year)"
        )
    threshold = _size(get("multipart_threshold"), label("multipart_threshold"))
    kms_key_id = _optional_string(get("kms_key_id"), label("kms_key_id"))
    kms_problem = kms_key_problem(kms_key_id, None) if kms_key_id is not None else None
    if kms_problem:  # the key's form; its region is checked where the destination's is known
        raise SpecError(f"{label('kms_key_id')}: {kms_problem}")
    try:
        policy = CopyPolicy(
            mode=Mode(choice("mode", [m.value for m in Mode], "auto")),
            part_size=_size(get("part_size"), label("part_size")),
            multipart_threshold=DEFAULT_MULTIPART_THRESHOLD if threshold is None else threshold,
            checksum_algorithm=algorithm.upper() if algorithm else None,
            storage_class=storage_class,
            metadata=metadata,
            tags=tags,
            preserve_tags=_bool(get("preserve_tags", True), label("preserve_tags")),
            dest_kms_key_id=kms_key_id,
            skip_existing=_bool(get("skip_existing", True), label("skip_existing")),
            compare=Compare(choice("compare", [c.value for c in Compare], "checksum")),
            restore=choice("restore_tier", list(RESTORE_TIERS), None),
            restore_days=restore_days,
            dry_run=_bool(get("dry_run", False), label("dry_run")),
            marks_prefix=_marks_prefix(get("marks_prefix", DEFAULT_MARKS_PREFIX), label("marks_prefix")),
        )
    except SpecError:
        raise
    except ConfigError as error:  # a range the engine checks (part size, threshold)
        raise SpecError(f"{_field_of(str(error), label)}{error}") from error
    return JobOptions(
        policy=policy,
        include=_globs(get("include", []), label("include")),
        exclude=_globs(get("exclude", []), label("exclude")),
        abort_uploads_after_seconds=abort_after,
        all_versions=_bool(get("all_versions", False), label("all_versions")),
    )


def options_to_dict(options: JobOptions) -> dict[str, Any]:
    """The inverse of `parse_options`: what a batch worker gets back in its input."""
    p = options.policy
    data: dict[str, Any] = {
        "mode": str(p.mode),
        "storage_class": p.storage_class,
        "checksum_algorithm": p.checksum_algorithm,
        "include": list(options.include),
        "exclude": list(options.exclude),
        "skip_existing": p.skip_existing,
        "compare": str(p.compare),
        "restore_tier": p.restore,
        "restore_days": p.restore_days,
        "metadata": p.metadata,
        "tags": p.tags,
        "preserve_tags": p.preserve_tags,
        "kms_key_id": p.dest_kms_key_id,
        "part_size": p.part_size,
        "multipart_threshold": p.multipart_threshold,
        "dry_run": p.dry_run,
        "marks_prefix": p.marks_prefix,
        "abort_uploads_after_seconds": options.abort_uploads_after_seconds,
        "all_versions": True if options.all_versions else None,  # absent unless asked for
    }
    return {k: v for k, v in data.items() if v is not None}


def _marks_prefix(value: Any, name: str) -> str:
    """Where upload marks live in each destination bucket: a folder (`ops/marks` means `ops/marks/`)."""
    if not isinstance(value, str) or not value or value.startswith("/"):
        raise SpecError(
            f"{name}: {value!r} must be a folder in the destination bucket, such as .ferry/uploads/"
        )
    return as_folder(value)


def _field_of(message: str, label: Callable[[str], str]) -> str:
    if "part size" in message:
        return f"{label('part_size')}: "
    if "threshold" in message:
        return f"{label('multipart_threshold')}: "
    return ""


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        raise SpecError(f"{where}: missing; see the README's job spec")
    if not isinstance(value, Mapping):
        raise SpecError(f"{where}: must be an object, not {type(value).__name__}")
    return value


def _no_unknown(data: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise SpecError(f"{where}{unknown[0]}: unknown field; known are {', '.join(sorted(known))}")


def _bucket(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise SpecError(f"{where}: give a bucket name")
    problem = bucket_name_problem(value)
    if problem:  # the pipeline takes today's names only, old us-east-1 ones included
        raise SpecError(f"{where}: {problem.sentence(value)}")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise SpecError(f"{where}: must be a string")
    return value


def _optional_string(value: Any, where: str) -> str | None:
    return None if value is None else _string(value, where)


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{where}: must be true or false, not {value!r}")
    return value


def _size(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise SpecError(f"{where}: must be a size such as 8MiB or a number of bytes")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return parse_size(value)
        except ConfigError as error:
            raise SpecError(f"{where}: {error}") from error
    raise SpecError(f"{where}: must be a size such as 8MiB or a number of bytes")


def _string_map(value: Any, where: str) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise SpecError(f"{where}: must be an object of string keys and string values")
    return dict(value)


def _globs(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(g, str) and g for g in value):
        raise SpecError(f'{where}: must be a list of glob patterns such as "*.jpg"')
    return tuple(value)
