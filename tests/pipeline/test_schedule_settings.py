"""The `schedules` and `alarm_*` settings: what is accepted, and the one line a wrong one gets."""

from __future__ import annotations

from typing import Any

import pytest

from ferry.errors import ConfigError
from ferry.pipeline.settings import PipelineSettings

BASE: dict[str, Any] = {
    "sources": [{"bucket": "src", "prefix": "in/"}],
    "destinations": [{"bucket": "dst", "prefix": "out/"}],
}
NIGHTLY = {
    "name": "nightly",
    "schedule": "cron(0 2 * * ? *)",
    "timezone": "Europe/Berlin",
    "spec": {
        "source": {"bucket": "src", "prefix": "in/photos"},
        "destination": {"bucket": "dst", "prefix": "out/p"},
    },
}


def test_a_schedule_is_stored_normalised_in_skip_existing_mode() -> None:
    settings = PipelineSettings.from_context({"schedules": [NIGHTLY], **BASE})  # order does not matter
    (schedule,) = settings.schedules
    assert (schedule.name, schedule.expression, schedule.timezone) == (
        "nightly",
        "cron(0 2 * * ? *)",
        "Europe/Berlin",
    )
    assert schedule.spec["source"] == {"bucket": "src", "prefix": "in/photos/"}
    assert schedule.spec["destination"] == {"bucket": "dst", "prefix": "out/p/"}
    assert schedule.spec["options"]["skip_existing"] is True
    assert "job_id" not in schedule.spec


@pytest.mark.parametrize(
    "expression",
    ["rate(1 minute)", "rate(5 minutes)", "rate(1 day)", "rate(12 hours)", "cron(15 */4 ? * MON-FRI *)"],
)
def test_any_interval_is_accepted(expression: str) -> None:
    settings = PipelineSettings.from_context({**BASE, "schedules": [{**NIGHTLY, "schedule": expression}]})
    assert settings.schedules[0].expression == expression


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"schedules": {"name": "x"}}, "schedules: must be a list"),
        ({"schedules": [NIGHTLY, NIGHTLY]}, "schedules: the name 'nightly' is used twice"),
        ({"schedules": [{**NIGHTLY, "every": "day"}]}, "schedules[0].every: unknown field"),
        (
            {"schedules": [{**NIGHTLY, "schedule": "cron(0 2 1 * MON *)"}]},
            "day-of-month or day-of-week must be '?'",
        ),
        (
            {"schedules": [{**NIGHTLY, "schedule": "daily"}]},
            "'daily' is not 'cron(...)' or 'rate(N minutes|hours|days)'",
        ),
        (
            {
                "schedules": [
                    {
                        **NIGHTLY,
                        "spec": {**NIGHTLY["spec"], "destination": {"bucket": "dst", "prefix": "else/"}},
                    }
                ]
            },
            "schedules[nightly].spec.destination: s3://dst/else/ is not inside any configured 'destinations' location",
        ),
        (  # the one job-spec validator, as on every door: S3's storage classes
            {"schedules": [{**NIGHTLY, "spec": {**NIGHTLY["spec"], "options": {"storage_class": "COLD"}}}]},
            "schedules[nightly].spec.options.storage_class: 'COLD' is not an S3 storage class",
        ),
        (  # ... and a destination inside the listed source
            {
                "sources": [{"bucket": "src", "prefix": ""}],
                "destinations": [{"bucket": "src", "prefix": ""}],
                "schedules": [
                    {
                        **NIGHTLY,
                        "spec": {
                            "source": {"bucket": "src", "prefix": "in/"},
                            "destination": {"bucket": "src", "prefix": "in/copy/"},
                        },
                    }
                ],
            },
            "schedules[nightly].spec.destination: s3://src/in/copy/ is inside the source s3://src/in/",
        ),
        ({"alarm_email": "ops.example.com"}, "alarm_email: 'ops.example.com' is not an email address"),
        ({"alarm_topic_arn": "ops-pager"}, "alarm_topic_arn: 'ops-pager' is not an SNS topic ARN"),
        (
            {"alarm_oldest_event_seconds": 10},
            "alarm_oldest_event_seconds: 10 is out of range (60 to 1209600)",
        ),
        ({"alarm_replication_lag_seconds": "15m"}, "alarm_replication_lag_seconds: must be a whole number"),
    ],
)
def test_a_wrong_setting_is_named_in_one_line(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        PipelineSettings.from_context({**BASE, **values})
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_alarm_targets_and_thresholds_are_read() -> None:
    settings = PipelineSettings.from_context(
        {
            **BASE,
            "alarm_email": "ops@example.com",
            "alarm_topic_arn": "arn:aws:sns:eu-west-1:123456789012:pager",
            "alarm_oldest_event_seconds": 600,
            "alarm_replication_lag_seconds": 120,
        }
    )
    assert (settings.alarm_email, settings.alarm_topic_arn) == (
        "ops@example.com",
        "arn:aws:sns:eu-west-1:123456789012:pager",
    )
    assert (settings.alarm_oldest_event_seconds, settings.alarm_replication_lag_seconds) == (600, 120)
    defaults = PipelineSettings.from_context(BASE)
    assert (
        defaults.alarm_oldest_event_seconds,
        defaults.alarm_replication_lag_seconds,
        defaults.schedules,
    ) == (900, 900, ())
