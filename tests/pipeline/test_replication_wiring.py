"""Replication, safe deletes and per-location reach wired together: a replication keeps its
locations whole (role, region, endpoint, secret), its jobs carry the replication tag that
makes the copy path write copy records, and its starter hands "Object Deleted" events to
`apply_deletes` (newest event per key only) when deletes are on."""

from __future__ import annotations

import json

import pytest

from ferry.errors import ConfigError
from ferry.jobspec import parse_job_spec
from ferry.pipeline.replication_config import Replication
from ferry.pipeline.settings import PipelineSettings

ROLE = "arn:aws:iam::444455556666:role/ferry-read"
CROSS = {
    "name": "photos",
    "source": {"bucket": "src", "prefix": "in", "owner": "444455556666", "role_arn": ROLE},
    "destination": {
        "bucket": "dst",
        "prefix": "out/",
        "endpoint_url": "https://s3.example.net",
        "region": "eu-central-1",
        "credentials_secret": "ferry/remote-keys",
    },
    "deletes": True,
}


def test_a_replication_keeps_how_its_locations_are_reached() -> None:
    parsed = Replication.parse(CROSS, "replications[0]")
    assert parsed.source.prefix == "in/"  # still made a folder
    assert (parsed.source.role_arn, parsed.source.owner) == (ROLE, "444455556666")
    assert (
        parsed.destination.endpoint_url,
        parsed.destination.region,
        parsed.destination.credentials_secret,
    ) == ("https://s3.example.net", "eu-central-1", "ferry/remote-keys")
    # ... and through the starter's environment, unchanged.
    assert Replication.from_environment(parsed.to_environment()) == parsed
    assert Replication.from_environment(parsed.to_environment()).source.role_arn == ROLE


def test_a_batch_job_carries_the_replication_tag_the_copy_path_reads() -> None:
    for deletes in (True, False):
        r = Replication.parse({**CROSS, "deletes": deletes}, "replications[0]")
        spec = r.job_spec("photos-abc", "ferry-reports", "jobs/photos-abc/events.jsonl")
        assert spec["replication"] == {"name": "photos", "deletes": deletes}
        parsed = parse_job_spec(json.loads(json.dumps(spec)))
        assert parsed.replication is not None
        assert (parsed.replication.name, parsed.replication.deletes) == ("photos", deletes)


def settings_with(replication: dict) -> PipelineSettings:
    return PipelineSettings.from_context(
        {
            "sources": [{"bucket": "src", "role_arn": ROLE, "owner": "444455556666"}],
            "destinations": [{"bucket": "dst", "prefix": "out/", "region": "eu-central-1"}],
            "replications": [replication],
        }
    )


def test_a_replication_is_reached_as_the_workers_reach_its_locations() -> None:
    # Nothing said on the replication: it takes the reach of the sources/destinations entry the
    # workers copy it with (FERRY_LOCATIONS), so its deletes go the same way as its copies.
    plain = {
        "name": "photos",
        "source": {"bucket": "src", "prefix": "in/"},
        "destination": {"bucket": "dst", "prefix": "out/"},
    }
    (r,) = settings_with(plain).replications
    assert (r.source.role_arn, r.source.owner, r.destination.region) == (ROLE, "444455556666", "eu-central-1")
    (same,) = settings_with(
        {**plain, "source": {"bucket": "src", "prefix": "in/", "role_arn": ROLE}}
    ).replications
    assert same.source.role_arn == ROLE


def test_a_replication_reached_otherwise_than_its_workers_is_refused() -> None:
    other = "arn:aws:iam::444455556666:role/other"
    with pytest.raises(ConfigError, match=r"replications \(photos\)\.source: role_arn .*sources"):
        settings_with(
            {
                "name": "photos",
                "source": {"bucket": "src", "prefix": "in/", "role_arn": other},
                "destination": {"bucket": "dst", "prefix": "out/"},
            }
        )
