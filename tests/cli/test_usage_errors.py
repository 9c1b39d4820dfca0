"""Usage errors are short: every `ferry` command, nested ones included, answers a wrong or
missing argument in at most three lines on stderr (a short usage line, the error, a hint
naming the command's --help), exit code 1, and never argparse's full option list.

The commands are found by walking the real parser, so a command added later is checked too.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ferry.cli.main import build_parser
from ferry.cli.shared.parsing import EXIT_USAGE

FERRY = str(Path(sys.executable).with_name("ferry"))


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command line that reaches a parser: ("copy",), ("job", "start"), ..."""
    yield path, parser
    sub = _subparsers(parser)
    if sub is not None:
        for name, child in sub.choices.items():
            yield from commands(child, (*path, name))


def required_arguments(parser: argparse.ArgumentParser) -> list[str]:
    """Values for a parser's required arguments, so that only the fault under test is wrong."""
    argv: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        if not action.option_strings and action.nargs not in ("?", "*"):
            argv.append("x")
        elif action.option_strings and action.required:
            argv += [action.option_strings[0], "123456789012"]
    return argv


def option_taking_a_value(parser: argparse.ArgumentParser) -> str | None:
    return next((a.option_strings[0] for a in parser._actions if a.option_strings and a.nargs is None), None)


LEAVES = [(path, parser) for path, parser in commands(build_parser()) if _subparsers(parser) is None]
ALL = list(commands(build_parser()))


def cases() -> Iterator[tuple[str, tuple[str, ...], list[str]]]:
    """(test id, the command's words, the argv): a wrong option, an option without its value,
    and a missing argument, for each command that has them."""
    for path, parser in ALL:
        name = " ".join(path) or "ferry"
        required = required_arguments(parser)
        if _subparsers(parser) is None:
            yield f"{name}: unknown option", path, [*path, *required, "--no-such-option"]
            option = option_taking_a_value(parser)
            if option:
                yield f"{name}: {option} without its value", path, [*path, *required, option]
        if required or _subparsers(parser) is not None:
            yield f"{name}: missing argument", path, [*path]


CASES = list(cases())


def test_the_walk_finds_every_command() -> None:
    found = {" ".join(path) for path, _ in ALL}
    assert {"copy", "run", "estimate", "policy", "demo", "job", "job start", "job retry"} <= found
    assert len(CASES) >= 2 * len(LEAVES)


@pytest.mark.parametrize(("path", "argv"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_usage_error_is_at_most_three_lines_naming_the_command(
    path: tuple[str, ...], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert exit_.value.code == EXIT_USAGE, err
    assert 2 <= len(lines) <= 3, err
    command = " ".join(["ferry", *path])
    usage, error, hint = lines[0], lines[1], lines[-1]
    assert usage.startswith(f"usage: {command}"), err
    assert len(usage) <= 100, err  # one short line, not the option list
    assert error.startswith("ferry: error: "), err
    assert hint == f"see {command} --help", err
    assert "Traceback" not in err


def test_copy_usage_line_names_its_positionals() -> None:
    run = subprocess.run([FERRY, "copy", "s3://only-one"], capture_output=True, text=True, timeout=60)
    assert run.returncode == EXIT_USAGE
    assert run.stderr.splitlines() == [
        "usage: ferry copy SRC DST [options]",
        "ferry: error: the following arguments are required: DST",
        "see ferry copy --help",
    ]
    assert run.stdout == ""


def test_a_missing_subcommand_is_named_and_help_still_lists_every_option() -> None:
    run = subprocess.run([FERRY, "job"], capture_output=True, text=True, timeout=60)
    assert run.returncode == EXIT_USAGE
    assert run.stderr.splitlines() == [
        "usage: ferry job COMMAND ...",
        "ferry: error: the following arguments are required: COMMAND",
        "see ferry job --help",
    ]
    helped = subprocess.run([FERRY, "copy", "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "--part-size" in helped.stdout and "--kms-key-id" in helped.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["copy", "s3://src-b/p/", "s3://dst-b/p/", "--endpoint-url", "127.0.0.1:19000"],
        ["copy", "s3://src-b/p/", "LOCAL", "--endpoint-url", "localhost:9000"],
        ["copy", "s3://src-b/p/", "s3://dst-b/p/", "--dest-endpoint-url", "127.0.0.1:19000"],
        ["sync", "s3://src-b/p/", "s3://dst-b/p/", "--source-endpoint-url", "127.0.0.1:19000"],
        ["check", "s3://src-b/p/", "s3://dst-b/p/", "--endpoint-url", "127.0.0.1:19000"],
        ["clean-uploads", "s3://dst-b/", "--endpoint-url", "127.0.0.1:19000"],
        ["ls", "s3://src-b/p/", "--endpoint-url", "ftp://127.0.0.1:19000"],
        [
            "run",
            "SPEC",
            "--table",
            "ledger",
            "--table-endpoint-url",
            "127.0.0.1:8000",
            "--region",
            "us-east-1",
        ],
    ],
)
def test_an_endpoint_without_a_scheme_is_refused_in_one_line(argv: list[str], tmp_path) -> None:
    """`--endpoint-url 127.0.0.1:19000` (the scheme left out, as MinIO's own docs print the
    address) was a botocore traceback ('ValueError: Invalid endpoint'); it is one line that
    says what to write, before anything is read or written."""
    spec = tmp_path / "job.json"
    spec.write_text('{"source": {"bucket": "src-b"}, "destination": {"bucket": "dst-b"}}')
    argv = [str(tmp_path / "down") if a == "LOCAL" else str(spec) if a == "SPEC" else a for a in argv]
    if argv[0] == "ls":
        argv = ["copy", argv[1], "s3://dst-b/p/", *argv[2:]]
    done = subprocess.run([FERRY, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "endpoint" in done.stderr and "http://" in done.stderr, done.stderr
    assert not (tmp_path / "down").exists()
