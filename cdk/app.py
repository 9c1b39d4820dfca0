"""The CDK app (`npx cdk synth` / `npx cdk deploy` from the repository root, see cdk.json)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ferry_cdk.node_notices import show_node_notices_as_text

show_node_notices_as_text()  # before aws_cdk starts its Node process

import aws_cdk as cdk  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from ferry.errors import ConfigError  # noqa: E402
from ferry.pipeline.settings import PipelineSettings  # noqa: E402
from ferry_cdk.stack import FerryStack  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def settings_from(app: cdk.App) -> PipelineSettings:
    """The `ferry` context, with the values of the file `ferry:configFile` names on top."""
    values: Any = app.node.try_get_context("ferry") or {}
    if not isinstance(values, dict):
        raise ConfigError("the 'ferry' context in cdk.json must be an object")
    config_file = app.node.try_get_context("ferry:configFile")
    if config_file:
        path = Path(config_file)
        path = path if path.is_absolute() else REPO / path
        try:
            overrides = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise ConfigError(f"ferry:configFile: cannot read {str(path)!r}: {error}") from error
        if not isinstance(overrides, dict):
            raise ConfigError(f"ferry:configFile: {str(path)!r} must hold a JSON object of settings")
        values = {**values, **overrides}
    return PipelineSettings.from_context(values)


MAX_STACK_NAME = 128  # CloudFormation: a stack's name is at most 128 characters


def stack_name_from(app: cdk.App) -> str:
    """`ferry:stackName`, else Ferry. Refused at synth when CloudFormation would refuse it at
    deploy; every name the stack derives from it fits its service (stack.jobs_machine_name)."""
    name = app.node.try_get_context("ferry:stackName") or "Ferry"
    if not isinstance(name, str) or len(name) > MAX_STACK_NAME:
        size = len(name) if isinstance(name, str) else 0
        raise ConfigError(
            f"ferry:stackName: {size} characters, over CloudFormation's {MAX_STACK_NAME} for a stack "
            "name; choose a shorter one"
        )
    return name


def build(app: cdk.App) -> FerryStack:
    settings = settings_from(app)
    env = None
    if settings.vpc_id:  # Vpc.from_lookup needs a concrete account and region
        env = cdk.Environment(
            account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")
        )
    stack = FerryStack(
        app,
        stack_name_from(app),
        settings=settings,
        env=env,
        description=f"Ferry: verified S3 copies at scale ({settings.describe()})",
    )
    cdk.Validations.of(app).add_plugins(
        AwsSolutionsChecks(app, verbose=True, write_suppressions_to_cloud_formation=True)
    )
    return stack


def main() -> int:
    app = cdk.App()
    try:
        build(app)
    except ConfigError as error:
        print(f"ferry: configuration error: {error}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
