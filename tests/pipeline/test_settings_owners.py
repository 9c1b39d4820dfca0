"""Bucket owners and manifest keys in the `ferry` context: validated where cdk.json is read,
handed to the workers in their environment, and applied to their S3 clients."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ferry.errors import ConfigError
from ferry.pipeline.locations import Location
from ferry.pipeline.settings import PipelineSettings, WorkerSettings

BASE: dict[str, Any] = {
    "sources": [{"bucket": "src", "prefix": "data/", "owner": "111122223333"}],
    "destinations": [{"bucket": "dst", "prefix": "copy/"}],
}


def test_an_owner_is_a_12_digit_account_id_per_location() -> None:
    settings = PipelineSettings.from_context(BASE)
    assert settings.sources == (Location("src", "data/", "111122223333"),)
    assert settings.destinations == (Location("dst", "copy/"),)
    assert settings.bucket_owners == {"src": "111122223333"}


@pytest.mark.parametrize(
    "owner", ["12345", "1111-2222-3333", 111122223333, "arn:aws:iam::111122223333:root", ""]
)
def test_a_malformed_owner_is_refused_with_what_to_write(owner: Any) -> None:
    context = {**BASE, "destinations": [{"bucket": "dst", "owner": owner}]}
    with pytest.raises(ConfigError) as caught:
        PipelineSettings.from_context(context)
    assert str(caught.value).startswith("destinations[0].owner:")
    assert "12-digit AWS account id" in str(caught.value)


def test_one_bucket_cannot_have_two_owners() -> None:
    context = {**BASE, "destinations": [{"bucket": "src", "prefix": "copy/", "owner": "999988887777"}]}
    with pytest.raises(ConfigError, match=r"bucket 'src' .* 111122223333 .* 999988887777"):
        PipelineSettings.from_context(context)


def test_a_bucket_listed_twice_takes_its_owner_from_either_location() -> None:
    context = {**BASE, "destinations": [{"bucket": "src", "prefix": "copy/"}]}
    assert PipelineSettings.from_context(context).bucket_owners == {"src": "111122223333"}


def test_workers_read_the_owners_back_from_their_environment() -> None:
    settings = PipelineSettings.from_context(BASE)
    env = {**settings.worker_environment(), "FERRY_TABLE": "t", "FERRY_REPORT_BUCKET": "r"}
    assert json.loads(env["FERRY_BUCKET_OWNERS"]) == {"src": "111122223333"}
    assert WorkerSettings.from_environ(env).bucket_owners == {"src": "111122223333"}


def test_manifest_kms_keys_are_key_arns() -> None:
    settings = PipelineSettings.from_context(
        {**BASE, "manifest_kms_key_arns": ["arn:aws:kms:us-east-1:111122223333:key/k"]}
    )
    assert settings.manifest_kms_key_arns == ("arn:aws:kms:us-east-1:111122223333:key/k",)
    with pytest.raises(ConfigError, match="manifest_kms_key_arns"):
        PipelineSettings.from_context({**BASE, "manifest_kms_key_arns": ["alias/inventory"]})


def test_the_handlers_clients_send_the_owners(pipeline: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Lambda handlers' own S3 client (Prepare's checks) and the copier's endpoints."""
    from handlers import runtime

    monkeypatch.setenv("FERRY_BUCKET_OWNERS", json.dumps({"src": "111122223333"}))
    runtime.services.cache_clear()
    try:
        services = runtime.services()
        sent: list[dict[str, Any]] = []
        services.s3.meta.events.register("before-call.s3", lambda params, **_: sent.append(params))
        services.s3.list_objects_v2(Bucket="src", Prefix="data/")
        assert sent[-1]["headers"]["x-amz-expected-bucket-owner"] == "111122223333"
        assert (
            dict(services.source.bucket_owners)
            == dict(services.destination.bucket_owners)
            == {"src": "111122223333"}
        )
    finally:
        runtime.services.cache_clear()
