"""Names the stack derives from its own name fit their services' limits at CloudFormation's
longest stack name (128 characters), with every kind of resource the app can make (functions,
roles, the state machine and its log group, replications' queues and rules, schedules,
alarms, the dashboard). Resources the template leaves unnamed are named by CloudFormation,
which trims its generated names to each service's limit.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cdk_support import TEST_CONTEXT, load_app_module, plain, resources, statements
from test_cdk_replication_deletes import CONTEXT as REPLICATION_CONTEXT
from test_cdk_schedules_monitoring import SCHEDULES, TOPIC_ARN

from ferry.errors import ConfigError
from ferry_cdk.stack import MAX_STATE_MACHINE_NAME, jobs_machine_name

MAX_STACK_NAME = 128  # CloudFormation: a stack name is at most 128 characters, a letter first
STACK = ("Ferry-Long-" + "Abcdefghij" * 13)[:MAX_STACK_NAME]

# The longest name each service takes, per resource type and name property (each service's
# API reference): a name the template sets must fit, or the deploy fails.
NAME_LIMITS: dict[tuple[str, str], int] = {
    ("AWS::StepFunctions::StateMachine", "StateMachineName"): 80,
    ("AWS::Logs::LogGroup", "LogGroupName"): 512,
    ("AWS::Lambda::Function", "FunctionName"): 64,
    ("AWS::IAM::Role", "RoleName"): 64,
    ("AWS::SQS::Queue", "QueueName"): 80,
    ("AWS::CloudWatch::Alarm", "AlarmName"): 255,
    ("AWS::Events::Rule", "Name"): 64,
    ("AWS::DynamoDB::Table", "TableName"): 255,
    ("AWS::S3::Bucket", "BucketName"): 63,
    ("AWS::CloudWatch::Dashboard", "DashboardName"): 255,
    ("AWS::Scheduler::Schedule", "Name"): 64,
    ("AWS::Scheduler::ScheduleGroup", "Name"): 64,
    ("AWS::ECS::Cluster", "ClusterName"): 255,
    ("AWS::ECS::TaskDefinition", "Family"): 255,
    ("AWS::SNS::Topic", "TopicName"): 256,
    ("AWS::IAM::Policy", "PolicyName"): 128,
    ("AWS::IAM::ManagedPolicy", "ManagedPolicyName"): 128,
    ("AWS::Lambda::LayerVersion", "LayerName"): 140,
}
MAX_TAG_VALUE = 256


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    context = {
        **REPLICATION_CONTEXT,
        "schedules": SCHEDULES,
        "alarm_email": "ops@example.com",
        "alarm_topic_arn": TOPIC_ARN,
    }
    tmp = tmp_path_factory.mktemp("cdk-names")
    app = cdk.App(
        outdir=str(tmp / "cdk.out"),
        context={
            "ferry": context,
            "ferry:stackName": STACK,
            "aws:cdk:bundling-stacks": [],
            "aws:cdk:enable-path-metadata": True,
        },
    )
    stack = load_app_module().build(app)
    template = Template.from_stack(stack).to_json()  # synthesizes: cdk-nag errors would fail here
    return SimpleNamespace(stack=stack, template=template)


def derived_names(template: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(logical id, type, property, value) of every top-level property holding the stack's
    name, or the head of it (a name shortened to fit), as written or lowercased (S3)."""
    head = STACK[:20].lower()
    found = []
    for lid, resource in template["Resources"].items():
        for prop, value in (resource.get("Properties") or {}).items():
            text = plain(value, template)
            if isinstance(text, str) and head in text.lower():
                found.append((lid, resource["Type"], prop, text))
    return found


def test_the_stack_name_is_the_longest_cloudformation_takes() -> None:
    assert len(STACK) == MAX_STACK_NAME and STACK[0].isalpha()


def test_every_name_derived_from_a_128_character_stack_name_fits_its_service(built: SimpleNamespace) -> None:
    found = derived_names(built.template)
    assert {(kind, prop) for _, kind, prop, _ in found} >= {
        ("AWS::StepFunctions::StateMachine", "StateMachineName"),
        ("AWS::Logs::LogGroup", "LogGroupName"),
        ("AWS::CloudWatch::Dashboard", "DashboardName"),
    }
    too_long = []
    for lid, kind, prop, value in found:
        assert (kind, prop) in NAME_LIMITS, (
            f"{lid}: {kind}.{prop} is derived from the stack name, no limit known"
        )
        if len(value) > NAME_LIMITS[(kind, prop)]:
            too_long.append(f"{lid} {kind}.{prop}: {len(value)} > {NAME_LIMITS[(kind, prop)]}: {value}")
    assert too_long == []


def test_tags_holding_the_stack_name_fit(built: SimpleNamespace) -> None:
    for lid, resource in built.template["Resources"].items():
        for tag in (resource.get("Properties") or {}).get("Tags") or []:
            if isinstance(tag, dict) and isinstance(tag.get("Value"), str):
                assert len(tag["Value"]) <= MAX_TAG_VALUE, (lid, tag)


def test_the_state_machine_its_logs_and_its_grants_share_one_name(built: SimpleNamespace) -> None:
    template = built.template
    ((_, machine),) = resources(template, "AWS::StepFunctions::StateMachine").items()
    name = machine["Properties"]["StateMachineName"]
    assert name == built.stack.state_machine_name and name.endswith("-jobs") and len(name) <= 80
    assert name.startswith(STACK[:40])  # still found by the stack's name in the console
    logs = [
        plain(g["Properties"].get("LogGroupName"), template)
        for g in resources(template, "AWS::Logs::LogGroup").values()
    ]
    assert f"/aws/vendedlogs/states/{name}" in logs
    granted = json.dumps([plain(st, template) for _, st in statements(template)])
    assert f":execution:{name}:*" in granted and f":execution:{name}/*" in granted
    assert f":stateMachine:{STACK}-jobs" not in granted


def test_the_cli_finds_the_state_machine_by_the_stacks_output(built: SimpleNamespace) -> None:
    outputs = built.template["Outputs"]
    assert outputs["StateMachineArn"]["Value"] == {
        "Ref": next(iter(resources(built.template, "AWS::StepFunctions::StateMachine")))
    }


def test_a_stack_name_over_128_characters_is_refused_at_synth_with_the_fix(tmp_path: Path) -> None:
    import aws_cdk as cdk

    app = cdk.App(
        outdir=str(tmp_path),
        context={"ferry": TEST_CONTEXT, "ferry:stackName": STACK + "x", "aws:cdk:bundling-stacks": []},
    )
    with pytest.raises(ConfigError, match="ferry:stackName: 129 characters, over CloudFormation's 128"):
        load_app_module().build(app)


def test_a_machine_name_is_the_stacks_until_it_would_pass_80_characters() -> None:
    room = MAX_STATE_MACHINE_NAME - len("-jobs")
    assert jobs_machine_name("F" * room) == "F" * room + "-jobs"
    longer = [
        jobs_machine_name("F" * (room + 1)),
        jobs_machine_name(STACK),
        jobs_machine_name(STACK[:-1] + "z"),
    ]
    assert [len(name) for name in longer] == [MAX_STATE_MACHINE_NAME] * 3
    assert len(set(longer)) == 3, "stack names sharing their head still name different machines"
