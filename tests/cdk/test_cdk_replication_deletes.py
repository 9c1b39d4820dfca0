"""A replication with deletes on, reached through a role (source) and an S3-compatible endpoint
with a credentials secret (destination): its rule also matches "Object Deleted", its starter
may delete under the destination prefix only (never a version), read and forget copy records
on the ledger table, assume the source's role and read the destination's secret, and knows
the table and both locations whole. A replication with deletes off gets none of it. cdk-nag
(acknowledged prefix wildcards) and cfn-lint stay clean."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cdk_support import TEST_CONTEXT, as_list, load_app_module, plain, resources, statements

ROLE = "arn:aws:iam::444455556666:role/ferry-source-reader"
SECRET = "ferry/store-keys"
SECRET_KEY = "arn:aws:kms:us-east-1:123456789012:key/secret-key"
CONTEXT = {
    **TEST_CONTEXT,
    "sources": [
        *TEST_CONTEXT["sources"],
        {"bucket": "x-account-src", "prefix": "in/", "owner": "444455556666", "role_arn": ROLE},
    ],
    "destinations": [
        *TEST_CONTEXT["destinations"],
        {
            "bucket": "store",
            "prefix": "copies/",
            "endpoint_url": "https://s3.example.net",
            "credentials_secret": SECRET,
        },
    ],
    "secret_kms_key_arns": [SECRET_KEY],
    "replications": [
        {
            "name": "photo-sync",
            "source": {"bucket": "x-account-src", "prefix": "in/photos/"},
            "destination": {"bucket": "store", "prefix": "copies/photos/"},
            "deletes": True,
        },
        {
            "name": "plain",
            "source": {"bucket": "src-bucket", "prefix": "data/plain/"},
            "destination": {"bucket": "dst-bucket", "prefix": "backup/plain/"},
        },
    ],
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    tmp = tmp_path_factory.mktemp("cdk-replication-deletes")
    app = cdk.App(
        outdir=str(tmp / "cdk.out"),
        context={"ferry": CONTEXT, "aws:cdk:bundling-stacks": [], "aws:cdk:enable-path-metadata": True},
    )
    stack = load_app_module().build(app)
    template = Template.from_stack(stack)  # an unacknowledged cdk-nag error fails the synth here
    assembly = app.synth()
    return SimpleNamespace(
        template=template.to_json(),
        template_file=Path(assembly.directory) / stack.template_file,
        out=Path(assembly.directory),
    )


def granted(template: dict[str, Any], name: str) -> dict[str, list[Any]]:
    """action -> resources granted to the replication's starter (logs, X-Ray and SQS aside)."""
    found: dict[str, list[Any]] = {}
    for lid, st in statements(template):
        if lid.startswith(f"Replication{name}StarterRoleDefaultPolicy"):
            for action in as_list(st["Action"]):
                if not action.startswith(("sqs:", "xray:", "logs:")):
                    found.setdefault(action, []).extend(as_list(st["Resource"]))
    return found


def starter_environment(template: dict[str, Any], name: str) -> dict[str, Any]:
    (starter,) = [
        r
        for lid, r in resources(template, "AWS::Lambda::Function").items()
        if lid.startswith(f"Replication{name}")
    ]
    return starter["Properties"]["Environment"]["Variables"]


def test_the_rule_matches_object_deleted_only_with_deletes_on(built) -> None:
    types = {
        lid.split("ObjectCreated")[0]: r["Properties"]["EventPattern"]["detail-type"]
        for lid, r in resources(built.template, "AWS::Events::Rule").items()
    }
    assert types == {
        "Replicationphotosync": ["Object Created", "Object Deleted"],
        "Replicationplain": ["Object Created"],
    }


def test_the_starter_may_delete_only_ferrys_copies_and_reach_its_locations(built) -> None:
    data = granted(built.template, "photosync")
    table = next(lid for lid in resources(built.template, "AWS::DynamoDB::Table"))
    assert sorted(data["s3:DeleteObject"]) == ["arn:aws:s3:::store/copies/photos/*"]
    assert "s3:DeleteObjectVersion" not in data  # a versioned destination gets a delete marker
    assert sorted(set(data["s3:GetObject"])) == sorted(
        {"arn:aws:s3:::store/copies/photos/*", "arn:aws:s3:::x-account-src/in/photos/*"}
        | {r for r in data["s3:GetObject"] if r.endswith("/jobs/photo-sync-*/events.jsonl")}
    )
    assert data["s3:GetObjectVersion"] == ["arn:aws:s3:::x-account-src/in/photos/*"]
    assert {
        json.dumps(r, sort_keys=True) for r in data["dynamodb:GetItem"] + data["dynamodb:DeleteItem"]
    } == {json.dumps(plain({"Fn::GetAtt": [table, "Arn"]}, built.template), sort_keys=True)}
    assert data["sts:AssumeRole"] == [ROLE]
    (secret,) = data["secretsmanager:GetSecretValue"]
    assert secret.endswith(f":secret:{SECRET}-??????")
    assert data["kms:Decrypt"] == [SECRET_KEY]
    assert "dynamodb:PutItem" not in data and "s3:PutObject" in data  # records are the copy path's to write


def test_the_starter_knows_the_ledger_table_and_its_locations_whole(built) -> None:
    env = starter_environment(built.template, "photosync")
    table = next(lid for lid in resources(built.template, "AWS::DynamoDB::Table"))
    assert env["FERRY_TABLE"] == {"Ref": table}
    replication = json.loads(env["FERRY_REPLICATION"])
    assert replication["deletes"] is True
    assert replication["source"] == {
        "bucket": "x-account-src",
        "prefix": "in/photos/",
        "owner": "444455556666",
        "role_arn": ROLE,
    }
    assert replication["destination"] == {
        "bucket": "store",
        "prefix": "copies/photos/",
        "endpoint_url": "https://s3.example.net",
        "credentials_secret": SECRET,
    }


def test_with_deletes_off_the_starter_gets_nothing_more(built) -> None:
    # s3:ListBucket (under the source prefix): which key an event names (event_keys), nothing to delete.
    assert set(granted(built.template, "plain")) == {"states:StartExecution", "s3:PutObject", "s3:ListBucket"}
    assert "FERRY_TABLE" not in starter_environment(built.template, "plain")


def test_cdk_nag_and_cfn_lint_are_clean(built) -> None:
    report = (
        json.loads((built.out / "validation-report.json").read_text())
        if (built.out / "validation-report.json").exists()
        else {"pluginReports": []}
    )
    assert [r for r in report["pluginReports"] if r.get("conclusion") != "success"] == []
    policy = next(
        r
        for lid, r in resources(built.template, "AWS::IAM::Policy").items()
        if lid.startswith("ReplicationphotosyncStarterRoleDefaultPolicy")
    )
    acknowledged = [r["id"] for r in policy["Metadata"]["cdk_nag"]["rules_to_suppress"]]
    for arn in ("x-account-src/in/photos/*", "store/copies/photos/*"):
        assert f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{arn}]" in acknowledged
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    done = subprocess.run(
        [str(cfn_lint), "--format", "json", str(built.template_file)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors = [f for f in json.loads(done.stdout or "[]") if f["Level"] == "Error"]
    assert errors == [], json.dumps(errors, indent=1)


def test_every_role_carries_the_stack_tag_that_ferry_policy_names(built) -> None:
    """Other accounts' policies name the stack's roles by this tag (aws:PrincipalTag), not by
    the role names CloudFormation generates (it shortens a long stack name inside them)."""
    from ferry.pipeline.settings import STACK_ROLE_TAG

    roles = resources(built.template, "AWS::IAM::Role")
    assert any(lid.startswith("ReplicationphotosyncStarterRole") for lid in roles)
    for lid, role in roles.items():
        tags = {t["Key"]: t["Value"] for t in role["Properties"].get("Tags", [])}
        assert tags.get(STACK_ROLE_TAG) == "Ferry", lid
