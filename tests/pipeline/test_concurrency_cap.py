"""Prepare lowers the Distributed Maps' MaxConcurrency (`$.job.limits.max_concurrency`) to what
the account's Lambda concurrency allows, so that the copy children cannot take every slot.

New accounts get a reduced concurrency quota (the Lambda quotas page: it can be 10) where the
max_concurrency setting defaults to 100. The account's numbers come from Lambda
GetAccountSettings, served by moto from the quota it enforces on reservations
(conftest.serve_lambda_account_settings), so a reservation moto accepts is counted as Lambda
counts it."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import boto3
import pytest

from conftest import ACCOUNT_SETTINGS_PATH, FakeLambdaContext
from ferry.quotas.lambda_concurrency import (
    AccountConcurrency,
    cap_max_concurrency,
    headroom,
    reservations_refused,
)
from handlers import prepare

SPEC = {"source": {"bucket": "src", "prefix": "in/"}, "destination": {"bucket": "dst"}}


def prepared(pipeline: Any, job_id: str = "job-1") -> dict[str, Any]:
    pipeline.s3.put_object(Bucket="src", Key="in/a.txt", Body=b"a")  # an empty source is refused
    job = prepare.handler({"spec": SPEC, "execution_name": job_id}, FakeLambdaContext())
    assert "rejected" not in job, job
    return job


def make_function(name: str) -> str:
    iam = boto3.client("iam", region_name="us-east-1")
    try:
        role = iam.create_role(RoleName="cap-test", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    except iam.exceptions.EntityAlreadyExistsException:
        role = iam.get_role(RoleName="cap-test")["Role"]["Arn"]
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("handler.py", "def handler(event, context):\n    return event\n")
    return boto3.client("lambda", region_name="us-east-1").create_function(
        FunctionName=name,
        Runtime="python3.13",
        Role=role,
        Handler="handler.handler",
        Code={"ZipFile": archive.getvalue()},
    )["FunctionArn"]


def test_an_account_of_ten_lambdas_gets_eight_children_and_the_job_says_why(pipeline) -> None:
    pipeline.lambda_quota(10)
    assert pipeline.settings.max_concurrency == 100

    job = prepared(pipeline)

    assert job["limits"]["max_concurrency"] == 8  # 10 less 2 left for RecordFailure, Finalize, others
    concurrency = job["concurrency"]
    assert (concurrency["asked"], concurrency["max_concurrency"]) == (100, 8)
    assert concurrency["account"] == {"concurrent_executions": 10, "unreserved_concurrent_executions": 10}
    assert "max_concurrency 100 lowered to 8" in concurrency["note"]
    assert "quota is 10 (reduced: the default is 1,000)" in concurrency["note"]
    assert "2 of them are left free" in concurrency["note"]


def test_an_account_of_a_thousand_runs_the_setting_as_it_is(pipeline) -> None:
    pipeline.lambda_quota(1_000)

    job = prepared(pipeline)

    assert job["limits"]["max_concurrency"] == 100
    assert job["concurrency"] == {
        "max_concurrency": 100,
        "asked": 100,
        "account": {"concurrent_executions": 1_000, "unreserved_concurrent_executions": 1_000},
    }


def test_other_functions_reservations_leave_the_copies_less(pipeline) -> None:
    """A reservation elsewhere in the account takes its slots out of the pool the copies share:
    1,000 less 895 reserved leaves 105, of which 11 stay free."""
    pipeline.lambda_quota(1_000)
    make_function("someone-elses")
    boto3.client("lambda", region_name="us-east-1").put_function_concurrency(
        FunctionName="someone-elses", ReservedConcurrentExecutions=895
    )

    job = prepared(pipeline)

    assert job["limits"]["max_concurrency"] == 105 - 11 == 94
    assert "895 of it reserved by functions" in job["concurrency"]["note"]


def test_a_reserved_copy_function_caps_the_children_at_its_reservation(pipeline, monkeypatch) -> None:
    """copy_reserved_concurrency: the copies draw on the CopyBatch function's reservation alone
    (not on the pool others share, which the reservation has already left)."""
    pipeline.lambda_quota(1_000)
    make_function("copy-batch")
    boto3.client("lambda", region_name="us-east-1").put_function_concurrency(
        FunctionName="copy-batch", ReservedConcurrentExecutions=40
    )
    monkeypatch.setenv("FERRY_COPY_RESERVED_CONCURRENCY", "40")
    pipeline.services.cache_clear()

    job = prepared(pipeline)

    assert job["limits"]["max_concurrency"] == 40
    assert job["concurrency"]["account"]["unreserved_concurrent_executions"] == 960
    assert "copy_reserved_concurrency" in job["concurrency"]["note"]


def test_an_account_of_ten_cannot_reserve_and_is_told_why(pipeline) -> None:
    """AWS keeps 100 unreserved: a reservation in an account of 10 is refused (moto enforces
    the rule too), and ferry says what it would take."""
    pipeline.lambda_quota(10)
    make_function("copy-batch")
    awslambda = boto3.client("lambda", region_name="us-east-1")
    with pytest.raises(
        awslambda.exceptions.InvalidParameterValueException, match="minimum value of \\[100\\]"
    ):
        awslambda.put_function_concurrency(FunctionName="copy-batch", ReservedConcurrentExecutions=2)
    said = reservations_refused(2, 10)
    assert said is not None and "at least 102" in said and "this account's is 10" in said
    assert reservations_refused(2, 102) is None


def test_an_account_that_cannot_be_read_keeps_the_setting_and_says_so(pipeline, monkeypatch) -> None:
    """GetAccountSettings refused (moto without it answers 404): the job still runs, at the
    setting, and its record says the cap could not be decided."""
    from moto.awslambda import urls

    monkeypatch.delitem(urls.url_paths, ACCOUNT_SETTINGS_PATH)

    job = prepared(pipeline)

    assert job["limits"]["max_concurrency"] == 100
    assert "could not be read" in job["concurrency"]["note"]
    assert "GetAccountSettings" in job["concurrency"]["note"]


@pytest.mark.parametrize(
    ("limit", "unreserved", "asked", "expected"),
    [
        (10, 10, 100, 8),
        (1_000, 1_000, 100, 100),
        (1_000, 1_000, 5_000, 900),
        (50, 50, 100, 45),
        (3, 3, 100, 1),
        (1, 1, 100, 1),
    ],
)
def test_the_cap_leaves_a_tenth_and_at_least_two_slots(
    limit: int, unreserved: int, asked: int, expected: int
) -> None:
    cap = cap_max_concurrency(asked, AccountConcurrency(limit, unreserved))
    assert cap.max_concurrency == expected
    assert (cap.note is not None) == (expected < asked)
    assert headroom(10) == 2 and headroom(1_000) == 100
