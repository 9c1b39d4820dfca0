"""How each location is reached: parsed from cdk.json, carried to the workers, looked up by
bucket and key; and a secret's keys (moto Secrets Manager) re-read before they go stale."""

from __future__ import annotations

import datetime as dt
import json
import logging

import boto3
import pytest

from ferry.errors import ConfigError
from ferry.models import Endpoint
from ferry.pipeline.reach import endpoint_for
from ferry.pipeline.settings import PipelineSettings, WorkerSettings
from ferry.s3 import clients

ROLE = "arn:aws:iam::444455556666:role/ferry-writer"


def settings(**destination: object) -> PipelineSettings:
    return PipelineSettings.from_context(
        {"sources": [{"bucket": "a"}], "destinations": [{"bucket": "b", **destination}]}
    )


@pytest.mark.parametrize(
    ("destination", "named"),
    [
        ({"role_arn": "ferry-writer"}, "destinations[0].role_arn: 'ferry-writer' is not an IAM role ARN"),
        ({"region": "Europe"}, "destinations[0].region: 'Europe' is not a region name"),
        (
            {"endpoint_url": "minio:9000"},
            "destinations[0].endpoint_url: 'minio:9000' must start with https://",
        ),
        (
            {"endpoint_url": "https://m", "credentials_secret": '{"access_key_id": "AKIA"}'},
            "destinations[0].credentials_secret: give the Secrets Manager secret's name or ARN, never the keys",
        ),
        ({"credentials_secret": "ferry/keys"}, "destinations[0].credentials_secret: also give endpoint_url"),
        (
            {"endpoint_url": "https://m", "credentials_secret": "k", "role_arn": ROLE},
            "destinations[0]: give role_arn or credentials_secret, not both",
        ),
        ({"secret": "x"}, "destinations[0]: unknown field(s) secret: use bucket, prefix, owner, role_arn"),
    ],
)
def test_a_wrong_way_in_is_one_sentence_naming_the_field(destination: dict, named: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings(**destination)
    assert str(refused.value).startswith(named), str(refused.value)
    assert "AKIA" not in str(refused.value)


def test_workers_get_each_way_in_and_pick_the_longest_prefix() -> None:
    s = PipelineSettings.from_context(
        {
            "sources": [{"bucket": "a"}],
            "destinations": [
                {"bucket": "b", "role_arn": ROLE, "owner": "444455556666"},
                {"bucket": "b", "prefix": "eu/", "region": "eu-central-1", "role_arn": ROLE},
            ],
        }
    )
    env = {**s.worker_environment(), "FERRY_TABLE": "t", "FERRY_REPORT_BUCKET": "r"}
    worker = WorkerSettings.from_environ(env)
    assert s.role_arns == (ROLE,)
    assert endpoint_for(worker, "destination", "b", "eu/x") == Endpoint(
        region="eu-central-1", role_arn=ROLE, bucket_owners=(("b", "444455556666"),)
    )
    assert endpoint_for(worker, "destination", "b", "us/x").region is None
    assert endpoint_for(worker, "source", "b", "eu/x").role_arn is None  # a destination's way in only
    assert endpoint_for(worker, "source", "a", "k") == Endpoint(bucket_owners=(("b", "444455556666"),))


def test_a_secret_is_read_once_then_again_when_its_hour_is_up(caplog: pytest.LogCaptureFixture) -> None:
    from moto import mock_aws

    clients.forget_credentials()
    caplog.set_level(logging.DEBUG)
    with mock_aws():
        secrets = boto3.client("secretsmanager", region_name="us-east-1")
        secrets.create_secret(
            Name="ferry/keys",
            SecretString=json.dumps({"access_key_id": "AK1", "secret_access_key": "sk-one-123"}),
        )
        caplog.clear()  # the test's own requests (botocore logs their bodies) are not Ferry's
        said = []
        endpoint = Endpoint(endpoint_url="https://store.example.com", credentials_secret="ferry/keys")
        credentials = clients.session_for(endpoint).get_credentials()
        assert credentials.get_frozen_credentials().access_key == "AK1"
        assert clients.session_for(endpoint).get_credentials() is credentials  # cached
        said.append(caplog.text)
        secrets.put_secret_value(
            SecretId="ferry/keys",
            SecretString=json.dumps({"access_key_id": "AK2", "secret_access_key": "sk-two-456"}),
        )
        caplog.clear()
        assert credentials.get_frozen_credentials().access_key == "AK1"  # within the hour
        credentials._expiry_time = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
        assert credentials.get_frozen_credentials().access_key == "AK2"  # rotated keys picked up

        said.append(caplog.text)
        secrets.create_secret(Name="ferry/broken", SecretString="access_key_id=AK3 secret=sk-three-789")
        caplog.clear()
        with pytest.raises(ConfigError) as refused:
            clients.session_for(Endpoint(endpoint_url="https://x", credentials_secret="ferry/broken"))
        assert str(refused.value) == (
            "credentials secret 'ferry/broken' must hold a JSON object with the strings "
            '"access_key_id" and "secret_access_key"'
        )
        said.append(caplog.text)
    clients.forget_credentials()
    assert "GetSecretValue" in "".join(said)  # DEBUG logging was on while Ferry read them
    for value in ("sk-one-123", "sk-two-456", "sk-three-789"):
        assert value not in "".join(said)
