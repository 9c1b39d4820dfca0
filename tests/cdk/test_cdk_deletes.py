"""What a replication with deletes on adds to a stack (cdk/ferry_cdk/deletes.py), on a minimal
stack: a rule that also matches "Object Deleted", and a role that may delete only under the
destination prefix (never a version), read the source for the proofs, and list only inside
the configured prefixes. With deletes off: nothing. cfn-lint finds no error in the template."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template
from cdk_support import statements

from ferry.pipeline.locations import Location
from ferry.pipeline.replication.deletes import Route
from ferry_cdk.deletes import deleted_detail_types, deletes_statements

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/ferry-ledger"


def build(deletes: bool) -> dict[str, Any]:
    replication = Route(
        "photo-sync", Location("src-bucket", "in/"), Location("dst-bucket", "odd*/"), deletes=deletes
    )
    stack = cdk.Stack(cdk.App(), "Minimal")
    role = iam.Role(stack, "Starter", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    for statement in deletes_statements(replication, table_arn=TABLE):
        role.add_to_policy(statement)
    role.add_to_policy(
        iam.PolicyStatement(actions=["s3:GetObject"], resources=["arn:aws:s3:::src-bucket/in/*"])
    )
    events.Rule(
        stack,
        "Objects",
        event_pattern=events.EventPattern(
            source=["aws.s3"],
            detail_type=["Object Created", *deleted_detail_types(replication)],
            detail={"bucket": {"name": ["src-bucket"]}, "object": {"key": [{"prefix": "in/"}]}},
        ),
    )
    return Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def test_with_deletes_on_the_rule_matches_object_deleted() -> None:
    (rule,) = [r for r in build(True)["Resources"].values() if r["Type"] == "AWS::Events::Rule"]
    assert rule["Properties"]["EventPattern"]["detail-type"] == ["Object Created", "Object Deleted"]


def test_with_deletes_off_nothing_is_added() -> None:
    template = build(False)
    (rule,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::Events::Rule"]
    assert rule["Properties"]["EventPattern"]["detail-type"] == ["Object Created"]
    actions = {a for _, s in statements(template) for a in _list(s["Action"])}
    assert actions == {"s3:GetObject"}


def test_deletes_may_delete_only_under_the_destination_prefix_and_never_a_version() -> None:
    found = {s["Sid"]: s for _, s in statements(build(True)) if "Sid" in s}
    assert found["DeletesPhotoSyncDestination"]["Action"] == ["s3:DeleteObject", "s3:GetObject"]
    assert found["DeletesPhotoSyncDestination"]["Resource"] == "arn:aws:s3:::dst-bucket/odd${*}/*"
    assert found["DeletesPhotoSyncSource"]["Action"] == ["s3:GetObject", "s3:GetObjectVersion"]
    assert found["DeletesPhotoSyncSource"]["Resource"] == "arn:aws:s3:::src-bucket/in/*"
    assert found["DeletesPhotoSyncRecords"] == {
        "Sid": "DeletesPhotoSyncRecords",
        "Effect": "Allow",
        "Action": ["dynamodb:GetItem", "dynamodb:DeleteItem"],
        "Resource": TABLE,
    }
    assert found["DeletesPhotoSyncListSource"]["Condition"] == {"StringLike": {"s3:prefix": ["in/*"]}}
    assert found["DeletesPhotoSyncListDestination"]["Condition"] == {
        "StringLike": {"s3:prefix": ["odd${*}/*"]}
    }
    every = [a for s in found.values() for a in _list(s["Action"])]
    assert "s3:DeleteObjectVersion" not in every and not any(a.endswith("*") for a in every)
    deleting = [s for s in found.values() if "s3:DeleteObject" in _list(s["Action"])]
    assert [s["Resource"] for s in deleting] == ["arn:aws:s3:::dst-bucket/odd${*}/*"]


@pytest.mark.parametrize("deletes", [True, False])
def test_cfn_lint_finds_no_error(deletes: bool, tmp_path: Path) -> None:
    template = tmp_path / "minimal.json"
    template.write_text(json.dumps(build(deletes)))
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    done = subprocess.run([str(cfn_lint), "--format", "json", str(template)], capture_output=True, text=True)
    errors = [f for f in json.loads(done.stdout or "[]") if f["Level"] == "Error"]
    assert errors == [], json.dumps(errors, indent=1)


def _list(value: Any) -> list[str]:
    return value if isinstance(value, list) else [value]
