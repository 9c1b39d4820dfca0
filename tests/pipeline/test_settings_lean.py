"""`lean_requests` in the `ferry` context turns the lean request path off for the pipeline's
workers, as `ferry copy --no-lean-requests` does for the CLI: the setting reaches the Lambda and
Fargate environments, and the clients the workers make from that environment use botocore."""

from __future__ import annotations

from typing import Any

import pytest

from ferry.errors import ConfigError
from ferry.models import Endpoint
from ferry.pipeline.settings import PipelineSettings
from ferry.s3.clients import make_client
from ferry.s3.lean_s3 import LeanClient, lean_requests_enabled

BASE: dict[str, Any] = {"sources": [{"bucket": "src"}], "destinations": [{"bucket": "dst"}]}


@pytest.mark.parametrize(
    ("setting", "lean"), [({}, True), ({"lean_requests": True}, True), ({"lean_requests": False}, False)]
)
def test_the_setting_reaches_every_worker(setting: dict[str, Any], lean: bool) -> None:
    settings = PipelineSettings.from_context({**BASE, **setting})
    for environment in (settings.worker_environment(), settings.worker_environment(fargate=True)):
        assert lean_requests_enabled(environment) is lean


def test_a_worker_without_the_lean_path_sends_through_botocore(monkeypatch: pytest.MonkeyPatch) -> None:
    environment = PipelineSettings.from_context({**BASE, "lean_requests": False}).worker_environment()
    monkeypatch.setenv("FERRY_LEAN_REQUESTS", environment["FERRY_LEAN_REQUESTS"])
    off = make_client(Endpoint(endpoint_url="http://127.0.0.1:9", region="us-east-1"))
    monkeypatch.setenv("FERRY_LEAN_REQUESTS", "1")
    on = make_client(Endpoint(endpoint_url="http://127.0.0.1:9", region="us-east-1"))
    assert isinstance(on, LeanClient)
    assert not isinstance(off, LeanClient)


@pytest.mark.parametrize("value", ["false", 0, "no"])
def test_a_setting_that_is_not_true_or_false_is_refused(value: Any) -> None:
    with pytest.raises(ConfigError, match="lean_requests: must be true or false"):
        PipelineSettings.from_context({**BASE, "lean_requests": value})
