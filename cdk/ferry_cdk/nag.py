"""cdk-nag (AwsSolutions) findings that are acknowledged, each with the reason it stands.

cdk-nag 3 reports through CDK's policy validation: an unacknowledged error fails `cdk synth`
(`validation-report.json` in the cloud assembly lists it). Acknowledgments are written into
the template's Metadata (`cdk_nag.rules_to_suppress`) so that a reviewer sees them there.

Wildcard findings (AwsSolutions-IAM5) are acknowledged one by one, and only when the
wildcard is one this stack means: a configured bucket prefix, a prefix of Ferry's own report
bucket, this state machine's child executions, this cluster's tasks, or `*` for actions that
take no resource. Any other wildcard stays an error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Protocol

import aws_cdk as cdk
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import IConstruct

from ferry.models import DEFAULT_MARKS_PREFIX
from ferry.pipeline.settings import PipelineSettings

from .access import iam_escape


class FerryStack(Protocol):
    """What the acknowledgments read of the stack. A protocol rather than the stack class, so
    that this module sits below `stack.py` (which calls `acknowledge`) and imports nothing
    above it."""

    settings: PipelineSettings
    report_bucket: s3.Bucket
    functions: dict[str, lambda_.Function]
    cluster: ecs.Cluster
    task_definition: ecs.FargateTaskDefinition
    state_machine_name: str
    task_arn_pattern: str
    map_run_arn_pattern: str
    node: Any

    def resolve(self, obj: Any) -> Any: ...


# Actions that support no resource-level permissions (the Service Authorization Reference
# lists no resource type for them): `Resource: "*"` is the only way to grant them.
UNSCOPABLE_ACTIONS = {
    "xray:PutTraceSegments": "X-Ray tracing",
    "xray:PutTelemetryRecords": "X-Ray tracing",
    "xray:GetSamplingRules": "X-Ray tracing",
    "xray:GetSamplingTargets": "X-Ray tracing",
    "logs:CreateLogDelivery": "Step Functions log delivery to CloudWatch Logs",
    "logs:GetLogDelivery": "Step Functions log delivery to CloudWatch Logs",
    "logs:UpdateLogDelivery": "Step Functions log delivery to CloudWatch Logs",
    "logs:DeleteLogDelivery": "Step Functions log delivery to CloudWatch Logs",
    "logs:ListLogDeliveries": "Step Functions log delivery to CloudWatch Logs",
    "logs:PutResourcePolicy": "Step Functions log delivery to CloudWatch Logs",
    "logs:DescribeResourcePolicies": "Step Functions log delivery to CloudWatch Logs",
    "logs:DescribeLogGroups": "Step Functions log delivery to CloudWatch Logs",
    "ecr:GetAuthorizationToken": "pulling the task image from ECR (the login token is account-wide)",
    "lambda:GetAccountSettings": "Prepare reading the account's Lambda concurrency quota",
}


def acknowledge(stack: FerryStack) -> None:
    s = stack.settings
    ack(
        stack.report_bucket,
        "AwsSolutions-S1",
        "The report bucket holds only Ferry's own job reports, written and read by the pipeline's "
        "roles; access logging would need a second bucket that itself has no access log. Enable "
        "CloudTrail S3 data events on it where an audit trail of reads is required.",
    )
    for name, function in stack.functions.items():
        ack(
            function,
            "AwsSolutions-L1",
            f"The {name} function runs the lambda_runtime setting ({s.lambda_runtime}), one of the "
            "Python versions the dependency layer and the Fargate image are built and tested for; "
            "a newer runtime is taken by changing that one setting once the pinned wheels support it.",
        )
    ack(
        stack.cluster,
        "AwsSolutions-ECS4",
        "The cluster only runs short-lived copy tasks started by the state machine; their progress "
        "and outcome are in the job ledger, the task logs and the execution history. Container "
        "Insights would add a standing monthly metrics charge to an otherwise idle pipeline.",
    )
    ack(
        stack.task_definition,
        "AwsSolutions-ECS2",
        "The environment holds no secret: the ledger table and report bucket names and the "
        "batch limits from the CDK settings (the same values the Lambda workers get). AWS "
        "credentials come from the task role.",
    )
    _acknowledge_wildcards(stack)


def ack(construct: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge `rule` on the construct's CloudFormation resource itself (not on its
    children: an acknowledgment covers everything below where it is made)."""
    construct = construct.node.default_child or construct
    cdk.Validations.of(construct).acknowledge(cdk.Acknowledgment(id=rule, reason=reason))


def _acknowledge_wildcards(stack: FerryStack) -> None:
    s = stack.settings
    known = {}  # flattened resource -> reason
    for kind, locations in (
        ("source", s.sources),
        ("destination", s.destinations),
        ("manifest", s.manifests),
    ):
        for loc in locations:
            arn = f"arn:<AWS::Partition>:s3:::{loc.bucket}/{iam_escape(loc.prefix)}*"
            known[_flat_sub(arn)] = (
                f"Objects under the configured {kind} location s3://{loc.bucket}/{loc.prefix} (setting "
                f"'{kind}s'): a key-prefix ARN is how IAM limits object actions to that prefix, and only "
                "the object actions this role's code calls are granted on it."
            )
    for loc in s.destinations:
        arn = f"arn:<AWS::Partition>:s3:::{loc.bucket}/{iam_escape(DEFAULT_MARKS_PREFIX)}*"
        known[_flat_sub(arn)] = (
            f"Ferry's upload marks in destination bucket {loc.bucket} (prefix {DEFAULT_MARKS_PREFIX}): one "
            "small object per open multipart upload, named by hashes of the key and the upload id at run "
            "time, so a copy killed mid-way can be resumed; only Put/Get/DeleteObject are granted on it."
        )
    reports = _flatten(stack.resolve(f"{stack.report_bucket.bucket_arn}/jobs/*"))
    known[reports] = (
        "Job reports under jobs/ in Ferry's own report bucket: one object per batch and per job, "
        "named at run time, so the grant is the jobs/ prefix of this bucket only."
    )
    machine = stack.state_machine_name
    known[f"arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:{machine}/*"] = (
        f"The Distributed Maps' child executions of this state machine ({machine}), a job's batches "
        "and each batch's large objects: Step Functions names them per Map Run at run time, so they "
        "can only be named by this machine's prefix."
    )
    known[_flatten(stack.resolve(stack.map_run_arn_pattern))] = (
        f"This state machine's Map Runs ({machine}): Finalize reads how many items a Map Run read "
        "(DescribeMapRun) to check the job's counts; Map Run ids are generated at run time."
    )
    known[f"arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:{machine}:*"] = (
        f"The executions of this state machine ({machine}): when a job's Map failed, Finalize lists "
        "its execution's Map Runs (ListMapRuns) to find their result files; execution names are "
        "chosen at run time (job ids, schedule fires, event batches)."
    )
    tasks = _flatten(stack.resolve(stack.task_arn_pattern))
    known[tasks] = (
        "The copy tasks the state machine starts in Ferry's own cluster (ecs:runTask.sync stops and "
        "describes them): task IDs are generated at run time, the cluster is fixed."
    )
    for policy, document in _policies(stack):
        findings: dict[str, list[set[str]]] = {}
        for st in document.get("Statement", []):
            if st.get("Effect") != "Allow":
                continue
            actions = set(_as_list(st.get("Action")))
            for resource in _as_list(st.get("Resource")):
                flat = _flatten(resource)
                if "*" in flat:
                    findings.setdefault(flat, []).append(actions)
        for flat, action_sets in findings.items():
            reason = known.get(flat)
            if flat == "*":
                actions = set().union(*action_sets)
                if actions <= UNSCOPABLE_ACTIONS.keys():
                    uses = sorted({UNSCOPABLE_ACTIONS[a] for a in actions})
                    reason = (
                        f"{', '.join(sorted(actions))} ({'; '.join(uses)}) support no resource-level "
                        "permissions: IAM accepts only Resource '*' for them, and they touch no data."
                    )
            if reason:
                ack(policy, f"AwsSolutions-IAM5[Resource::{flat}]", reason)


def _policies(stack: FerryStack) -> Iterator[tuple[IConstruct, dict[str, Any]]]:
    for construct in stack.node.find_all():
        if cdk.CfnResource.is_cfn_resource(construct) and construct.cfn_resource_type == "AWS::IAM::Policy":
            yield construct, stack.resolve(construct.policy_document)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def _flatten(node: Any) -> str:
    """A CloudFormation value as cdk-nag names it in a finding (its flattenCfnReference)."""
    if isinstance(node, str):
        return _flat_sub(node)
    if isinstance(node, dict):
        if "Fn::Join" in node:
            delimiter, items = node["Fn::Join"]
            return delimiter.join(_flatten(i) for i in items)
        if "Fn::Sub" in node:
            return _flatten(node["Fn::Sub"])
        if "Fn::GetAtt" in node:
            resource, attribute = node["Fn::GetAtt"]
            return f"<{_flatten(resource)}.{_flatten(attribute)}>"
        if "Fn::ImportValue" in node:
            return _flatten(node["Fn::ImportValue"])
        if "Ref" in node:
            return f"<{_flatten(node['Ref'])}>"
    return json.dumps(node, separators=(",", ":"))


def _flat_sub(text: str) -> str:
    return text.replace("${", "<").replace("}", ">")
