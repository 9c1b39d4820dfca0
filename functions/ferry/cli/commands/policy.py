"""`ferry policy`: the documents another account applies so that Ferry's workers can reach its
buckets, keys and events, printed from the same cdk.json settings the stack is built from.

Who Ferry is, to the other account: the stack's roles are named by CloudFormation, which
shortens a long stack name inside the names it generates, so no pattern on role names is sure
to match them. The stack tags every role it creates `FerryStack=<stack name>`
(settings.STACK_ROLE_TAG); by default each document names this account
(`arn:aws:iam::ACCOUNT:root`) as principal, narrowed by a `StringEquals` condition on
`aws:PrincipalTag/FerryStack` to that stack; give the deployed role ARNs with `--principal` to
name exactly those instead. Either way no other identity of either account gains anything
(only an identity of Ferry's account that may tag roles could add itself, as one that may
create roles could before).

A replication with `deletes` on needs two more things from its source's account: the
"Object Deleted" events forwarded along with "Object Created", and `s3:ListBucketVersions`
(ListObjectVersions finds the version a delete marker hides, pipeline/replication/deletes.py).
With `--all-versions`, every source and destination document also grants what an all_versions
job does there (pipeline/history_keys.py): `s3:ListBucketVersions` within the prefixes and
`s3:GetBucketVersioning` on the bucket; without it, such a job is refused at Prepare, in one
line naming the missing permission.

Each document is printed as a heading line (`# ...`: what it is, where it goes, and last the
command that applies it, reading the file `file://NAME`) followed by the document as JSON, so
it can be cut out and applied as it is; the command runs in bash as printed, from `aws` to the
end of the line. With `--output-dir DIR` each document is written to DIR/NAME instead, and the
headings printed name those paths.

A bucket's notification configuration is one document for all its notifications: putting one
that holds only `EventBridgeConfiguration` deletes the bucket's other notifications (its SQS,
SNS and Lambda destinations). So no such document is printed; its heading's command reads the
bucket's configuration, adds `EventBridgeConfiguration` to it (the CLI's own JMESPath `merge`,
no other tool) into the file, and puts that back.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ferry.cli.shared.parsing import EXIT_OK
from ferry.errors import ConfigError
from ferry.models import DEFAULT_MARKS_PREFIX, Endpoint
from ferry.pipeline.locations import Location
from ferry.pipeline.replication.config import event_key_prefixes
from ferry.pipeline.settings import STACK_ROLE_TAG, PipelineSettings

VERSION = "2012-10-17"
ACCOUNT = re.compile(r"[0-9]{12}")
# What the workers do, as cdk/ferry_cdk/access.py grants it on this side.
SOURCE_READ = [
    "s3:GetObject",
    "s3:GetObjectVersion",
    "s3:GetObjectTagging",
    "s3:GetObjectVersionTagging",
    "s3:GetObjectAttributes",
    "s3:GetObjectVersionAttributes",
    "s3:RestoreObject",
]
DESTINATION_WRITE = [
    "s3:PutObject",
    "s3:PutObjectTagging",
    "s3:GetObject",
    "s3:GetObjectTagging",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
    "s3:DeleteObject",
    "s3:GetObjectVersion",
    "s3:DeleteObjectVersion",
    "s3:GetObjectVersionTagging",
]
# Upload marks in each destination bucket (engine/records/upload_marks.py), deleted by version id so a
# versioned bucket keeps none of them, and finding the upload a crashed copy left
# (ListMultipartUploads, a bucket action), so the next run resumes it.
UPLOAD_MARKS = ["s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:DeleteObjectVersion"]
FIND_UPLOADS = ["s3:ListBucketMultipartUploads"]
# No mark is written into a bucket whose Object Lock default retention would keep it.
READ_OBJECT_LOCK = ["s3:GetBucketObjectLockConfiguration"]
KMS_SOURCE = ["kms:Decrypt"]
KMS_DESTINATION = ["kms:GenerateDataKey", "kms:Decrypt", "kms:Encrypt"]
FORWARD_ROLE = "ferry-forward-s3-events"
LIST = ["s3:ListBucket"]
# A replication's deletes list the source's versions under a delete marker (pipeline/replication/deletes.py).
LIST_VERSIONS = ["s3:ListBucket", "s3:ListBucketVersions"]
READ_VERSIONING = ["s3:GetBucketVersioning"]  # an all_versions job's Prepare, on both sides
OBJECT_CREATED, OBJECT_DELETED = "Object Created", "Object Deleted"
# The bucket's notification configuration as read, with EventBridge turned on (JMESPath's
# merge: what the bucket has, plus this key); an empty configuration reads as {}.
MERGE_EVENTBRIDGE = 'merge(@, `{"EventBridgeConfiguration": {}}`)'


@dataclass(frozen=True)
class Document:
    """One document to apply: the file its command reads (`file_name`), and a heading with
    `{file}` where that file's `file://` path goes and `{path}` where its plain path goes,
    each quoted for the shell. A document without a body is made by its own command (the
    bucket's notification configuration, merged there): only its heading is printed."""

    file_name: str
    heading: str
    body: dict[str, Any] | list[Any] | None

    def heading_for(self, path: str) -> str:
        return self.heading.replace("{file}", shlex.quote(f"file://{path}")).replace(
            "{path}", shlex.quote(path)
        )


def file_part(text: str) -> str:
    """Text as part of a file name: a bucket, an account, a role or key name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")


def run_policy(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    settings, stack_name = read_context(Path(args.context))
    region = args.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        raise ConfigError("--region: give the region Ferry is deployed in")
    if not ACCOUNT.fullmatch(args.account or ""):
        raise ConfigError(f"--account: {args.account!r} is not a 12-digit AWS account id")
    ferry = Ferry(
        args.account,
        region,
        args.stack_name or stack_name,
        tuple(args.principal),
        all_versions=args.all_versions,
    )
    count = 0
    for document in documents(settings, ferry):
        if document.body is None:  # its command writes the file
            folder = Path(args.output_dir) if args.output_dir else None
            path = str(folder / document.file_name) if folder else document.file_name
            stdout.write(f"# {document.heading_for(path)}\n" + ("" if folder else "\n"))
        elif args.output_dir:
            path = write_document(Path(args.output_dir), document)
            stdout.write(f"# {document.heading_for(str(path))}\n")
        else:
            text = json.dumps(document.body, indent=2)
            stdout.write(f"# {document.heading_for(document.file_name)}\n{text}\n\n")
        count += 1
    if count == 0:
        stderr.write(
            "ferry policy: every configured bucket is in this account and no role is assumed: "
            "there is nothing for another account to apply\n"
        )
    return EXIT_OK


def write_document(folder: Path, document: Document) -> Path:
    """DIR/NAME holding the document as printed; the folder is made if missing, a file of
    the same name replaced (the documents are made again from cdk.json each time)."""
    path = folder / document.file_name
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document.body, indent=2) + "\n", encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"--output-dir: cannot write {str(path)!r}: {error.strerror}") from error
    return path


def read_context(path: Path) -> tuple[PipelineSettings, str]:
    """The `ferry` settings of a cdk.json (its context.ferry) or of a file holding them."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ConfigError(f"--context: cannot read {str(path)!r}: {error}") from error
    context = data.get("context", {}) if isinstance(data, dict) and "context" in data else {"ferry": data}
    if not isinstance(context, dict):
        raise ConfigError(f"--context: {str(path)!r} has no 'context' object")
    return PipelineSettings.from_context(context.get("ferry") or {}), context.get(
        "ferry:stackName"
    ) or "Ferry"


class Ferry:
    """Who Ferry's workers are, as the other account's policies name them."""

    def __init__(
        self, account: str, region: str, stack_name: str, roles: Sequence[str], *, all_versions: bool = False
    ) -> None:
        self.account, self.region, self.stack_name, self.roles = account, region, stack_name, roles
        self.all_versions = all_versions  # grant what all_versions jobs do too (--all-versions)
        self.partition = Endpoint(region=region).partition

    def principal(self) -> dict[str, Any]:
        if self.roles:
            return {"AWS": sorted(self.roles)}
        return {"AWS": f"arn:{self.partition}:iam::{self.account}:root"}

    def condition(self) -> dict[str, Any] | None:
        """The stack's roles by their tag: nothing depends on the names CloudFormation gives them."""
        if self.roles:
            return None
        return {"StringEquals": {f"aws:PrincipalTag/{STACK_ROLE_TAG}": self.stack_name}}

    def statement(self, sid: str, actions: list[str], resources: Any, **extra: Any) -> dict[str, Any]:
        statement: dict[str, Any] = {
            "Sid": sid,
            "Effect": "Allow",
            "Principal": self.principal(),
            "Action": actions,
            "Resource": resources,
        }
        conditions = dict(extra.pop("conditions", None) or {})
        for operator, values in (self.condition() or {}).items():
            conditions.setdefault(operator, {}).update(values)
        if conditions:
            statement["Condition"] = conditions
        return statement

    def bus_arn(self) -> str:
        return f"arn:{self.partition}:events:{self.region}:{self.account}:event-bus/default"


def documents(settings: PipelineSettings, ferry: Ferry) -> Iterator[Document]:
    """Every document, in the order the README applies them, each with a file of its own."""
    elsewhere = lambda loc: loc.owner is not None and loc.owner != ferry.account  # noqa: E731
    for loc in settings.sources:
        if elsewhere(loc):
            yield Document(
                f"bucket-policy-source-{file_part(loc.bucket)}.json",
                f"Bucket policy for the source s3://{loc.bucket}/{loc.prefix} (account {loc.owner}): "
                f"aws s3api put-bucket-policy --bucket {loc.bucket} --policy {{file}}",
                bucket_policy(
                    ferry,
                    loc,
                    SOURCE_READ,
                    "Read",
                    LIST_VERSIONS if deletes_from(settings, loc) or ferry.all_versions else LIST,
                ),
            )
    for loc in settings.destinations:
        if elsewhere(loc):
            yield Document(
                f"bucket-policy-destination-{file_part(loc.bucket)}.json",
                f"Bucket policy for the destination s3://{loc.bucket}/{loc.prefix} (account {loc.owner}), "
                "and its Object Ownership set to BucketOwnerEnforced so that account owns every copy: "
                f"aws s3api put-bucket-policy --bucket {loc.bucket} --policy {{file}} && aws s3api "
                f"put-bucket-ownership-controls --bucket {loc.bucket} --ownership-controls "
                "'Rules=[{ObjectOwnership=BucketOwnerEnforced}]'",
                with_marks(
                    ferry,
                    [loc],
                    bucket_policy(
                        ferry, loc, DESTINATION_WRITE, "Write", LIST_VERSIONS if ferry.all_versions else LIST
                    ),
                ),
            )
    keys = [(arn, KMS_SOURCE, "Decrypt") for arn in settings.source_kms_key_arns] + [
        (arn, KMS_DESTINATION, "Encrypt") for arn in settings.destination_kms_key_arns
    ]
    for arn, actions, verb in keys:
        owner = arn.split(":")[4] if arn.count(":") >= 5 else ""
        if owner and owner != ferry.account:
            yield Document(
                f"key-policy-{file_part(owner)}-{file_part(arn.split(':', 5)[-1].split('/', 1)[-1])}.json",
                f"Key policy statements for {arn} (account {owner}): add them to the key's policy ({{file}})",
                {"Version": VERSION, "Statement": [ferry.statement(f"Ferry{verb}", actions, "*")]},
            )
    for role_arn in settings.role_arns:
        role_name = role_arn.rsplit("/", 1)[-1]
        role_file = _role_file(role_arn)
        yield Document(
            f"trust-policy-{role_file}.json",
            f"Trust policy for {role_arn}, the role Ferry's workers assume: "
            f"aws iam update-assume-role-policy --role-name {role_name} --policy-document {{file}}",
            {"Version": VERSION, "Statement": [trust_statement(ferry)]},
        )
        yield Document(
            f"permissions-policy-{role_file}.json",
            f"Permissions policy for {role_arn}: what it may do for Ferry: aws iam put-role-policy "
            f"--role-name {role_name} --policy-name Ferry --policy-document {{file}}",
            role_permissions(settings, role_arn, ferry),
        )
    for loc in settings.sources:
        if elsewhere(loc):
            yield from event_forwarding(ferry, loc, deletes=deletes_from(settings, loc))


def _role_file(role_arn: str) -> str:
    """`444455556666-ferry-writer`: the role's account and name (two accounts may both have a
    role of one name)."""
    fields = role_arn.split(":")
    account = fields[4] if len(fields) > 5 else ""
    return "-".join(file_part(part) for part in (account, role_arn.rsplit("/", 1)[-1]) if part)


def deletes_from(settings: PipelineSettings, loc: Location) -> bool:
    """Whether a replication with deletes on reads from inside this source location."""
    return any(r.deletes and loc.covers(r.source.bucket, r.source.prefix) for r in settings.replications)


def bucket_policy(
    ferry: Ferry, loc: Location, actions: list[str], verb: str, listing_actions: list[str] = LIST
) -> dict[str, Any]:
    bucket = f"arn:{ferry.partition}:s3:::{loc.bucket}"
    listing: dict[str, Any] = {}
    if loc.prefix:
        listing = {"StringLike": {"s3:prefix": [f"{iam_escape(loc.prefix)}*"]}}
    statements = [
        ferry.statement(f"Ferry{verb}List", list(listing_actions), bucket, conditions=listing),
        ferry.statement(f"Ferry{verb}Objects", actions, f"{bucket}/{iam_escape(loc.prefix)}*"),
    ]
    if ferry.all_versions:  # a bucket action without a prefix: no s3:prefix condition may apply
        statements.append(ferry.statement(f"Ferry{verb}Versioning", READ_VERSIONING, bucket))
    return {"Version": VERSION, "Statement": statements}


def with_marks(ferry: Ferry, destinations: Sequence[Location], document: dict[str, Any]) -> dict[str, Any]:
    """A destination's document plus what resuming a crashed copy needs there."""
    buckets = sorted({f"arn:{ferry.partition}:s3:::{loc.bucket}" for loc in destinations})
    marks = [f"{b}/{iam_escape(DEFAULT_MARKS_PREFIX)}*" for b in buckets]
    document["Statement"] += [
        ferry.statement("FerryWriteMarks", UPLOAD_MARKS, marks if len(marks) > 1 else marks[0]),
        ferry.statement("FerryFindUploads", FIND_UPLOADS, buckets if len(buckets) > 1 else buckets[0]),
        ferry.statement("FerryReadObjectLock", READ_OBJECT_LOCK, buckets if len(buckets) > 1 else buckets[0]),
    ]
    return document


def trust_statement(ferry: Ferry) -> dict[str, Any]:
    statement = ferry.statement("FerryWorkersAssume", ["sts:AssumeRole"], "*")
    del statement["Resource"]  # a trust policy names no resource: the role is the resource
    return statement


def role_permissions(settings: PipelineSettings, role_arn: str, ferry: Ferry) -> dict[str, Any]:
    """What the role needs for the locations it is configured on (an identity policy)."""
    statements: list[dict[str, Any]] = []
    for side, locations, actions, keys, key_actions in (
        ("Read", settings.sources, SOURCE_READ, settings.source_kms_key_arns, KMS_SOURCE),
        (
            "Write",
            settings.destinations,
            DESTINATION_WRITE,
            settings.destination_kms_key_arns,
            KMS_DESTINATION,
        ),
    ):
        mine = [loc for loc in locations if loc.role_arn == role_arn]
        if not mine:
            continue
        statements.append(
            {
                "Sid": f"Ferry{side}Objects",
                "Effect": "Allow",
                "Action": actions,
                "Resource": sorted(
                    {f"arn:{ferry.partition}:s3:::{loc.bucket}/{iam_escape(loc.prefix)}*" for loc in mine}
                ),
            }
        )
        versions = {
            loc.bucket
            for loc in mine
            if ferry.all_versions or (side == "Read" and deletes_from(settings, loc))
        }
        statements.extend(list_statements(mine, f"Ferry{side}List", ferry.partition, versions))
        if ferry.all_versions:
            statements.append(
                {
                    "Sid": f"Ferry{side}Versioning",
                    "Effect": "Allow",
                    "Action": READ_VERSIONING,
                    "Resource": sorted({f"arn:{ferry.partition}:s3:::{loc.bucket}" for loc in mine}),
                }
            )
        if side == "Write":
            buckets = sorted({f"arn:{ferry.partition}:s3:::{loc.bucket}" for loc in mine})
            statements += [
                {
                    "Sid": "FerryWriteMarks",
                    "Effect": "Allow",
                    "Action": UPLOAD_MARKS,
                    "Resource": [f"{b}/{iam_escape(DEFAULT_MARKS_PREFIX)}*" for b in buckets],
                },
                {"Sid": "FerryFindUploads", "Effect": "Allow", "Action": FIND_UPLOADS, "Resource": buckets},
                {
                    "Sid": "FerryReadObjectLock",
                    "Effect": "Allow",
                    "Action": READ_OBJECT_LOCK,
                    "Resource": buckets,
                },
            ]
        if keys:
            statements.append(
                {
                    "Sid": f"Ferry{side}Keys",
                    "Effect": "Allow",
                    "Action": key_actions,
                    "Resource": sorted(keys),
                }
            )
    return {"Version": VERSION, "Statement": statements}


def list_statements(
    locations: Iterable[Location], sid: str, partition: str, versions: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """`s3:ListBucket` per bucket within its prefixes; also `s3:ListBucketVersions` on the
    buckets in `versions` (a replication's deletes read them)."""
    versions = set(versions)
    by_bucket: dict[str, set[str]] = {}
    for loc in locations:
        by_bucket.setdefault(loc.bucket, set()).add(loc.prefix)
    out = []
    for index, (bucket, prefixes) in enumerate(sorted(by_bucket.items())):
        statement: dict[str, Any] = {
            "Sid": f"{sid}{index}",
            "Effect": "Allow",
            "Action": list(LIST_VERSIONS if bucket in versions else LIST),
            "Resource": f"arn:{partition}:s3:::{bucket}",
        }
        if "" not in prefixes:
            statement["Condition"] = {
                "StringLike": {"s3:prefix": sorted(f"{iam_escape(p)}*" for p in prefixes)}
            }
        out.append(statement)
    return out


def event_forwarding(ferry: Ferry, loc: Location, *, deletes: bool) -> Iterator[Document]:
    """S3 -> the owner's default bus -> a rule -> this account's default bus (EventBridge
    delivers cross-account to an event bus with a role of the sending account, and the
    receiving bus's resource policy allowing events:PutEvents from that rule). With `deletes`,
    the rule forwards "Object Deleted" too: S3 sends both detail-types to EventBridge."""
    owner, region = str(loc.owner), loc.region or ferry.region
    rule_name = f"ferry-forward-{loc.bucket}"[:64]
    rule_arn = f"arn:{ferry.partition}:events:{region}:{owner}:rule/{rule_name}"
    role_arn = f"arn:{ferry.partition}:iam::{owner}:role/{FORWARD_ROLE}"
    pattern: dict[str, Any] = {
        "source": ["aws.s3"],
        "detail-type": [OBJECT_CREATED, *([OBJECT_DELETED] if deletes else [])],
        "detail": {"bucket": {"name": [loc.bucket]}},
    }
    if loc.prefix:
        pattern["detail"]["object"] = {"key": [{"prefix": form} for form in event_key_prefixes(loc.prefix)]}
    bucket = file_part(loc.bucket)
    yield Document(
        f"notification-{bucket}.json",
        f"S3 notification configuration for s3://{loc.bucket} (account {owner}): send its events to "
        "EventBridge, keeping its other notifications (a configuration put alone replaces them all): "
        f"aws s3api get-bucket-notification-configuration --bucket {loc.bucket} "
        f"--query {shlex.quote(MERGE_EVENTBRIDGE)} --output json > {{path}} && "
        f"aws s3api put-bucket-notification-configuration --bucket {loc.bucket} "
        "--notification-configuration {file}",
        None,
    )
    yield Document(
        f"forward-role-trust-policy-{owner}.json",
        f"Role {FORWARD_ROLE} in account {owner}, trust policy (EventBridge assumes it to forward): "
        f"aws iam create-role --role-name {FORWARD_ROLE} --assume-role-policy-document {{file}}",
        {
            "Version": VERSION,
            "Statement": [
                {
                    "Sid": "EventBridgeForwards",
                    "Effect": "Allow",
                    "Principal": {"Service": "events.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        },
    )
    yield Document(
        f"forward-role-permissions-policy-{owner}.json",
        f"Role {FORWARD_ROLE} in account {owner}, permissions policy: aws iam put-role-policy "
        f"--role-name {FORWARD_ROLE} --policy-name FerryForward --policy-document {{file}}",
        {
            "Version": VERSION,
            "Statement": [
                {
                    "Sid": "PutToFerrysBus",
                    "Effect": "Allow",
                    "Action": "events:PutEvents",
                    "Resource": ferry.bus_arn(),
                }
            ],
        },
    )
    events = f"--event-bus-name default --region {region}"
    yield Document(
        f"rule-pattern-{bucket}.json",
        f"EventBridge rule {rule_name} on account {owner}'s default bus in {region}, its event pattern: "
        f"aws events put-rule --name {rule_name} {events} --event-pattern {{file}}",
        pattern,
    )
    yield Document(
        f"rule-targets-{bucket}.json",
        f"EventBridge rule {rule_name}'s target, Ferry's default bus (after put-rule): "
        f"aws events put-targets --rule {rule_name} {events} --targets {{file}}",
        [{"Id": "ferry", "Arn": ferry.bus_arn(), "RoleArn": role_arn}],
    )
    yield Document(
        f"bus-policy-{bucket}.json",
        f"Resource policy for the default event bus of account {ferry.account} in {ferry.region} "
        f"(Ferry's side): aws events put-permission --event-bus-name default --region {ferry.region} --policy {{file}}",
        {
            "Version": VERSION,
            "Statement": [
                {
                    "Sid": f"FerryEventsFrom{owner}",
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:{ferry.partition}:iam::{owner}:root"},
                    "Action": "events:PutEvents",
                    "Resource": ferry.bus_arn(),
                    "Condition": {"ArnEquals": {"aws:SourceArn": rule_arn}},
                }
            ],
        },
    )


def iam_escape(text: str) -> str:
    """A key prefix as an IAM ARN or StringLike pattern matches it literally."""
    return "".join({"*": "${*}", "?": "${?}", "$": "${$}"}.get(c, c) for c in text)
