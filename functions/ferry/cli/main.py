"""The `ferry` command: copy S3 prefixes between any endpoints, or run the offline demo.

Exit codes: 0 every object copied or skipped; 2 some object failed (the summary and report
name them); 3 some object is pending (a restore in progress); 1 a usage or configuration
error, reported in one line before anything is written.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO

from ferry.cli.shared.arguments import (
    add_check_parser,
    add_clean_uploads_parser,
    add_copy_parser,
    add_demo_parser,
    add_estimate_parser,
    add_job_parser,
    add_policy_parser,
    add_run_parser,
    add_sync_parser,
)
from ferry.cli.shared.parsing import EXIT_USAGE, Parser, VersionAction
from ferry.errors import ConfigError, FerryError, is_botocore_error
from ferry.limits import parse_size

Command = Callable[[argparse.Namespace, IO[str], IO[str]], int]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="ferry", description="Copy very many S3 objects, verified.")
    parser.add_argument("--version", action=VersionAction)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    add_copy_parser(commands)
    add_sync_parser(commands)
    add_check_parser(commands)
    add_run_parser(commands)
    add_estimate_parser(commands)
    add_policy_parser(commands)

    add_job_parser(commands)
    add_clean_uploads_parser(commands)
    add_demo_parser(commands)
    return parser


def main(
    argv: Sequence[str] | None = None, stdout: IO[str] | None = None, stderr: IO[str] | None = None
) -> int:
    if argv is None:  # the process's own command line: see _settle_heap
        gc.disable()
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    logging.basicConfig(
        level=os.environ.get("FERRY_LOG_LEVEL", "WARNING"), format="%(levelname)s %(name)s: %(message)s"
    )
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what an interrupted copy says to run again
    try:
        return run_command(args, stdout, stderr)
    except FerryError as error:
        stderr.write(f"ferry: error: {error}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        stderr.write("ferry: interrupted\n")
        return 130
    except Exception as error:
        if not is_botocore_error(error):
            raise
        stderr.write(f"ferry: error: {error}\n")
        return EXIT_USAGE


def run_command(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """The parsed command's body, its modules loaded first and the heap they built set aside."""
    command = command_for(args)
    _settle_heap()
    return command(args, stdout, stderr)


def command_for(args: argparse.Namespace) -> Command:
    """The parsed command's function. Each is imported only here, when it runs: most load
    botocore, boto3 or rich, which `--help` and a usage error should not pay for (start-up cost)."""
    if args.command == "demo":
        from ferry.cli.commands.demo import run_demo

        return lambda args, stdout, _stderr: run_demo(
            objects=args.objects, large_size=parse_size(args.large_size), stdout=stdout
        )
    if args.command == "estimate":
        from ferry.cli.commands.estimate import run_estimate

        return run_estimate
    if args.command == "job":
        from ferry.cli.commands.jobs_command import run_job

        return run_job
    if args.command == "run":
        from ferry.cli.commands.run_command import run_run

        return run_run
    if args.command == "policy":
        from ferry.cli.commands.policy import run_policy

        return run_policy
    if args.command == "check":
        from ferry.cli.commands.check_command import run_check

        return run_check
    if args.command == "sync":
        from ferry.local.paths import is_local

        if is_local(args.src) or is_local(args.dst):
            from ferry.cli.commands.local_sync import run_local_sync

            return run_local_sync
        from ferry.cli.commands.sync_command import run_sync

        return run_sync
    if args.command == "clean-uploads":
        from ferry.cli.commands.clean_uploads import run_clean_uploads

        return run_clean_uploads
    from ferry.local.paths import is_local

    if is_local(args.src) or is_local(args.dst):
        if args.all_versions:
            raise ConfigError(
                "--all-versions copies an S3 bucket's history: SRC and DST must both be s3:// locations"
            )
        from ferry.cli.commands.local_copy import run_local_copy

        return run_local_copy
    if args.all_versions:
        from ferry.cli.commands.versions_command import run_copy_all_versions

        return run_copy_all_versions
    from ferry.cli.commands.copy_command import run_copy

    return run_copy


def _settle_heap() -> None:
    """A `ferry` process collects no cycles while it loads its command's modules (main turns
    the collector off): they live to the end, and the collector's passes over them cost a
    tenth of start-up. Once loaded they are frozen, out of every later pass, and collecting
    resumes (botocore's models, loaded when the command makes its clients, are collected as
    usual). A caller that runs main in its own process (tests) keeps its collector as it was."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


if __name__ == "__main__":
    sys.exit(main())
