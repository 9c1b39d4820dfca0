"""What a deployed Ferry stack is called by: its state machine, ledger table and report bucket,
read from the stack's CloudFormation outputs (DescribeStacks), so nobody copies an ARN by hand.

The output names are the CfnOutputs of cdk/ferry_cdk/stack.py (tests/cdk pins them); the
stack's default name is cdk/app.py's (`-c ferry:stackName=...` deploys another one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ferry.errors import ConfigError, error_code, is_client_error

DEFAULT_STACK = "Ferry"
STATE_MACHINE_OUTPUT = "StateMachineArn"
TABLE_OUTPUT = "TableName"
REPORT_BUCKET_OUTPUT = "ReportBucketName"
OUTPUTS = (STATE_MACHINE_OUTPUT, TABLE_OUTPUT, REPORT_BUCKET_OUTPUT)


@dataclass(frozen=True)
class StackOutputs:
    """The three names every `ferry job` command needs."""

    stack: str
    state_machine_arn: str
    table: str
    report_bucket: str

    @property
    def region(self) -> str:
        """The state machine's region (the stack's): `arn:<partition>:states:<region>:...`."""
        return self.state_machine_arn.split(":")[3]

    @property
    def partition(self) -> str:
        return self.state_machine_arn.split(":")[1]

    def execution_arn(self, name: str) -> str:
        """The ARN Step Functions gives the execution `name` of this state machine."""
        return self.state_machine_arn.replace(":stateMachine:", ":execution:", 1) + ":" + name


def find_stack_outputs(cloudformation: Any, stack: str = DEFAULT_STACK) -> StackOutputs:
    """The stack's outputs, or one sentence saying which stack or output is missing and what
    to do about it."""
    region = cloudformation.meta.region_name
    try:
        stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except Exception as error:  # a ClientError, told apart without importing botocore (start-up cost)
        # DescribeStacks answers ValidationError "Stack with id X does not exist" for an
        # unknown name (the AWS SDK docs' note says otherwise; boto/boto3#2807 shows the real
        # response, and moto answers the same).
        if (
            is_client_error(error)
            and error_code(error) == "ValidationError"
            and "does not exist" in str(error)
        ):
            raise ConfigError(
                f"no stack {stack!r} in {region}: deploy it (npx cdk deploy), or name yours with "
                "--stack NAME and its region with --region"
            ) from error
        raise
    if not stacks:
        raise ConfigError(f"no stack {stack!r} in {region}: deploy it (npx cdk deploy), or give --stack NAME")
    outputs = {o["OutputKey"]: o.get("OutputValue", "") for o in stacks[0].get("Outputs") or []}
    missing = [name for name in OUTPUTS if not outputs.get(name)]
    if missing:
        status = stacks[0].get("StackStatus", "")
        raise ConfigError(
            f"stack {stack!r} ({status}) has no output {', '.join(missing)}: is it a Ferry stack? "
            "If so, deploy this version of Ferry to it (npx cdk deploy)"
        )
    return StackOutputs(
        stack=stack,
        state_machine_arn=outputs[STATE_MACHINE_OUTPUT],
        table=outputs[TABLE_OUTPUT],
        report_bucket=outputs[REPORT_BUCKET_OUTPUT],
    )
