"""Every `ferry` command's arguments, apart from what the commands do.

`ferry --help`, each command's `--help` and every usage error are answered from this module
and the light ones it imports (no botocore, boto3, rich, engine or pipeline): a command's
module is imported only when it runs (main.py). The defaults shown in help come from the
vocabulary (ferry.limits, ferry.models) or the command's own light module.
"""

from __future__ import annotations

import argparse

from ferry.cli.shared.filter_options import add_filter_arguments
from ferry.cli.shared.parsing import JOB_ID_RULE, Parser
from ferry.cli.shared.ranges import add_memory_limit_argument
from ferry.cli.shared.stack_outputs import DEFAULT_STACK
from ferry.limits import DEFAULT_OBJECTS_PER_DAY, SIZE_RULE
from ferry.models import CHECKSUM_ALGORITHMS, DEFAULT_MARKS_PREFIX, Compare

# Said under every command that takes a size (its --help's last line): one rule for all.
SIZES = f"Sizes (SIZE): {SIZE_RULE}."
COMPARES = [compare.value for compare in Compare]
OBJECTS_REPORT = "JSON Lines report: one line per object, then a summary"  # copy's and run's --report


# SRC as `ferry copy` takes it (one file too), and as `ferry sync` does (folders only).
_COPY_SRC = (
    "s3://bucket/prefix, or a local file or folder to upload; * and ? are wildcards "
    "('s3://bucket/logs/*.gz': the keys that match, landing in DST by their path below logs/)"
)
_SYNC_SRC = (
    "s3://bucket/prefix, or a local folder to upload; * and ? are wildcards "
    "(DST's keys are weighed against the same pattern)"
)


def add_copy_parser(
    commands: argparse._SubParsersAction,
    name: str = "copy",
    help: str = "copy a prefix or one object",
    description: str = "Copy SRC to DST (s3://bucket/prefix; or a local file or folder on one side).",
    *,
    local: bool = True,
) -> argparse.ArgumentParser:
    """`ferry copy`'s arguments, under the root parser's subcommands (`ferry sync` takes the
    same, under its own name, with folders rather than single files: `local=False`)."""
    copy = commands.add_parser(name, help=help, description=description, epilog=SIZES)
    copy.add_argument("src", metavar="SRC", help=_COPY_SRC if local else _SYNC_SRC)
    copy.add_argument("dst", metavar="DST", help="s3://bucket/prefix, or a local folder to download into")
    where = copy.add_argument_group("endpoints and credentials")
    where.add_argument(
        "--endpoint-url",
        help="S3 endpoint for both sides (an S3-compatible server; default: the one the AWS "
        "configuration names for each side's profile, else AWS)",
    )
    where.add_argument("--source-endpoint-url")
    where.add_argument("--dest-endpoint-url")
    where.add_argument("--region", help="region for both sides")
    where.add_argument("--source-region")
    where.add_argument("--dest-region")
    where.add_argument("--source-profile", help="AWS profile for the source")
    where.add_argument("--dest-profile", help="AWS profile for the destination")
    where.add_argument("--source-role-arn", help="role to assume for the source")
    where.add_argument("--dest-role-arn", help="role to assume for the destination")
    where.add_argument("--source-requester-pays", action="store_true")
    where.add_argument("--dest-requester-pays", action="store_true")
    how = copy.add_argument_group("how to copy")
    how.add_argument("--mode", choices=["auto", "server-side", "stream"], default="auto")
    how.add_argument("--concurrency", type=int, help="objects copied at once (default: from CPUs and sizes)")
    how.add_argument("--part-concurrency", type=int, help="parts in flight across all objects")
    how.add_argument(
        "--no-lean-requests",
        action="store_true",
        help="send every request through botocore (default: the lean path for small-object requests; "
        "also FERRY_LEAN_REQUESTS=0)",
    )
    how.add_argument(
        "--part-size",
        metavar="SIZE",
        help="multipart part size, e.g. 8MiB (default: the source's layout, else chosen)",
    )
    how.add_argument(
        "--multipart-threshold",
        metavar="SIZE",
        default="16MiB",
        help="stream objects above this in parts (default %(default)s)",
    )
    add_memory_limit_argument(how)
    how.add_argument(
        "--bwlimit",
        metavar="SIZE",
        help="at most SIZE of object bytes a second through this machine, all threads together, "
        "e.g. 10MiB (a server-side copy moves none here, so it is not limited; with --mode stream "
        "every byte passes here)",
    )
    how.add_argument("--checksum-algorithm", type=str.upper, choices=CHECKSUM_ALGORITHMS)
    how.add_argument(
        "--marks-prefix",
        help="where the destination bucket holds the marks that let a crashed copy resume "
        f"(default {DEFAULT_MARKS_PREFIX})",
    )
    what = copy.add_argument_group("what to copy")
    what.add_argument("--include", action="append", default=[], metavar="GLOB")
    what.add_argument("--exclude", action="append", default=[], metavar="GLOB")
    add_filter_arguments(what)
    if name == "copy":
        what.add_argument(
            "--all-versions",
            action="store_true",
            help="copy every version of each key, oldest first, and its delete markers "
            "(the destination bucket must keep versions)",
        )
    what.add_argument(
        "--no-skip-existing", action="store_true", help="copy even when the destination is identical"
    )
    what.add_argument(
        "--compare",
        choices=COMPARES,
        help="what makes the destination's object the same, so it is skipped: its checksum or ETag, "
        "size and age, size alone, or its being there at all (default checksum)",
    )
    what.add_argument(
        "--size-only",
        action="store_true",
        help="skip what the destination holds at the same size, contents not compared (--compare size)",
    )
    what.add_argument(
        "--ignore-existing",
        action="store_true",
        help="skip every key the destination already has, whatever it holds (--compare existence)",
    )
    what.add_argument("--restore", choices=["bulk", "standard", "expedited"], help="restore archived objects")
    what.add_argument(
        "--restore-days", type=int, default=7, help="days a restored copy stays (default %(default)s)"
    )
    what.add_argument(
        "-L",
        "--follow-symlinks",
        action="store_true",
        help="a local SRC: upload what symbolic links point to (default: skip links, each reported)",
    )
    attrs = copy.add_argument_group("destination attributes (default: preserve the source's)")
    attrs.add_argument("--storage-class")
    attrs.add_argument(
        "--metadata", action="append", default=[], metavar="KEY=VALUE", help="replace user metadata"
    )
    attrs.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE", help="replace tags")
    attrs.add_argument("--no-tags", action="store_true", help="do not copy tags")
    attrs.add_argument("--kms-key-id", help="encrypt the destination with this KMS key")
    out = copy.add_argument_group("output")
    out.add_argument("--dry-run", action="store_true", help="list and compare; copy nothing")
    out.add_argument("--report", metavar="FILE", help=OBJECTS_REPORT)
    out.add_argument(
        "--report-html",
        metavar="FILE",
        help="the report as one HTML page (summary, charts, failures); opens with no network",
    )
    out.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    out.add_argument("--quiet", action="store_true", help="no progress bar")
    out.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="one line per object on stderr as it ends: copied, skipped or failed with the reason "
        "(and each of a sync's deletes); above the progress bar on a terminal",
    )
    return copy


def add_sync_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """`ferry sync`: `ferry copy`'s arguments, and the deletes that make DST match SRC."""
    sync = add_copy_parser(
        commands,
        "sync",
        help="make DST match SRC: copy what is missing or changed; --delete what SRC lacks",
        description="Copy what DST lacks or holds differently from SRC (s3://bucket/prefix, or a local "
        "folder on one side); with --delete, then remove from DST's prefix or folder what SRC no longer has.",
        local=False,
    )
    deletes = sync.add_argument_group("deletes")
    deletes.add_argument(
        "--delete",
        action="store_true",
        help="after every copy succeeded, delete from DST's prefix (or folder: files only, folders kept) "
        "what SRC does not have",
    )
    deletes.add_argument(
        "--max-delete",
        type=int,
        metavar="N",
        help="refuse the whole sync (copy and delete nothing) if it would delete more than N objects",
    )
    return sync


def _add_endpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """The same endpoint and credential options as `ferry copy` (read by sides.endpoints)."""
    where = parser.add_argument_group("endpoints and credentials (as for ferry copy)")
    for side in ("", "source-", "dest-"):
        where.add_argument(f"--{side}endpoint-url")
        where.add_argument(f"--{side}region")
    for side in ("source", "dest"):
        where.add_argument(f"--{side}-profile")
        where.add_argument(f"--{side}-role-arn")
        where.add_argument(f"--{side}-requester-pays", action="store_true")


def add_check_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """`ferry check`'s arguments: two locations, how to reach them, which keys, what to write."""
    check = commands.add_parser(
        "check",
        help="compare two prefixes, or a folder and a prefix, without copying",
        description="Compare SRC and DST (s3://bucket/prefix, or a local folder on one side) key by key: "
        "missing on either side, "
        "different or identical, by checksum, ETag or size. Exit 0 when they match, 2 when they differ.",
        epilog=SIZES,
    )
    check.add_argument("src", metavar="SRC", help="s3://bucket/prefix, or a local folder")
    check.add_argument("dst", metavar="DST", help="s3://bucket/prefix, or a local folder")
    _add_endpoint_arguments(check)
    what = check.add_argument_group("what to compare (both sides alike)")
    what.add_argument("--include", action="append", default=[], metavar="GLOB")
    what.add_argument("--exclude", action="append", default=[], metavar="GLOB")
    add_filter_arguments(what)
    what.add_argument(
        "--marks-prefix",
        help=f"Ferry's upload marks, left out of both sides (default {DEFAULT_MARKS_PREFIX})",
    )
    what.add_argument(
        "-L",
        "--follow-symlinks",
        action="store_true",
        help="a local folder: compare what symbolic links point to (default: name each link, unread)",
    )
    what.add_argument("--concurrency", type=int, help="HEAD requests at once (default 16)")
    out = check.add_argument_group("output")
    out.add_argument("--report", metavar="FILE", help="JSON Lines report: one line per key, then a summary")
    out.add_argument("--report-html", metavar="FILE", help="the summary and differences as one HTML page")
    out.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    return check


def add_run_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    run = commands.add_parser(
        "run",
        help="run a pipeline job spec on this machine",
        description="Run JOB.json (the spec the state machine takes) with the pipeline's code, here.",
        epilog=SIZES,
    )
    run.add_argument("spec", metavar="JOB.json", help="a JSON job spec, as given to the state machine")
    ledger = run.add_argument_group("ledger and reports").add_mutually_exclusive_group()
    ledger.add_argument(
        "--ledger", metavar="PATH", help="SQLite ledger file (default: ~/.cache/ferry/ledger.sqlite)"
    )
    ledger.add_argument(
        "--table", metavar="NAME", help="use this DynamoDB table as the ledger (the stack's TableName)"
    )
    run.add_argument(
        "--table-region",
        help="region of --table (default: --region, else --source-region, else your AWS configuration's)",
    )
    run.add_argument("--table-endpoint-url", help="DynamoDB endpoint for --table (DynamoDB Local, moto)")
    run.add_argument(
        "--report-dir",
        metavar="DIR",
        help="where the job's report files go (default: beside the ledger, jobs/<id>/)",
    )
    run.add_argument(
        "--job-id",
        help=f"the job's id (default: the spec's job_id, else run-<time>-<random>); {JOB_ID_RULE}",
    )
    run.add_argument(
        "--resume",
        metavar="JOB_ID",
        help="finish a job a run left unfinished (Ctrl-C, SIGTERM, a crash): what was recorded is not redone; "
        "give the same JOB.json, ledger and report folder (an interrupted run prints this command)",
    )
    _add_endpoint_arguments(run)
    how = run.add_argument_group("how the job runs (the pipeline's settings)")
    how.add_argument("--batch-concurrency", type=int, default=4, help="batches at once (default 4)")
    how.add_argument("--max-items-per-batch", type=int, help="objects per batch (default 10,000)")
    how.add_argument(
        "--max-input-bytes-per-batch", metavar="SIZE", help="batch input size, e.g. 64KiB (default 150KiB)"
    )
    how.add_argument(
        "--large-object-threshold",
        metavar="SIZE",
        help="objects above this take the large-object path (default 10GiB)",
    )
    how.add_argument("--max-passes", type=int, help="passes a batch may take (default 50)")
    how.add_argument(
        "--pass-seconds",
        type=float,
        default=None,
        help="a CopyBatch pass hands over after this long, as on Lambda (default 810)",
    )
    add_memory_limit_argument(how)
    out = run.add_argument_group("output")
    out.add_argument("--report", metavar="FILE", help=OBJECTS_REPORT)
    out.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    out.add_argument("--quiet", action="store_true", help="no progress bar")
    return run


def add_estimate_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """`ferry estimate`'s arguments: what to estimate, how the job would copy, the pipeline and
    the account it runs in, the endpoint SRC is listed from, and the output."""
    parser = commands.add_parser(
        "estimate",
        help="predict a pipeline job's cost and duration",
        description="Predict what copying SRC, a job spec's source (--spec) or N objects of SIZE with "
        "the deployed pipeline costs, per service, beside S3 Batch Operations, DataSync and S3 Batch "
        "Replication.",
        epilog=SIZES,
    )
    _add_estimated_work(parser)
    _add_estimated_copy(parser)
    _add_estimated_pipeline(parser)
    return parser


def _add_estimated_work(parser: argparse.ArgumentParser) -> None:
    """What is estimated: a listing of SRC or of a job spec's source, or numbers given."""
    parser.add_argument(
        "src", metavar="SRC", nargs="?", help="s3://bucket/prefix to list (real sizes and classes)"
    )
    parser.add_argument(
        "--spec",
        metavar="JOB.json",
        help="a job spec, as ferry run takes it: its source is listed (its globs applied) and its "
        "options assumed; options given here override its own",
    )
    parser.add_argument("--objects", type=int, help="number of objects (without SRC)")
    parser.add_argument("--avg-size", metavar="SIZE", help="average object size, e.g. 500KiB (without SRC)")
    parser.add_argument(
        "--source-storage-class",
        default="STANDARD",
        help="the objects' class (without SRC; default %(default)s)",
    )


def _add_estimated_copy(parser: argparse.ArgumentParser) -> None:
    """How the job would copy, and what the sources are assumed to be."""
    parser.add_argument(
        "--mode", choices=["auto", "server-side", "stream"], help="(default: the spec's mode, else auto)"
    )
    parser.add_argument(
        "--cross-region", action="store_true", help="source and destination in different regions"
    )
    parser.add_argument("--storage-class", help="destination storage class (its PUT price applies)")
    parser.add_argument(
        "--restore", choices=["bulk", "standard", "expedited"], help="restore archived objects"
    )
    parser.add_argument("--no-tags", action="store_true", help="tags not copied (no GetObjectTagging)")
    parser.add_argument("--no-skip-existing", action="store_true", help="no destination listing")
    parser.add_argument(
        "--source-part-size",
        metavar="SIZE",
        default="8MiB",
        help="part size multipart sources were uploaded in (assumed; default %(default)s)",
    )
    parser.add_argument(
        "--full-object-checksums",
        action="store_true",
        help="the sources carry full-object CRCs (written since S3's default CRC64NVME); "
        "default: MD5 ETags only (older objects). A listing reads it per object where S3 lists it",
    )


def _add_estimated_pipeline(parser: argparse.ArgumentParser) -> None:
    """The pipeline's settings and the account's quota, where SRC is listed from, the daily
    rate the limits are weighed at, and the output (in the order --help shows them)."""
    parser.add_argument(
        "--settings", metavar="CDK_JSON", help="read batch sizes and concurrency from this cdk.json"
    )
    parser.add_argument(
        "--lambda-concurrency",
        type=int,
        metavar="N",
        help="the account's Lambda concurrency quota (default: read with GetAccountSettings, with "
        "--profile in --region; 1,000 assumed, and said, where it cannot be read)",
    )
    where = parser.add_argument_group("endpoint and credentials (with SRC)")
    where.add_argument("--endpoint-url", help="S3 endpoint (an S3-compatible server)")
    where.add_argument("--region", help="the source bucket's region")
    where.add_argument("--profile", help="AWS profile")
    where.add_argument("--role-arn", help="role to assume")
    where.add_argument("--requester-pays", action="store_true")
    parser.add_argument(
        "--per-day",
        type=int,
        default=DEFAULT_OBJECTS_PER_DAY,
        metavar="N",
        help=f"objects a day to check one stack's limits against (default: {DEFAULT_OBJECTS_PER_DAY:,})",
    )
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar while listing")


def add_policy_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    policy = commands.add_parser(
        "policy",
        help="print the policies another account applies for a deployed stack",
        description="Print the bucket, key, trust and event policies the other accounts apply.",
    )
    policy.add_argument(
        "--context", default="cdk.json", metavar="FILE", help="cdk.json (or a file of 'ferry' settings)"
    )
    policy.add_argument("--account", required=True, help="the 12-digit account Ferry is deployed in")
    policy.add_argument(
        "--region", help="the region Ferry is deployed in (default: $AWS_REGION, else $AWS_DEFAULT_REGION)"
    )
    policy.add_argument(
        "--stack-name", help="the stack's name (default: the context's ferry:stackName, else Ferry)"
    )
    policy.add_argument(
        "--principal",
        action="append",
        default=[],
        metavar="ROLE_ARN",
        help="a deployed role ARN of the stack to name exactly (repeat); default: the stack's roles by name",
    )
    policy.add_argument(
        "--all-versions",
        action="store_true",
        help="also grant what jobs with options.all_versions do: s3:ListBucketVersions within the "
        "prefixes and s3:GetBucketVersioning on each bucket (default: not granted)",
    )
    policy.add_argument(
        "--output-dir",
        metavar="DIR",
        help="write each document to DIR/NAME, the file its heading's command reads, and print the "
        "headings only (default: print each heading and document)",
    )
    return policy


EXECUTION_STATUSES = ("RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED", "PENDING_REDRIVE")


def add_job_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """`ferry job` and its subcommands, under the root parser's subcommands."""
    job = commands.add_parser("job", help="pipeline jobs: check a spec; start, watch, read, list, retry jobs")
    sub = job.add_subparsers(dest="job_command", required=True, parser_class=Parser)
    validate = sub.add_parser("validate", help="check a job spec file; print it normalised")
    validate.add_argument("spec", metavar="FILE", help="a JSON job spec, as given to the state machine")

    stack = argparse.ArgumentParser(add_help=False)
    where = stack.add_argument_group("the deployed stack")
    where.add_argument("--stack", default=DEFAULT_STACK, help=f"the stack's name (default {DEFAULT_STACK})")
    where.add_argument("--region", help="the stack's region (default: your AWS configuration's)")
    where.add_argument("--profile", help="AWS profile")

    start = sub.add_parser(
        "start", parents=[stack], help="start a job: SRC DST, or --spec FILE", epilog=SIZES
    )
    start.add_argument("src", metavar="SRC", nargs="?", help="s3://bucket/prefix")
    start.add_argument("dst", metavar="DST", nargs="?", help="s3://bucket/prefix")
    start.add_argument("--spec", metavar="FILE", help="a JSON job spec (options given here override its own)")
    start.add_argument(
        "--job-id",
        help=f"the job's id and execution name (default: the spec's job_id, else job-<time>); {JOB_ID_RULE}",
    )
    start.add_argument("--json", action="store_true", help="print one JSON object")
    _add_option_arguments(start)

    # `ferry run`'s jobs, on this machine: the same three commands read its SQLite ledger.
    local = argparse.ArgumentParser(add_help=False)
    here = local.add_argument_group("jobs run on this machine (ferry run)")
    here.add_argument("--local", action="store_true", help="read ferry run's ledger here, not the stack")
    here.add_argument(
        "--ledger", metavar="PATH", help="that ledger file (default: ~/.cache/ferry/ledger.sqlite)"
    )
    status = sub.add_parser(
        "status", parents=[stack, local], help="how far a job is: objects, bytes, rate, ETA"
    )
    status.add_argument("job_id", metavar="JOB")
    status.add_argument("--watch", action="store_true", help="refresh until the job ends")
    status.add_argument(
        "--interval", type=float, default=5.0, help="seconds between refreshes (--watch; default %(default)s)"
    )
    status.add_argument("--json", action="store_true", help="print one JSON object")

    report = sub.add_parser("report", parents=[stack, local], help="the report Finalize wrote")
    report.add_argument("job_id", metavar="JOB")
    report.add_argument("--failures", action="store_true", help="every failed object, not the first 20")
    report.add_argument("--json", action="store_true", help="print one JSON object")
    report.add_argument(
        "--html", metavar="FILE", help="also write the report as one self-contained HTML page to FILE"
    )

    listing = sub.add_parser("list", parents=[stack, local], help="recent jobs, newest first")
    listing.add_argument("--status", type=str.upper, choices=EXECUTION_STATUSES, help="only these")
    listing.add_argument("--max", type=int, default=20, help="at most this many (default 20)")
    listing.add_argument("--json", action="store_true", help="print one JSON object")

    retry = sub.add_parser("retry", parents=[stack], help="redrive a job, or copy its failed objects again")
    retry.add_argument("job_id", metavar="JOB")
    retry.add_argument("--json", action="store_true", help="print one JSON object")
    return job


def _add_option_arguments(parser: argparse.ArgumentParser) -> None:
    """A job spec's options, spelled as `ferry copy` spells them; none has a default here, so
    only what is given overrides a --spec file's options."""
    how = parser.add_argument_group("job options (as in a job spec's options)")
    how.add_argument("--mode", choices=["auto", "server-side", "stream"])
    how.add_argument("--part-size", metavar="SIZE")
    how.add_argument("--multipart-threshold", metavar="SIZE")
    how.add_argument("--checksum-algorithm", type=str.upper, choices=CHECKSUM_ALGORITHMS)
    how.add_argument("--include", action="append", metavar="GLOB")
    how.add_argument("--exclude", action="append", metavar="GLOB")
    how.add_argument("--no-skip-existing", action="store_true")
    how.add_argument(
        "--all-versions", action="store_true", help="every version of each key, oldest first (all_versions)"
    )
    how.add_argument("--compare", choices=COMPARES)
    how.add_argument("--restore", choices=["bulk", "standard", "expedited"])
    how.add_argument("--restore-days", type=int)
    how.add_argument("--storage-class")
    how.add_argument("--metadata", action="append", metavar="KEY=VALUE")
    how.add_argument("--tag", action="append", metavar="KEY=VALUE")
    how.add_argument("--no-tags", action="store_true")
    how.add_argument("--kms-key-id")
    how.add_argument("--dry-run", action="store_true")


def add_clean_uploads_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    clean = commands.add_parser(
        "clean-uploads",
        help="abort the multipart uploads Ferry left behind (after a crash) under a prefix",
        description=(
            "Abort Ferry's own open multipart uploads under s3://bucket[/prefix] that are older than "
            "--older-than, and delete their marks; also delete marks whose upload already ended. "
            "Uploads without Ferry's mark are never touched."
        ),
    )
    clean.add_argument("url", metavar="s3://BUCKET[/PREFIX]")
    clean.add_argument("--older-than", default="24h", help="only uploads started this long ago (default 24h)")
    clean.add_argument("--dry-run", action="store_true", help="say what would be aborted; abort nothing")
    clean.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    clean.add_argument(
        "--marks-prefix",
        default=DEFAULT_MARKS_PREFIX,
        help=f"where Ferry's marks are (default {DEFAULT_MARKS_PREFIX})",
    )
    clean.add_argument("--endpoint-url", help="S3 endpoint (an S3-compatible server)")
    clean.add_argument("--region")
    clean.add_argument("--profile", help="AWS profile")
    return clean


def add_demo_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    demo = commands.add_parser(
        "demo", help="run a copy on an embedded S3 endpoint (no AWS account)", epilog=SIZES
    )
    demo.add_argument(
        "--objects", type=int, default=300, help="small objects to create (default %(default)s)"
    )
    demo.add_argument(
        "--large-size",
        metavar="SIZE",
        default="80MiB",
        help="size of the multipart object (default %(default)s)",
    )
    return demo
