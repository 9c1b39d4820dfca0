"""The stack for locations reached through roles, secrets and other regions: exact grants.

A stack of its own (TEST_CONTEXT of cdk_support plus roles, a credentials secret and its key),
so the main template tests keep their exact expectations.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from cdk_support import ACCOUNT, REGION, TEST_CONTEXT, as_list, load_app_module, resources, statements

SOURCE_ROLE = "arn:aws:iam::444455556666:role/ferry-source-reader"
DEST_ROLE = "arn:aws:iam::777788889999:role/ferry-destination-writer"
SECRET_NAME = "ferry/minio-keys"
SECRET_ARN = "arn:aws:secretsmanager:eu-central-1:123456789012:secret:other-keys-AbCdEf"
SECRET_KEY = "arn:aws:kms:us-east-1:123456789012:key/secret-key"
CONTEXT: dict[str, Any] = {
    **TEST_CONTEXT,
    "sources": [
        *TEST_CONTEXT["sources"],
        {"bucket": "x-account-src", "prefix": "in/", "owner": "444455556666", "role_arn": SOURCE_ROLE},
        {
            "bucket": "minio-src",
            "endpoint_url": "https://minio.example.com",
            "credentials_secret": SECRET_ARN,
        },
    ],
    "destinations": [
        *TEST_CONTEXT["destinations"],
        {
            "bucket": "x-account-dst",
            "owner": "777788889999",
            "region": "eu-west-1",
            "role_arn": DEST_ROLE,
        },
        {"bucket": "store", "endpoint_url": "https://s3.example.net", "credentials_secret": SECRET_NAME},
    ],
    "secret_kms_key_arns": [SECRET_KEY],
}
COPIERS = ("CopyBatchRole", "CopyTaskRole", "PrepareRole")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    tmp = tmp_path_factory.mktemp("cdk-reach")
    app = cdk.App(outdir=str(tmp / "cdk.out"), context={"ferry": CONTEXT, "aws:cdk:bundling-stacks": []})
    stack = load_app_module().build(app)
    template = Template.from_stack(stack).to_json()  # synthesizes: cdk-nag errors fail here
    return SimpleNamespace(app=app, stack=stack, template=template)


def grants(template: dict[str, Any], prefix: str) -> dict[str, set[str]]:
    """action -> resources, over every statement of the roles whose logical id starts so."""
    found: dict[str, set[str]] = {}
    for lid, st in statements(template):
        if lid.startswith(prefix):
            for action in as_list(st["Action"]):
                found.setdefault(action, set()).update(as_list(st["Resource"]))
    return found


def test_workers_may_assume_exactly_the_configured_roles(built: SimpleNamespace) -> None:
    for role in COPIERS:
        assert grants(built.template, role)["sts:AssumeRole"] == {SOURCE_ROLE, DEST_ROLE}, role
    for role in ("RecordFailureRole", "StateMachineRole"):
        assert "sts:AssumeRole" not in grants(built.template, role), role
    # Finalize aborts its job's abandoned uploads where the workers wrote them: destinations only.
    assert grants(built.template, "FinalizeRole")["sts:AssumeRole"] == {DEST_ROLE}


def test_workers_read_exactly_the_configured_secrets(built: SimpleNamespace) -> None:
    by_name = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{SECRET_NAME}-??????"
    for role in COPIERS:
        g = grants(built.template, role)
        assert g["secretsmanager:GetSecretValue"] == {by_name, SECRET_ARN}, role
        assert not any(a.startswith("secretsmanager:") for a in set(g) - {"secretsmanager:GetSecretValue"})
    decrypts = [
        st
        for lid, st in statements(built.template)
        if lid.startswith("CopyBatchRole") and SECRET_KEY in as_list(st["Resource"])
    ]
    assert [as_list(st["Action"]) for st in decrypts] == [["kms:Decrypt"]]
    # Secrets Manager decrypts a secret in the secret's own region: the name is read in the
    # stack's, the ARN in eu-central-1 (kms:ViaService is secretsmanager.<region>.amazonaws.com).
    (values,) = decrypts[0]["Condition"]["StringEquals"].values()
    assert list(decrypts[0]["Condition"]["StringEquals"]) == ["kms:ViaService"]
    assert set(as_list(values)) == {
        f"secretsmanager.{REGION}.amazonaws.com",
        "secretsmanager.eu-central-1.amazonaws.com",
    }
    for role in ("RecordFailureRole", "StateMachineRole"):
        assert not any(a.startswith("secretsmanager:") for a in grants(built.template, role)), role
    finalize = grants(built.template, "FinalizeRole")
    assert finalize["secretsmanager:GetSecretValue"] == {by_name}, "the destination's secret only"


def test_kms_grants_stay_exact_with_the_secret_key(built: SimpleNamespace) -> None:
    allowed = {
        *TEST_CONTEXT["source_kms_key_arns"],
        *TEST_CONTEXT["destination_kms_key_arns"],
        *TEST_CONTEXT["manifest_kms_key_arns"],
        SECRET_KEY,
    }
    for lid, st in statements(built.template):
        if any(a.startswith("kms:") for a in as_list(st["Action"])):
            assert set(as_list(st["Resource"])) <= allowed, lid


def test_workers_learn_how_to_reach_each_location_but_never_a_key(built: SimpleNamespace) -> None:
    for lid, function in resources(built.template, "AWS::Lambda::Function").items():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if "FERRY_LOCATIONS" not in variables:
            continue
        locations = json.loads(variables["FERRY_LOCATIONS"])
        assert {(loc["side"], loc["bucket"]) for loc in locations} == {
            ("source", "x-account-src"),
            ("source", "minio-src"),
            ("destination", "x-account-dst"),
            ("destination", "store"),
        }, lid
        assert {loc.get("credentials_secret") for loc in locations} == {None, SECRET_NAME, SECRET_ARN}
        for loc in locations:
            assert set(loc) <= {
                "side",
                "bucket",
                "prefix",
                "role_arn",
                "region",
                "endpoint_url",
                "credentials_secret",
            }


def test_nag_stays_clean(built: SimpleNamespace) -> None:
    from cdk_nag import AwsSolutionsChecks

    report = AwsSolutionsChecks().validate_scope(built.app)
    assert [
        (v.rule_name, [r.construct_path for r in v.violating_resources])
        for v in report.violations
        if v.severity == "error"
    ] == []
