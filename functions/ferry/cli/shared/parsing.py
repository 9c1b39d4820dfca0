"""What every `ferry` command shares: its exit codes, and an argument parser that keeps
exit code 2 for failed objects and answers a usage error in three short lines."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from typing import IO, Any, NoReturn

from ferry.errors import ConfigError

EXIT_OK, EXIT_USAGE, EXIT_FAILED, EXIT_PENDING = 0, 1, 2, 3


# Where a subcommand's parser leaves itself in the namespace, so that the root parser can
# report an unknown argument as that subcommand's error (argparse reports it as the root's).
_COMMAND_PARSER = "_ferry_command_parser"


class Parser(argparse.ArgumentParser):
    """Every `ferry` parser (subparsers inherit it through `parser_class`).

    A usage error is three lines on stderr: a short usage line (`usage: ferry copy SRC DST
    [options]`), the error, and `see ferry copy --help`; argparse's own usage line lists every
    option, which buries the error. Exit code 1: argparse's 2 is Ferry's "some object failed".
    `--help` still prints argparse's full usage and option list.
    """

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(self.format_usage())
        self.exit(EXIT_USAGE, f"ferry: error: {message}\nsee {self.prog} --help\n")

    def format_usage(self) -> str:
        """The positionals and required options only; the rest is `[options]`."""
        shown = [a for a in self._actions if not a.option_strings or a.required]
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, shown, [])
        usage = formatter.format_help().rstrip("\n")
        options = [a for a in self._actions if not isinstance(a, argparse._HelpAction)]
        if any(a.option_strings and not a.required for a in options):
            usage += " [options]"
        return usage + "\n"

    def add_subparsers(self, **kwargs: Any) -> argparse._SubParsersAction:
        """`COMMAND` in usage lines and errors (not the dest's name, or every choice)."""
        kwargs.setdefault("metavar", "COMMAND")
        return super().add_subparsers(**kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if not hasattr(parsed, _COMMAND_PARSER):  # the innermost command's parser returns first
            setattr(parsed, _COMMAND_PARSER, self)
        return parsed, extras

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """An unknown argument is the innermost command's error: `see ferry job start --help`."""
        parsed, extras = self.parse_known_args(args, namespace)
        command = getattr(parsed, _COMMAND_PARSER, self)
        delattr(parsed, _COMMAND_PARSER)
        if extras:
            command.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


class VersionAction(argparse.Action):
    """`--version`: `ferry X.Y.Z`, the installed package's version (importlib.metadata is
    imported only when asked, so every other start-up is spared it)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        kwargs.setdefault("help", "print the installed version and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> NoReturn:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("ferry")
        except PackageNotFoundError:  # run from a source tree that was never installed
            number = "(not installed)"
        sys.stdout.write(f"ferry {number}\n")
        parser.exit(EXIT_OK)


# Said in the --help of every command that takes both a spec and --job-id.
JOB_ID_RULE = "--job-id overrides the spec's job_id"


def job_id_of(option: str | None, spec: Any, path: str | None) -> Any:
    """The job's id: `--job-id` if given, else the spec's own `job_id` (read from `path`).

    The option wins, as every option given on the command line overrides the spec's own
    (`ferry job start --spec FILE --mode ...`): a job id is used once per ledger or stack, so a
    spec that names its job could otherwise run only once without editing the file. Nothing
    is guessed: the id used is the one typed last, and the run prints it."""
    written = spec.get("job_id") if isinstance(spec, dict) else None
    # An id given empty is an id (refused by the spec's validator), not a missing one; so is
    # a job_id of the wrong type.
    return option if option is not None else written


def read_json_file(path: str) -> Any:
    """A job spec file (or any JSON file the user names), or one sentence saying why not.

    JSON files are UTF-8 (RFC 8259). A UTF-8 byte-order mark is read past (Notepad writes
    one); UTF-16, which PowerShell's `>` and Out-File write, and bytes that are not UTF-8 are
    named with the way to convert the file, not a traceback."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        raise ConfigError(f"cannot read {path!r}: {error.strerror}") from error
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in data[:4]:
        raise ConfigError(
            f"{path!r} is UTF-16 text; JSON files are UTF-8: save it as UTF-8 (PowerShell: "
            "Out-File -Encoding utf8; or `iconv -f UTF-16 -t UTF-8`)"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError(
            f"{path!r} is not UTF-8 (byte 0x{data[error.start]:02x} on line {line}): save it as UTF-8"
        ) from error
    try:
        return json.loads(text, object_pairs_hook=_unique_names, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path!r} is not JSON: {error}") from error
    except _Ambiguous as error:
        raise ConfigError(f"{path!r}: {error}") from None


class _Ambiguous(ValueError):
    """A JSON text that parsers read two ways (RFC 8259 leaves them free)."""


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object naming one field twice: Python keeps the last value, other parsers the first,
    so the spec a user reviewed may not be the job that runs."""
    seen: dict[str, Any] = {}
    for name, value in pairs:
        if name in seen:
            raise _Ambiguous(f"the field {name!r} appears twice in one object; keep one")
        seen[name] = value
    return seen


def _no_constant(name: str) -> Any:
    """NaN and Infinity are not JSON (RFC 8259), though Python reads them."""
    raise _Ambiguous(f"{name} is not a JSON value; write a number or a string")


def open_for_writing(stack: ExitStack, path: str, what: str) -> IO[str]:
    """Open an output file (a report, a page) before anything is copied or listed, so a wrong
    path costs nothing; closed with `stack`."""
    try:
        return stack.enter_context(open(path, "w", encoding="utf-8"))  # noqa: SIM115
    except OSError as error:
        raise ConfigError(f"cannot write {what} {path!r}: {error.strerror}") from error
