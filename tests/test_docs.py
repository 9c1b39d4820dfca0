"""The documentation keeps its promises: README.md stays a short front door, every relative link
in README.md and docs/ leads to a file that exists, and every `ferry ...` command shown in a
fenced code block is one the real argument parser accepts (a renamed option fails here, not in
a reader's terminal).

Which lines of a fenced code block are `ferry` commands is a rule, not a list of exceptions:
- a line whose first word, after an optional `$ ` prompt and any `NAME=value` environment
  assignments, is `ferry` or a path ending in `/ferry` (`.venv/bin/ferry`); a line ending in
  `\\` goes on with the next; `#` starts a comment;
- left out: a usage synopsis, which shows choices rather than one command and is recognised by
  a word in square brackets (`[--json]`); and a command line the shell, not `ferry`, would read
  first: one with a pipe, a redirection, `;`, `&`, or a `$(...)` or backquote substitution.
Placeholders (`s3://bucket/prefix/`, `JOB`, `...`) are ordinary arguments and parse as such.

`make docs` (mkdocs --strict) checks the links inside the site as well, anchors included; this
test also covers README.md, which the site does not build.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from ferry.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_MAX_LINES = 300
PAGES = sorted([README, *(ROOT / "docs").rglob("*.md")])

FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:...
ENVIRONMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SHELL_PUNCTUATION = set("();<>|&")
# Before any shell parsing, which other lines (JSON, output) need not survive.
FERRY_LINE = re.compile(r"^\s*(\$ )?([A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(\S*/)?ferry(\s|$)")


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _lines(path: Path) -> list[tuple[int, str, bool]]:
    """Each line of a Markdown file with its number and whether it is inside a fenced block
    (the fence lines themselves count as inside)."""
    out: list[tuple[int, str, bool]] = []
    fence: str | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            out.append((number, line, True))
        elif fence is not None:
            out.append((number, line, True))
            if line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
                fence = None
        else:
            out.append((number, line, False))
    return out


# -- (a) a short README ------------------------------------------------------------------------


def test_readme_is_a_front_door_of_at_most_300_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move the detail into a page "
        "under docs/ and link to it"
    )


# -- (b) relative links lead somewhere ---------------------------------------------------------


@dataclass(frozen=True)
class Link:
    page: Path
    line: int
    target: str

    def __str__(self) -> str:
        return f"{_relative(self.page)}:{self.line}: {self.target}"


def relative_links(page: Path) -> list[Link]:
    """Links and images outside code blocks and code spans, other than URLs and bare anchors."""
    links = []
    for number, line, in_fence in _lines(page):
        if in_fence:
            continue
        text = CODE_SPAN.sub("", line)
        targets = INLINE_LINK.findall(text) + REFERENCE_LINK.findall(text)
        for target in targets:
            if EXTERNAL.match(target) or target.startswith("#"):
                continue
            links.append(Link(page, number, target))
    return links


LINKS = [link for page in PAGES for link in relative_links(page)]


def test_the_pages_have_links_to_check() -> None:
    """A guard on the extraction itself: the README links into the site, and the site into itself."""
    assert sum(link.page == README for link in LINKS) >= 20
    assert len(LINKS) >= 100


@pytest.mark.parametrize("link", LINKS, ids=str)
def test_relative_link_points_to_a_file_that_exists(link: Link) -> None:
    path = link.target.split("#", 1)[0].split("?", 1)[0]
    assert path, f"{link}: an empty link"
    resolved = (link.page.parent / path).resolve()
    assert resolved.is_relative_to(ROOT), f"{link}: leads out of the repository"
    assert resolved.exists(), f"{link}: no such file ({_relative(link.page.parent)}/{path})"


# -- (c) every `ferry` command shown parses ----------------------------------------------------


@dataclass(frozen=True)
class Shown:
    page: Path
    line: int
    text: str

    def __str__(self) -> str:
        return f"{_relative(self.page)}:{self.line}"


def _words(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def ferry_argv(text: str) -> list[str] | None:
    """The arguments after `ferry` if the line is one plain `ferry` command, else None.
    Raises ValueError for a `ferry` line the shell could not read (a quote left open)."""
    if not FERRY_LINE.match(text):
        return None
    words = _words(text.removeprefix("$ "))
    while words and ENVIRONMENT.match(words[0]):
        words.pop(0)
    if not words or not (words[0] == "ferry" or words[0].endswith("/ferry")):
        return None
    if any(set(word) <= SHELL_PUNCTUATION for word in words) or any("`" in word for word in words):
        return None  # the shell reads this line first: a pipe, a redirection, a substitution...
    if any(word.startswith("[") for word in words):
        return None  # a usage synopsis: choices, not one command
    return words[1:]


def shown_commands(page: Path) -> list[Shown]:
    shown = []
    pending: tuple[int, str] | None = None
    for number, line, in_fence in _lines(page):
        if not in_fence or FENCE.match(line):
            pending = None
            continue
        start, text = pending if pending else (number, "")
        text += line
        if line.endswith("\\"):
            pending = (start, text[:-1] + " ")
            continue
        pending = None
        if FERRY_LINE.match(text):
            shown.append(Shown(page, start, text.strip()))
    return shown


COMMANDS = [shown for page in PAGES for shown in shown_commands(page)]


def _one_command(shown: Shown) -> bool:
    """Whether a shown line is one ferry command to parse; a line the shell could not read is
    kept, so that its test fails and names it."""
    try:
        return ferry_argv(shown.text) is not None
    except ValueError:
        return True


# The lines the rule leaves out (shell syntax, usage synopses) are not collected at all:
# test_the_rule_for_what_is_a_command pins that rule.
PARSED = [shown for shown in COMMANDS if _one_command(shown)]


def test_the_pages_show_every_command() -> None:
    """Every command and `ferry job` subcommand has at least one example that is checked here,
    so a command added to the parser without an example in the docs is noticed."""
    argvs = [ferry_argv(command.text) for command in COMMANDS]
    shown = {tuple(argv[:2]) for argv in argvs if argv}
    firsts = {argv[0] for argv in shown}
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name, subparser in commands.items():
        assert name in firsts, f"no page shows `ferry {name}` in a code block"
        nested = [a for a in subparser._actions if a.dest == "job_command"]
        for job_command in nested[0].choices if nested else ():
            assert (name, job_command) in shown, f"no page shows `ferry {name} {job_command}` in a code block"


@pytest.mark.parametrize("command", PARSED, ids=str)
def test_shown_ferry_command_parses(command: Shown) -> None:
    try:
        argv = ferry_argv(command.text)
    except ValueError as error:
        pytest.fail(f"{command}: `{command.text}` cannot be read as a shell command: {error}")
    assert argv is not None
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as error:
        pytest.fail(f"{command}: `{command.text}` is refused (exit {error.code}):\n{errors.getvalue()}")


@pytest.mark.parametrize(
    ("text", "argv"),
    [
        (".venv/bin/ferry copy s3://a/ s3://b/  # a comment", ["copy", "s3://a/", "s3://b/"]),
        ("$ ferry job list --max 10", ["job", "list", "--max", "10"]),
        ("FERRY_LOG_LEVEL=INFO ferry demo", ["demo"]),
        (
            "ferry copy s3://a/ s3://b/ --exclude '*.tmp'",
            ["copy", "s3://a/", "s3://b/", "--exclude", "*.tmp"],
        ),
        ("ferry copy s3://a/ s3://b/ --json | jq .copied", None),
        ("ferry copy s3://a/ s3://b/ > out.txt", None),
        ("ferry estimate --objects N [--json]", None),
        ("aws s3 ls s3://a/", None),
        ("308 objects: 308 copied", None),
    ],
)
def test_the_rule_for_what_is_a_command(text: str, argv: list[str] | None) -> None:
    assert ferry_argv(text) == argv
