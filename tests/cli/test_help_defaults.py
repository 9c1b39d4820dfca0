"""Every `(default X)` in a help text is the value the code uses when the option is left out,
derived from the code itself: the parsed default as the command uses it, or, for an option
the parser leaves unset, the value the command's own code fills in. A new `(default X)` with
no way here to derive it fails the test, so that it is checked too.

Prose defaults (`(default: from CPUs and sizes)`, `(default: the spec's job_id, ...)`) are
descriptions, not values: only a default written as one word is compared, as `--help` shows it."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_usage_errors import ALL, required_arguments

from ferry.cli.commands.check_command import check_options, head_concurrency
from ferry.cli.commands.clean_uploads import parse_age
from ferry.cli.commands.copy_command import options_from
from ferry.cli.commands.run_command import ledger_path, pass_seconds, worker_settings
from ferry.cli.main import build_parser
from ferry.limits import parse_size

# `(default 10,000)`, `(default: ~/.cache/...)`, `(assumed; default 8MiB)`: one word, then the
# end of the parenthesis or clause. A word naming another option or a variable is prose.
DEFAULT = re.compile(r"(?:\(|; )default:? ([^\s();]+?)(?=[);]|, )")

# (command, option) -> the value the code uses when the option is not given, from the
# namespace a command line without that option parses to.
Derive = Callable[[argparse.Namespace], object]
LEFT_UNSET: dict[tuple[str, str], Derive] = {
    ("run", "--max-items-per-batch"): lambda args: worker_settings(args).max_items_per_batch,
    ("run", "--max-input-bytes-per-batch"): lambda args: worker_settings(args).max_input_bytes_per_batch,
    ("run", "--large-object-threshold"): lambda args: worker_settings(args).large_object_threshold,
    ("run", "--max-passes"): lambda args: worker_settings(args).max_passes,
    ("run", "--batch-concurrency"): lambda args: worker_settings(args).max_concurrency,
    ("run", "--pass-seconds"): pass_seconds,
    ("run", "--ledger"): ledger_path,
    ("job status", "--ledger"): ledger_path,  # ferry run's ledger, read by ferry job ... --local
    ("job report", "--ledger"): ledger_path,
    ("job list", "--ledger"): ledger_path,
    ("copy", "--marks-prefix"): lambda args: options_from(args).policy.marks_prefix,
    ("copy", "--compare"): lambda args: options_from(args).policy.compare,
    ("sync", "--compare"): lambda args: options_from(args).policy.compare,
    ("sync", "--marks-prefix"): lambda args: options_from(args).policy.marks_prefix,
    ("check", "--marks-prefix"): lambda args: check_options(args).policy.marks_prefix,
    ("check", "--concurrency"): head_concurrency,
    ("clean-uploads", "--older-than"): lambda args: parse_age(args.older_than),
}


def shown_defaults() -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, argparse.Action, str]]:
    """(command, its parser, the option, the default its help shows), for one-word defaults."""
    for path, parser in ALL:
        for action in parser._actions:
            for shown in DEFAULT.findall(action.help % vars(action) if action.help else ""):
                if not shown.startswith(("--", "$")):
                    yield path, parser, action, shown


SHOWN = list(shown_defaults())


def parsed_without(path: tuple[str, ...], parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The namespace of the command given only its required arguments (valid S3 URLs where
    the command takes them)."""
    argv = ["s3://bucket-a/x" if arg == "x" else arg for arg in required_arguments(parser)]
    if path == ("run",):
        argv = ["job.json"]
    return build_parser().parse_args([*path, *argv])


def same(shown: str, actual: object) -> bool:
    """`10,000` and 10000, `150KiB` and 153600, `24h` and a timedelta, `~/...` and a Path."""
    if isinstance(actual, Path):
        return Path(shown).expanduser() == actual
    if isinstance(actual, bool) or not isinstance(actual, int | float):
        if hasattr(actual, "total_seconds"):
            return parse_age(shown) == actual
        return shown == str(actual)
    number = shown.replace(",", "")
    try:
        return float(number) == actual
    except ValueError:
        return parse_size(shown) == actual


def test_the_walk_finds_the_defaults_help_shows() -> None:
    found = {(" ".join(path), action.option_strings[0]) for path, _, action, _ in SHOWN}
    assert {
        ("run", "--max-items-per-batch"),
        ("job list", "--max"),
        ("clean-uploads", "--older-than"),
    } <= found


@pytest.mark.parametrize(
    ("path", "parser", "action", "shown"),
    SHOWN,
    ids=[f"{' '.join(p)} {a.option_strings[0]}" for p, _, a, _ in SHOWN],
)
def test_each_default_help_shows_is_the_codes(
    path: tuple[str, ...],
    parser: argparse.ArgumentParser,
    action: argparse.Action,
    shown: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    args = parsed_without(path, parser)
    derive = LEFT_UNSET.get((" ".join(path), action.option_strings[0]))
    if derive is None:
        assert action.default is not None, (
            f"ferry {' '.join(path)} {action.option_strings[0]}: help shows (default {shown}) but the "
            "parser has none: add how the code derives it to LEFT_UNSET"
        )
        actual = getattr(args, action.dest)
    else:
        actual = derive(args)
    assert same(shown, actual), (
        f"ferry {' '.join(path)} {action.option_strings[0]}: help says {shown}, code uses {actual!r}"
    )
