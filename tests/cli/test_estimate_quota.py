"""`ferry estimate` reads the account's Lambda concurrency quota with the user's credentials
(Lambda GetAccountSettings), as Prepare does for each job, and says so; where it cannot, it
assumes the default 1,000 and says why. moto serves GetAccountSettings from the quota it
enforces on reservations (conftest.serve_lambda_account_settings)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import ACCOUNT_SETTINGS_PATH, serve_lambda_account_settings
from ferry.cli.main import main

NUMBERS = ["estimate", "--objects", "1000000", "--avg-size", "500KB"]


@pytest.fixture
def account(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An account whose Lambda concurrency quota is 10, in moto."""
    from moto import mock_aws

    serve_lambda_account_settings(monkeypatch, 10)
    with mock_aws():
        yield


def run(*argv: str) -> tuple[dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    assert main([*NUMBERS, *argv, "--json"], out, err) == 0, err.getvalue()
    text = io.StringIO()
    assert main([*NUMBERS, *argv], text, io.StringIO()) == 0
    return json.loads(out.getvalue()), text.getvalue()


def test_the_estimate_reads_the_accounts_quota(account: None) -> None:
    data, text = run("--region", "eu-west-1")

    assert data["lambda_concurrency"] == {
        "concurrent_executions": 10,
        "unreserved_concurrent_executions": 10,
        "source": "account",
        "max_concurrency": 8,
        "asked": 100,
    }
    assert any("the account's quota in eu-west-1, 10 (10 unreserved)" in n for n in data["assumptions"])
    assert any("max_concurrency 100 lowered to 8" in n for n in data["assumptions"])
    assert "Lambda concurrency (10, the account's quota; 8 for the copies)" in text
    assert "Map Run children at once (max_concurrency 8;" in text


def test_an_account_that_cannot_be_read_gets_the_default_and_a_note(account: None, monkeypatch) -> None:
    from moto.awslambda import urls

    monkeypatch.delitem(urls.url_paths, ACCOUNT_SETTINGS_PATH)  # answered 404, as by moto itself

    data, text = run()

    assert data["lambda_concurrency"]["source"] == "default"
    assert data["lambda_concurrency"]["concurrent_executions"] == 1_000
    assert data["lambda_concurrency"]["max_concurrency"] == 100
    (note,) = [n for n in data["assumptions"] if n.startswith("Lambda concurrency")]
    assert "default quota, 1,000, assumed: the account's could not be read (404" in note
    assert "--lambda-concurrency" in note
    assert "Lambda concurrency (1,000, the account default; 900 for the copies)" in text


def test_a_quota_given_is_not_read(account: None, monkeypatch) -> None:
    from moto.awslambda import urls

    monkeypatch.delitem(urls.url_paths, ACCOUNT_SETTINGS_PATH)

    data, _ = run("--lambda-concurrency", "50")

    assert data["lambda_concurrency"]["source"] == "given"
    assert data["lambda_concurrency"]["max_concurrency"] == 45  # 50 less the 5 left free
    err = io.StringIO()
    assert main([*NUMBERS, "--lambda-concurrency", "0"], io.StringIO(), err) == 1
    assert "--lambda-concurrency 0: must be 1 or more" in err.getvalue()
