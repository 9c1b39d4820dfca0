"""IAM for the locations the workers reach other than as themselves (ferry.pipeline.reach):
`sts:AssumeRole` on exactly the configured roles, `secretsmanager:GetSecretValue` on exactly
the configured credential secrets, and `kms:Decrypt` on the keys that encrypt those secrets.

Secrets Manager decrypts a secret with its KMS key in the secret's own region, so the
`kms:ViaService` condition names `secretsmanager.<region>.amazonaws.com` for each region a
configured secret is read in: a name in the stack's region, an ARN in the region it names
(where the workers read it, ferry.s3.clients.secret_region).

A secret given by name is granted as `...:secret:NAME-??????`: Secrets Manager appends a
hyphen and six random characters to every secret's ARN, and its documentation recommends
this pattern ("Finding a secret from a partial ARN", Secrets Manager user guide); `?` matches
exactly one character, so `photos` does not also grant `photos-old-abc123`. A secret given by
its full ARN is granted as written.
"""

from __future__ import annotations

from collections.abc import Iterable

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

from ferry.pipeline.locations import Location
from ferry.pipeline.settings import PipelineSettings


def secret_arn(stack: cdk.Stack, secret: str) -> str:
    if secret.startswith("arn:"):
        return secret
    return stack.format_arn(
        service="secretsmanager",
        resource="secret",
        resource_name=f"{secret}-??????",
        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
    )


def secret_region(stack: cdk.Stack, secret: str) -> str:
    """The region a secret is read in: the one its ARN names, else the stack's (the workers
    run there)."""
    parts = secret.split(":")
    if secret.startswith("arn:") and len(parts) > 3 and parts[3]:
        return parts[3]
    return stack.region


def reach_statements(stack: cdk.Stack, settings: PipelineSettings) -> list[iam.PolicyStatement]:
    """What a worker that copies or checks (CopyBatch, the Fargate task, Prepare) needs to
    reach the configured locations: nothing when every location is reached directly."""
    return location_reach_statements(stack, (*settings.sources, *settings.destinations), settings)


def location_reach_statements(
    stack: cdk.Stack, locations: Iterable[Location], settings: PipelineSettings
) -> list[iam.PolicyStatement]:
    """The same grants for `locations` only (a replication starter reaches its own two)."""
    locations = tuple(locations)
    role_arns = sorted({loc.role_arn for loc in locations if loc.role_arn})
    secrets = sorted({loc.credentials_secret for loc in locations if loc.credentials_secret})
    statements = []
    if role_arns:
        statements.append(
            iam.PolicyStatement(sid="AssumeLocationRoles", actions=["sts:AssumeRole"], resources=role_arns)
        )
    if secrets:
        statements.append(
            iam.PolicyStatement(
                sid="ReadEndpointCredentials",
                actions=["secretsmanager:GetSecretValue"],
                resources=[secret_arn(stack, s) for s in secrets],
            )
        )
    if secrets and settings.secret_kms_key_arns:
        statements.append(
            iam.PolicyStatement(
                sid="DecryptEndpointCredentials",
                actions=["kms:Decrypt"],
                resources=list(settings.secret_kms_key_arns),
                # Only as Secrets Manager decrypts a secret for the worker, not any ciphertext.
                conditions={
                    "StringEquals": {
                        "kms:ViaService": sorted(
                            {f"secretsmanager.{secret_region(stack, s)}.amazonaws.com" for s in secrets}
                        )
                    }
                },
            )
        )
    return statements
