"""What making a side's S3 client costs at a command's start: botocore sessions made, and the
model folders read to find the S3 model (a copy of one object pays all of it)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import botocore.loaders
import botocore.session
import pytest
from botocore.exceptions import UnknownServiceError

from ferry.models import Endpoint
from ferry.s3 import clients


@pytest.fixture
def fresh_loader(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test makes its clients with a loader of its own, as a new process would."""
    clients._loader.cache_clear()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "start-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "start-secret")
    yield
    clients._loader.cache_clear()


def _count_calls(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[Any]:
    calls: list[Any] = []
    original = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_the_first_client_reads_the_s3_model_folders_not_every_services(
    fresh_loader: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = len(botocore.loaders.Loader().list_available_services("service-2"))
    assert services > 300  # what a listing of every service's folder reads
    listed = _count_calls(monkeypatch, os, "listdir")
    clients.make_client(Endpoint(region="us-east-1", endpoint_url="http://127.0.0.1:9"), lean=False)
    assert len(listed) <= 6, f"{len(listed)} folders listed to make one S3 client"


def test_one_session_is_made_per_side_and_none_for_the_loader(
    fresh_loader: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _count_calls(monkeypatch, botocore.session.Session, "__init__")
    clients.make_client(Endpoint(region="us-east-1", endpoint_url="http://127.0.0.1:9"), lean=False)
    clients.make_client(Endpoint(region="eu-west-1", endpoint_url="http://127.0.0.1:9"), lean=False)
    assert len(made) == 2


def test_the_loader_knows_the_services_botocore_knows_and_refuses_others(fresh_loader: None) -> None:
    ours = clients._loader(None)
    theirs = botocore.loaders.Loader()
    known = theirs.list_available_services("service-2")
    for name in known:
        assert name in ours.list_available_services("service-2")
    assert list(ours.list_available_services("service-2")) == known
    assert "no-such-service" not in ours.list_available_services("service-2")
    for beside_the_services in ("endpoints.json", "partitions.json", "_retry.json"):  # files, not folders
        assert beside_the_services not in ours.list_available_services("service-2")
        with pytest.raises(UnknownServiceError):
            ours.load_service_model(beside_the_services, "service-2")
    assert "s3/../s3" not in ours.list_available_services("service-2")
    assert ours.load_service_model("s3", "service-2") == theirs.load_service_model("s3", "service-2")
    with pytest.raises(UnknownServiceError, match="no-such-service.*s3"):
        ours.load_service_model("no-such-service", "service-2")


def test_the_loader_searches_the_configured_data_path_first(
    fresh_loader: None, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AWS_DATA_PATH, as botocore's own loader reads it: a model there wins over the built-in."""
    model = botocore.loaders.Loader().load_service_model("s3", "service-2")
    model["metadata"]["serviceId"] = "S3"
    model["documentation"] = "from the data path"
    folder = tmp_path / "s3" / "2006-03-01"
    folder.mkdir(parents=True)
    (folder / "service-2.json").write_text(json.dumps(model))
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    client = clients.make_client(Endpoint(region="us-east-1", endpoint_url="http://127.0.0.1:9"), lean=False)
    assert client.meta.service_model.documentation == "from the data path"
