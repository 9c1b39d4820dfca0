"""The `ferry` command: copy S3 prefixes between any endpoints, or run the offline demo.

Exit codes: 0 every object copied or skipped; 2 some object failed (the summary and report
name them); 3 some object is pending (a restore in progress); 1 a usage or configuration
error, reported in one line before anything is written.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import IO

from botocore.exceptions import BotoCoreError, ClientError

from ferry.cli.copy_command import add_copy_parser, run_copy
from ferry.cli.demo import run_demo
from ferry.cli.estimate import add_estimate_parser, run_estimate
from ferry.cli.parsing import EXIT_OK, EXIT_USAGE, Parser
from ferry.cli.policy import add_policy_parser, run_policy
from ferry.cli.run_command import add_run_parser, run_run
from ferry.errors import ConfigError, FerryError
from ferry.jobspec import parse_job_spec
from ferry.limits import parse_size


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="ferry", description="Copy very many S3 objects, verified.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    add_copy_parser(commands)
    add_run_parser(commands)
    add_estimate_parser(commands)
    add_policy_parser(commands)

    job = commands.add_parser("job", help="pipeline jobs (cdk deploy): check a job spec offline")
    job_commands = job.add_subparsers(dest="job_command", required=True, parser_class=Parser)
    validate = job_commands.add_parser("validate", help="check a job spec file; print it normalised")
    validate.add_argument("spec", metavar="FILE", help="a JSON job spec, as given to the state machine")

    demo = commands.add_parser("demo", help="run a copy on an embedded S3 endpoint (no AWS account)")
    demo.add_argument("--objects", type=int, default=300, help="small objects to create")
    demo.add_argument("--large-size", default="80MiB", help="size of the multipart object")
    return parser


def run_job_validate(path: str, stdout: IO[str]) -> int:
    """`ferry job validate FILE`: the same validation Prepare runs before any fan-out."""
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
    except OSError as error:
        raise ConfigError(f"cannot read {path!r}: {error.strerror}") from error
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path!r} is not JSON: {error}") from error
    spec = parse_job_spec(data, default_job_id="EXECUTION-NAME")
    stdout.write(json.dumps(spec.to_dict(), indent=2) + "\n")
    return EXIT_OK


def main(
    argv: Sequence[str] | None = None, stdout: IO[str] | None = None, stderr: IO[str] | None = None
) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    logging.basicConfig(
        level=os.environ.get("FERRY_LOG_LEVEL", "WARNING"), format="%(levelname)s %(name)s: %(message)s"
    )
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            return run_demo(objects=args.objects, large_size=parse_size(args.large_size), stdout=stdout)
        if args.command == "estimate":
            return run_estimate(args, stdout, stderr)
        if args.command == "job":
            return run_job_validate(args.spec, stdout)
        if args.command == "run":
            return run_run(args, stdout, stderr)
        if args.command == "policy":
            return run_policy(args, stdout, stderr)
        return run_copy(args, stdout, stderr)
    except FerryError as error:
        stderr.write(f"ferry: error: {error}\n")
        return EXIT_USAGE
    except (ClientError, BotoCoreError) as error:
        stderr.write(f"ferry: error: {error}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        stderr.write("ferry: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
