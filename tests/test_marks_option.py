"""The marks prefix as a job option and a `ferry copy` flag: one validator for both doors."""

from __future__ import annotations

import pytest

from ferry.cli.commands.copy_command import options_from, parse_copy_args
from ferry.jobspec import SpecError, options_to_dict, parse_options
from ferry.models import DEFAULT_MARKS_PREFIX


def test_marks_prefix_defaults_validates_and_round_trips() -> None:
    assert parse_options({}).policy.marks_prefix == DEFAULT_MARKS_PREFIX == ".ferry/uploads/"
    options = parse_options({"marks_prefix": "ops/marks"})
    assert options.policy.marks_prefix == "ops/marks/"
    assert parse_options(options_to_dict(options)) == options
    for bad in ("", "/abs/", 7):
        with pytest.raises(
            SpecError, match=r"^options\.marks_prefix: .* must be a folder in the destination bucket"
        ):
            parse_options({"marks_prefix": bad})


def test_copy_flag_reaches_the_policy() -> None:
    args = parse_copy_args(["s3://a", "s3://b", "--marks-prefix", "m/"])
    assert options_from(args).policy.marks_prefix == "m/"
    assert options_from(parse_copy_args(["s3://a", "s3://b"])).policy.marks_prefix == DEFAULT_MARKS_PREFIX
    with pytest.raises(SpecError, match=r"^--marks-prefix: '/x' must be a folder"):
        options_from(parse_copy_args(["s3://a", "s3://b", "--marks-prefix", "/x"]))
