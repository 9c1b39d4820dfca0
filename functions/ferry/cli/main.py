"""The `ferry` command: copy S3 prefixes between any endpoints, or run the offline demo.

Exit codes: 0 every object copied or skipped; 2 some object failed (the summary and report
name them); 3 some object is pending (a restore in progress); 1 a usage or configuration
error, reported in one line before anything is written.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import IO

from botocore.exceptions import BotoCoreError, ClientError

from ferry.cli.clean_uploads import add_clean_uploads_parser, run_clean_uploads
from ferry.cli.copy_command import add_copy_parser, run_copy
from ferry.cli.demo import run_demo
from ferry.cli.estimate import add_estimate_parser, run_estimate
from ferry.cli.jobs_command import add_job_parser, run_job
from ferry.cli.parsing import EXIT_USAGE, Parser
from ferry.cli.policy import add_policy_parser, run_policy
from ferry.cli.run_command import add_run_parser, run_run
from ferry.errors import FerryError
from ferry.limits import parse_size


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="ferry", description="Copy very many S3 objects, verified.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    add_copy_parser(commands)
    add_run_parser(commands)
    add_estimate_parser(commands)
    add_policy_parser(commands)

    add_job_parser(commands)
    add_clean_uploads_parser(commands)

    demo = commands.add_parser("demo", help="run a copy on an embedded S3 endpoint (no AWS account)")
    demo.add_argument("--objects", type=int, default=300, help="small objects to create")
    demo.add_argument("--large-size", default="80MiB", help="size of the multipart object")
    return parser


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
            return run_job(args, stdout, stderr)
        if args.command == "run":
            return run_run(args, stdout, stderr)
        if args.command == "policy":
            return run_policy(args, stdout, stderr)
        if args.command == "clean-uploads":
            return run_clean_uploads(args, stdout, stderr)
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
