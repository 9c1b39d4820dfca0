"""The job spec: one validator for pipeline jobs and the CLI, errors that name the field."""

from __future__ import annotations

import json

import pytest

from ferry.cli.main import main
from ferry.jobspec import SpecError, parse_job_spec, parse_options
from ferry.models import Mode


def test_a_prefix_job_is_normalised() -> None:
    spec = parse_job_spec(
        {
            "source": {"bucket": "src", "prefix": "photos"},
            "destination": {"bucket": "dst", "prefix": "backup"},
            "options": {
                "mode": "server-side",
                "part_size": "64MiB",
                "include": "*.jpg",
                "restore_tier": "bulk",
            },
        },
        default_job_id="exec-7",
    )
    assert spec.job_id == "exec-7"
    assert (spec.source_prefix, spec.destination_prefix, spec.reader) == ("photos/", "backup/", "listing")
    assert spec.options.policy.mode == Mode.SERVER_SIDE
    assert spec.options.policy.part_size == 64 * 1024 * 1024
    assert spec.options.include == ("*.jpg",)
    assert spec.options.policy.restore == "bulk"
    again = parse_job_spec(spec.to_dict())
    assert again == spec, "the normalised spec passed to batches reads back the same"


def test_abort_uploads_after_seconds_defaults_to_finalize_and_reads_back() -> None:
    base = {"source": {"bucket": "src"}, "destination": {"bucket": "dst"}}
    assert parse_job_spec(base, default_job_id="j").options.abort_uploads_after_seconds == 0
    spec = parse_job_spec({**base, "options": {"abort_uploads_after_seconds": 3600}}, default_job_id="j")
    assert spec.options.abort_uploads_after_seconds == 3600
    assert parse_job_spec(spec.to_dict()) == spec


def test_a_manifest_job_keeps_its_format_and_optional_bucket() -> None:
    spec = parse_job_spec(
        {
            "job_id": "inv-1",
            "source": {"manifest": {"bucket": "inv", "key": "x/manifest.json", "format": "inventory"}},
            "destination": {"bucket": "dst"},
        }
    )
    assert spec.reader == "inventory" and spec.source_bucket is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "fast"}, "options.mode: 'fast' is not one of auto, server-side, stream"),
        ({"part_size": "2MiB"}, "options.part_size: "),
        ({"part_size": "lots"}, "options.part_size: cannot read size 'lots'"),
        ({"multipart_threshold": "10GiB"}, "options.multipart_threshold: "),
        ({"checksum_algorithm": "md5"}, "options.checksum_algorithm: 'md5' is not one of"),
        ({"skip_existing": "yes"}, "options.skip_existing: must be true or false"),
        ({"metadata": {"a": 1}}, "options.metadata: must be an object of string keys"),
        ({"include": [""]}, "options.include: must be a list of glob patterns"),
        ({"restore_tier": "now"}, "options.restore_tier: 'now' is not one of bulk, standard, expedited"),
        ({"restore_days": 0}, "options.restore_days:"),
        ({"speed": 1}, "options.speed: unknown option"),
        ({"abort_uploads_after_seconds": "1h"}, "options.abort_uploads_after_seconds: '1h' must be a whole"),
        ({"abort_uploads_after_seconds": -1}, "options.abort_uploads_after_seconds: -1 must be a whole"),
        ({"abort_uploads_after_seconds": True}, "options.abort_uploads_after_seconds: True must be"),
        ({"abort_uploads_after_seconds": 10**9}, "options.abort_uploads_after_seconds: 1000000000 must"),
    ],
)
def test_a_wrong_option_is_named(options, message) -> None:
    with pytest.raises(SpecError) as error:
        parse_options(options)
    assert str(error.value).startswith(message), str(error.value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ([], "the job spec: must be an object"),
        ({"destination": {"bucket": "dst"}}, "source: missing"),
        (
            {"source": {"bucket": "src", "prefx": "a"}, "destination": {"bucket": "dst"}},
            "source.prefx: unknown field",
        ),
        (
            {"source": {"bucket": "S3://src"}, "destination": {"bucket": "dst"}},
            "source.bucket: 'S3://src' is not a valid bucket name",
        ),
        (
            {"source": {"manifest": {"bucket": "m", "format": "csv"}}, "destination": {"bucket": "dst"}},
            "source.manifest.key:",
        ),
        ({"source": {"bucket": "src"}, "destination": {"bucket": "dst"}, "extra": 1}, "extra: unknown field"),
    ],
)
def test_a_wrong_spec_is_named(spec, message) -> None:
    with pytest.raises(SpecError) as error:
        parse_job_spec(spec, default_job_id="x")
    assert str(error.value).startswith(message), str(error.value)


def test_the_cli_checks_its_options_with_the_same_code_naming_its_flags(capsys) -> None:
    assert main(["copy", "s3://a/", "s3://b/", "--part-size", "2MiB"]) == 1
    assert "ferry: error: --part-size: " in capsys.readouterr().err
    assert main(["copy", "s3://a/", "s3://b/", "--restore-days", "0"]) == 1
    assert "ferry: error: --restore-days:" in capsys.readouterr().err


def test_ferry_job_validate_prints_the_normalised_spec_or_names_the_field(tmp_path, capsys) -> None:
    good = tmp_path / "job.json"
    good.write_text(
        json.dumps({"source": {"bucket": "src", "prefix": "a"}, "destination": {"bucket": "dst"}})
    )
    assert main(["job", "validate", str(good)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["source"] == {"bucket": "src", "prefix": "a/"}

    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"source": {"bucket": "src"}, "destination": {"bucket": "dst"}, "options": {"mode": "x"}})
    )
    assert main(["job", "validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ferry: error: options.mode: 'x' is not one of") and "Traceback" not in err
