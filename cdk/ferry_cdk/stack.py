"""FerryStack: the whole pipeline in one stack, built from `PipelineSettings`.

Report bucket and DynamoDB ledger; four Lambda functions (arm64 by default) over the
`functions/` code with the pinned dependencies in a layer; a Fargate task for large objects
(same code, image built from `functions/Dockerfile`); the Step Functions state machine
rendered from `statemachine/*.asl.json`. Every role gets only what its code does, on the
configured buckets and prefixes only.
"""

from __future__ import annotations

import hashlib
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from ferry.errors import ConfigError
from ferry.pipeline.locations import Location
from ferry.pipeline.settings import STACK_ROLE_TAG, PipelineSettings
from ferry.quotas.lambda_concurrency import MIN_UNRESERVED

from . import abandoned_uploads, access, bundling, bytecode, monitoring, nag, replication, schedules
from .access import BATCH_REPORTS, DESTINATION_WRITE, LEDGER_READ_WRITE, SOURCE_READ, statement
from .definition import parent_definition
from .reach import reach_statements

FUNCTIONS_DIR = bundling.FUNCTIONS_DIR
MAX_STATE_MACHINE_NAME = 80  # Step Functions: a state machine's name is 1-80 characters
_MACHINE_SUFFIX = "-jobs"


def jobs_machine_name(stack_name: str) -> str:
    """`<stack>-jobs`. CloudFormation takes stack names of up to 128 characters, Step Functions
    state machine names of up to 80: a stack name over 75 keeps its head and gains a hash of
    the whole name, so two long stack names sharing a head still name two machines. Nothing
    finds the machine by its name: `ferry job` reads the stack's StateMachineArn output."""
    name = f"{stack_name}{_MACHINE_SUFFIX}"
    if len(name) <= MAX_STATE_MACHINE_NAME:
        return name
    digest = hashlib.sha256(stack_name.encode()).hexdigest()[:8]
    head = stack_name[: MAX_STATE_MACHINE_NAME - len(_MACHINE_SUFFIX) - len(digest) - 1].rstrip("-")
    return f"{head}-{digest}{_MACHINE_SUFFIX}"


CONTAINER_NAME = "worker"
CONTAINER_COMMAND = ["python", "-m", "handlers.copy_large"]
REPORTS_PREFIX = "jobs/"
IMAGE_EXCLUDE = ["**/__pycache__", "**/*.pyc", "*.egg-info"]
RETENTION = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS",
    1096: "THREE_YEARS", 1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS", 3288: "NINE_YEARS", 3653: "TEN_YEARS",
}  # fmt: skip


class FerryStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: PipelineSettings,
        acknowledge_nag_findings: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.settings = settings
        self.state_machine_name = jobs_machine_name(self.stack_name)
        self.retention = _retention(settings.log_retention_days)
        self.arm64 = settings.lambda_architecture == "arm64"

        self.report_bucket = self._report_bucket()
        self.table = self._table()
        self.worker_env = {
            "FERRY_TABLE": self.table.table_name,
            "FERRY_REPORT_BUCKET": self.report_bucket.bucket_name,
            "POWERTOOLS_SERVICE_NAME": "ferry",
            "POWERTOOLS_METRICS_NAMESPACE": "Ferry",
        }
        self.functions = self._functions()
        self._network()
        self._fargate()
        self.state_machine = self._state_machine()
        self.replication_queues = replication.add_replications(self)  # name -> queue, dlq, rule, starter
        self.recurring_syncs = schedules.add_recurring_syncs(
            self, self, self.state_machine, settings.schedules
        )

        self.monitoring = monitoring.monitor_stack(self)  # last: alarms on every queue and function

        # `ferry job ...` finds these by name (functions/ferry/cli/shared/stack_outputs.py): keep them.
        cdk.CfnOutput(self, "StateMachineArn", value=self.state_machine.state_machine_arn)
        cdk.CfnOutput(self, "ReportBucketName", value=self.report_bucket.bucket_name)
        cdk.CfnOutput(self, "TableName", value=self.table.table_name)
        # Other accounts' policies name the stack's roles by this tag (`ferry policy`): the
        # role names CloudFormation generates shorten a long stack name.
        cdk.Tags.of(self).add(STACK_ROLE_TAG, self.stack_name, include_resource_types=["AWS::IAM::Role"])
        if acknowledge_nag_findings:
            nag.acknowledge(self)

    # -- storage --------------------------------------------------------------------------

    def _report_bucket(self) -> s3.Bucket:
        return s3.Bucket(
            self,
            "ReportBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="ExpireJobReports",
                    prefix=REPORTS_PREFIX,
                    expiration=cdk.Duration.days(self.settings.report_retention_days),
                ),
                s3.LifecycleRule(
                    id="AbortIncompleteMultipartUploads",
                    abort_incomplete_multipart_upload_after=cdk.Duration.days(1),
                ),
            ],
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )

    def _table(self) -> dynamodb.Table:
        return dynamodb.Table(
            self,
            "Ledger",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            time_to_live_attribute="expires_at",
            removal_policy=cdk.RemovalPolicy.RETAIN,  # the history of every job
        )

    # -- Lambda ---------------------------------------------------------------------------

    def _functions(self) -> dict[str, lambda_.Function]:
        s = self.settings
        architecture = lambda_.Architecture.ARM_64 if self.arm64 else lambda_.Architecture.X86_64
        runtime = lambda_.Runtime(s.lambda_runtime, lambda_.RuntimeFamily.PYTHON, supports_inline_code=True)
        # The runtime's Python, which compiles both assets' bytecode (bytecode.py); without it
        # they ship sources only, and the synth says what that costs.
        python = bytecode.find_runtime_python(s.lambda_runtime)
        bytecode.say_what_is_missing(self, s.lambda_runtime, python)
        layer = lambda_.LayerVersion(
            self,
            "Dependencies",
            code=bundling.layer_code(s.lambda_architecture, s.lambda_runtime, python),
            compatible_architectures=[architecture],
            compatible_runtimes=[runtime],
            description=f"Ferry's pinned dependencies (functions/requirements.txt) for {s.lambda_runtime}",
        )
        code = bundling.function_code(s.lambda_runtime, python)
        # Shared with the functions other modules add (schedules.py).
        self.lambda_code, self.lambda_layer = code, layer
        self.lambda_runtime, self.lambda_architecture = runtime, architecture
        environment = {**self.worker_env, **s.worker_environment()}
        specs = {  # name: (handler module, memory MB, timeout minutes, description)
            # 15 minutes: Prepare reads a manifest through once (manifest_check.py).
            "Prepare": ("prepare", 512, 15, "Checks a job spec and its access, creates the job record"),
            # One run of an all_versions job's listing lists until its deadline (history_keys.py).
            "ListVersions": ("list_versions", 1024, 15, "Lists a source's versions, one run of the loop"),
            "CopyBatch": ("copy_batch", s.lambda_memory_mb, 15, "Copies one batch of objects, verified"),
            "RecordFailure": ("record_failure", 512, 5, "Records every object of a failed step as failed"),
            "Finalize": ("finalize", 1024, 15, "Writes a job's report and sets its final status"),
        }
        reserved = reserved_concurrency(s)
        self._say_what_reservations_need(reserved)
        functions = {}
        for name, (module, memory, minutes, description) in specs.items():
            log_group = logs.LogGroup(self, f"{name}Logs", retention=self.retention)
            role = iam.Role(
                self,
                f"{name}Role",
                assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                description=f"Ferry {name} function",
            )
            log_group.grant_write(role)
            functions[name] = lambda_.Function(
                self,
                name,
                description=f"Ferry: {description}",
                runtime=runtime,
                architecture=architecture,
                handler=f"handlers.{module}.handler",
                code=code,
                layers=[layer],
                memory_size=memory,
                timeout=cdk.Duration.minutes(minutes),
                environment=environment,
                tracing=lambda_.Tracing.ACTIVE,
                log_group=log_group,
                role=role,
                reserved_concurrent_executions=reserved.get(name),
            )
        self._grant_functions(functions)
        return functions

    def _say_what_reservations_need(self, reserved: dict[str, int]) -> None:
        """A reservation's deploy fails in an account whose quota it would leave with fewer than
        100 unreserved, and the account's quota is not known here (new accounts get as little
        as 10): said at synth, beside the numbers `ferry estimate` checks against the account."""
        total = sum(reserved.values())
        if total:
            cdk.Annotations.of(self).add_warning_v2(
                "ferry:reserved-concurrency",
                f"{' and '.join(f'{n} reserves {c}' for n, c in reserved.items())}: the deploy needs an "
                f"account whose Lambda concurrency quota leaves at least {MIN_UNRESERVED} unreserved after "
                f"every reservation, so at least {total + MIN_UNRESERVED}; an account with less fails with "
                "'decreases account's UnreservedConcurrentExecution below its minimum value'. "
                "`ferry estimate --settings cdk.json` compares them with the account's quota",
            )

    @property
    def execution_arn_pattern(self) -> str:
        """This state machine's executions: `execution:<machine>:<name>`."""
        return self.format_arn(
            service="states",
            resource="execution",
            resource_name=f"{self.state_machine_name}:*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )

    @property
    def map_run_arn_pattern(self) -> str:
        """This state machine's Map Runs: `mapRun:<machine>/<map run label>:<id>`."""
        return self.format_arn(
            service="states",
            resource="mapRun",
            resource_name=f"{self.state_machine_name}/*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )

    def _grant_functions(self, functions: dict[str, lambda_.Function]) -> None:
        s = self.settings
        table = [self.table.table_arn]
        reports = [f"{self.report_bucket.bucket_arn}/{REPORTS_PREFIX}*"]
        sources, destinations = access.object_arns(s.sources), access.object_arns(s.destinations)

        prepare = functions["Prepare"]
        # The account's Lambda concurrency, to which Prepare lowers the Map's MaxConcurrency.
        prepare.add_to_role_policy(statement("ReadLambdaQuota", ["lambda:GetAccountSettings"], ["*"]))
        for st in access.list_bucket_statements((*s.sources, *s.destinations), sid="ListConfiguredPrefixes"):
            prepare.add_to_role_policy(st)
        if s.manifests:
            prepare.add_to_role_policy(
                statement("ReadManifests", ["s3:GetObject"], access.object_arns(s.manifests))
            )
        if s.manifest_kms_key_arns:
            prepare.add_to_role_policy(
                statement("DecryptManifests", ["kms:Decrypt"], s.manifest_kms_key_arns)
            )
        # The destination check opens a multipart upload and aborts it at once, once more with
        # the job's tags if it has some (jobs._check_write_options), as the workers will write.
        prepare.add_to_role_policy(
            statement(
                "ProbeDestinations",
                ["s3:PutObject", "s3:PutObjectTagging", "s3:AbortMultipartUpload"],
                destinations,
            )
        )
        if s.destination_kms_key_arns:
            prepare.add_to_role_policy(
                statement("ProbeDestinationKeys", ["kms:GenerateDataKey"], s.destination_kms_key_arns)
            )
        # An all_versions job: both buckets' versioning read, and the source's versions listable.
        prepare.add_to_role_policy(
            statement(
                "ReadVersioning",
                access.READ_VERSIONING,
                sorted(set(access.bucket_arns(s.sources)) | set(access.bucket_arns(s.destinations))),
            )
        )
        for st in access.list_bucket_statements(
            s.sources, sid="ListSourceVersions", actions=access.LIST_VERSIONS
        ):
            prepare.add_to_role_policy(st)
        prepare.add_to_role_policy(statement("CreateJob", ["dynamodb:GetItem", "dynamodb:PutItem"], table))
        for st in reach_statements(self, s):  # the destination check writes as the workers will
            prepare.add_to_role_policy(st)
        # `ferry job retry` starts a job over a manifest of failed objects under jobs/ (cli/commands/job_retry.py).
        prepare.add_to_role_policy(statement("ReadRetryManifests", ["s3:GetObject"], reports))

        # The ListVersions loop lists the source's versions (as the workers reach the source) and
        # writes the keys with a history under jobs/<id>/histories/, reading back the manifest
        # the run before wrote.
        list_versions = functions["ListVersions"]
        for st in access.list_bucket_statements(
            s.sources, sid="ListSourceVersions", actions=access.LIST_VERSIONS
        ):
            list_versions.add_to_role_policy(st)
        list_versions.add_to_role_policy(
            statement("WriteHistories", ["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"], reports)
        )
        for st in reach_statements(self, s):
            list_versions.add_to_role_policy(st)

        copy_batch = functions["CopyBatch"]
        for st in self._copy_statements(sources, destinations, table, reports):
            copy_batch.add_to_role_policy(st)

        record_failure = functions["RecordFailure"]
        record_failure.add_to_role_policy(statement("Ledger", LEDGER_READ_WRITE, table))
        record_failure.add_to_role_policy(statement("Reports", BATCH_REPORTS, reports))

        # Finalize records the objects of batches the Map lost (a marker, failure items and a
        # batch report, as RecordFailure does), streams failures.jsonl as a multipart upload,
        # and asks the Map Run how many items it read.
        finalize = functions["Finalize"]
        finalize.add_to_role_policy(statement("Ledger", LEDGER_READ_WRITE, table))
        finalize.add_to_role_policy(
            statement("Reports", (*BATCH_REPORTS, "s3:AbortMultipartUpload"), reports)
        )
        finalize.add_to_role_policy(
            statement("DescribeMapRuns", ["states:DescribeMapRun"], [self.map_run_arn_pattern])
        )
        # A Map that failed names no result files: Finalize finds its Map Runs by execution.
        finalize.add_to_role_policy(
            statement("ListMapRuns", ["states:ListMapRuns"], [self.execution_arn_pattern])
        )
        # The stack's own bucket holds only Ferry's reports: listed whole, so that a GET of a
        # report not (yet) written answers 404 (NoSuchKey), not 403.
        for st in access.list_bucket_statements(
            [Location(self.report_bucket.bucket_name)], sid="ListReports"
        ):
            finalize.add_to_role_policy(st)
        # ... and aborts the job's own uploads a crash left open (ferry_cdk.abandoned_uploads).
        for st in abandoned_uploads.finalize_statements(self, s):
            finalize.add_to_role_policy(st)

    def _copy_statements(
        self, sources: list[str], destinations: list[str], table: list[str], reports: list[str]
    ) -> list[iam.PolicyStatement]:
        """What a copy worker (the CopyBatch function and the Fargate task) may do."""
        s = self.settings
        statements = [
            statement("ReadSources", SOURCE_READ, sources),
            # An all_versions job lists each key's history on both sides (history_copy.py): the
            # same buckets and prefixes, so the same statements (a role's inline policies share
            # 10,240 characters).
            *access.list_bucket_statements(s.sources, sid="ListSources", actions=access.LIST_AND_VERSIONS),
            statement("WriteDestinations", DESTINATION_WRITE, destinations),
            *access.list_bucket_statements(
                s.destinations, sid="ListDestinations", actions=access.LIST_AND_VERSIONS
            ),
            # A copy killed mid-way is resumed from its upload's mark (ferry.engine.records.upload_marks);
            # no mark goes where Object Lock would keep it.
            statement("MarkUploads", access.UPLOAD_MARKS, access.marks_arns(s.destinations)),
            statement(
                "FindUploadsToResume",
                (*access.FIND_UPLOADS, *access.READ_OBJECT_LOCK),
                access.bucket_arns(s.destinations),
            ),
            statement("Ledger", LEDGER_READ_WRITE, table),
            statement("Reports", BATCH_REPORTS, reports),
            *reach_statements(self, s),  # roles to assume, credential secrets (ferry_cdk.reach)
        ]
        if s.source_kms_key_arns:
            statements.append(statement("DecryptSources", ["kms:Decrypt"], s.source_kms_key_arns))
        if s.destination_kms_key_arns:
            statements.append(
                statement(
                    "EncryptDestinations",
                    ["kms:GenerateDataKey", "kms:Decrypt", "kms:Encrypt"],
                    s.destination_kms_key_arns,
                )
            )
        return statements

    # -- network and Fargate --------------------------------------------------------------

    def _network(self) -> None:
        s = self.settings
        if s.vpc_id:
            # Needs credentials at synth time (the lookup is cached in cdk.context.json).
            self.vpc = ec2.Vpc.from_lookup(self, "Vpc", vpc_id=s.vpc_id)
            private = self.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
            if private.subnet_ids:
                self.task_subnets, self.assign_public_ip = private, "DISABLED"
            else:
                self.task_subnets = self.vpc.select_subnets(subnet_type=ec2.SubnetType.PUBLIC)
                self.assign_public_ip = "ENABLED"
        else:
            # Public subnets and no NAT gateway (no hourly charge): tasks get a public IP to
            # reach ECR, CloudWatch Logs and DynamoDB; S3 traffic takes the free gateway endpoint.
            self.vpc = ec2.Vpc(
                self,
                "Vpc",
                max_azs=2,
                nat_gateways=0,
                subnet_configuration=[
                    ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24)
                ],
            )
            self.vpc.add_gateway_endpoint("S3Endpoint", service=ec2.GatewayVpcEndpointAwsService.S3)
            self.vpc.add_flow_log(
                "RejectedTraffic",
                traffic_type=ec2.FlowLogTrafficType.REJECT,
                destination=ec2.FlowLogDestination.to_cloud_watch_logs(
                    logs.LogGroup(self, "FlowLogs", retention=self.retention)
                ),
            )
            self.task_subnets = self.vpc.select_subnets(subnet_type=ec2.SubnetType.PUBLIC)
            self.assign_public_ip = "ENABLED"
        self.security_group = ec2.SecurityGroup(
            self,
            "TaskSecurityGroup",
            vpc=self.vpc,
            description="Ferry copy tasks: no inbound traffic; outbound to AWS APIs",
            allow_all_outbound=True,
        )

    def _fargate(self) -> None:
        s = self.settings
        self.cluster = ecs.Cluster(self, "Cluster", vpc=self.vpc, enable_fargate_capacity_providers=True)
        self.task_role = iam.Role(
            self,
            "CopyTaskRole",
            assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
            description="Ferry large-object copy task",
        )
        self.task_definition = ecs.FargateTaskDefinition(
            self,
            "CopyTask",
            cpu=s.fargate_cpu,
            memory_limit_mib=s.fargate_memory_mb,
            task_role=self.task_role,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.ARM64 if self.arm64 else ecs.CpuArchitecture.X86_64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
        )
        self.container = self.task_definition.add_container(
            CONTAINER_NAME,
            image=ecs.ContainerImage.from_asset(
                str(FUNCTIONS_DIR),
                file="Dockerfile",
                platform=ecr_assets.Platform.LINUX_ARM64 if self.arm64 else ecr_assets.Platform.LINUX_AMD64,
                build_args={"PYTHON_VERSION": bytecode.runtime_version(s.lambda_runtime)},
                exclude=IMAGE_EXCLUDE,
            ),
            command=CONTAINER_COMMAND,
            environment={**self.worker_env, **s.worker_environment(fargate=True)},
            logging=ecs.LogDrivers.aws_logs(
                stream_prefix="copy-large",
                log_group=logs.LogGroup(self, "CopyTaskLogs", retention=self.retention),
            ),
            # Fargate Spot warns two minutes ahead with SIGTERM: the longest stop timeout lets
            # the task finish its parts in flight and save a checkpoint.
            stop_timeout=cdk.Duration.seconds(120),
            # The code writes no file: the root filesystem is read-only, /tmp a scratch volume.
            readonly_root_filesystem=True,
        )
        self.task_definition.add_volume(name="tmp")
        self.container.add_mount_points(
            ecs.MountPoint(container_path="/tmp", source_volume="tmp", read_only=False)
        )
        table = [self.table.table_arn]
        reports = [f"{self.report_bucket.bucket_arn}/{REPORTS_PREFIX}*"]
        for st in self._copy_statements(
            access.object_arns(s.sources), access.object_arns(s.destinations), table, reports
        ):
            self.task_role.add_to_policy(st)

    # -- state machine --------------------------------------------------------------------

    def _state_machine(self) -> sfn.StateMachine:
        s = self.settings
        name = self.state_machine_name
        values = {
            "PrepareFunctionArn": self.functions["Prepare"].function_arn,
            "ListVersionsFunctionArn": self.functions["ListVersions"].function_arn,
            "CopyBatchFunctionArn": self.functions["CopyBatch"].function_arn,
            "RecordFailureFunctionArn": self.functions["RecordFailure"].function_arn,
            "FinalizeFunctionArn": self.functions["Finalize"].function_arn,
            "ReportBucket": self.report_bucket.bucket_name,
            "LedgerTable": self.table.table_name,
            "ClusterArn": self.cluster.cluster_arn,
            "TaskDefinitionArn": self.task_definition.task_definition_arn,
            "ContainerName": CONTAINER_NAME,
            "Subnets": list(self.task_subnets.subnet_ids),
            "SecurityGroups": [self.security_group.security_group_id],
            "AssignPublicIp": self.assign_public_ip,
            "CapacityProvider": s.capacity_provider,
        }
        self.definition = parent_definition(values)
        role = iam.Role(
            self,
            "StateMachineRole",
            assumed_by=iam.ServicePrincipal("states.amazonaws.com"),
            description="Ferry state machine",
        )
        for st in self._state_machine_statements(name):
            role.add_to_policy(st)
        log_group = logs.LogGroup(
            self,
            "StateMachineLogs",
            # The vended-logs prefix keeps the CloudWatch Logs resource policy small.
            log_group_name=f"/aws/vendedlogs/states/{name}",
            retention=self.retention,
        )
        return sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=name,
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_string(self.to_json_string(self.definition)),
            role=role,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
        )

    def _state_machine_statements(self, name: str) -> list[iam.PolicyStatement]:
        s = self.settings
        self.task_arn_pattern = self.format_arn(
            service="ecs",
            resource="task",
            resource_name=f"{self.cluster.cluster_name}/*",
            arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME,
        )
        machine_arn = self.format_arn(
            service="states",
            resource="stateMachine",
            resource_name=name,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        # Distributed Map child executions are named `<machine>/<map run label>:<id>`: the job's
        # batches, and each batch's large objects (CopyLargeObjects, a Distributed Map inside the
        # child workflow, whose children are executions of this same machine). Both Maps start
        # them with StartExecution on the machine and follow them on these names.
        children = self.format_arn(
            service="states",
            resource="execution",
            resource_name=f"{name}/*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        statements = [
            statement(
                "InvokeFunctions",
                ["lambda:InvokeFunction"],
                [f.function_arn for f in self.functions.values()],
            ),
            statement("StartChildExecutions", ["states:StartExecution"], [machine_arn]),
            statement(
                "ManageChildExecutions",
                ["states:DescribeExecution", "states:StopExecution", "states:RedriveExecution"],
                [children],
            ),
            *access.list_bucket_statements(s.sources, sid="ItemReaderList"),
            statement(
                "ResultWriter",
                ["s3:PutObject", "s3:GetObject", "s3:ListMultipartUploadParts", "s3:AbortMultipartUpload"],
                [f"{self.report_bucket.bucket_arn}/{REPORTS_PREFIX}*"],
            ),
            # An all_versions job's keys: the manifest and the JSON Lines parts it names, which the
            # ListVersions loop writes under jobs/ (history_keys.py).
            statement(
                "ItemReaderHistories",
                ["s3:GetObject"],
                [f"{self.report_bucket.bucket_arn}/{REPORTS_PREFIX}*"],
            ),
            # MarkJobFailed: a Finalize that failed for good sets the job FAILED in the ledger.
            statement("MarkJobFailed", ["dynamodb:UpdateItem"], [self.table.table_arn]),
            statement("RunCopyTask", ["ecs:RunTask"], [self.task_definition.task_definition_arn]),
            statement("FollowCopyTasks", ["ecs:StopTask", "ecs:DescribeTasks"], [self.task_arn_pattern]),
            statement(
                "EcsSyncRule",
                ["events:PutTargets", "events:PutRule", "events:DescribeRule"],
                [
                    self.format_arn(
                        service="events",
                        resource="rule",
                        resource_name="StepFunctionsGetEventsForECSTaskRule",
                        arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME,
                    )
                ],
            ),
            statement(
                "PassCopyTaskRoles",
                ["iam:PassRole"],
                [self.task_role.role_arn, self.task_definition.obtain_execution_role().role_arn],
            ),
        ]
        if s.manifests:
            # A manifest, or an S3 Inventory's manifest.json and the data/*.csv.gz files it names
            # (under the inventory's destination prefix): the `manifests` location covers both.
            statements.append(
                statement("ItemReaderManifests", ["s3:GetObject"], access.object_arns(s.manifests))
            )
        if s.manifest_kms_key_arns:
            statements.append(statement("ItemReaderDecrypt", ["kms:Decrypt"], s.manifest_kms_key_arns))
        return statements


def reserved_concurrency(settings: PipelineSettings) -> dict[str, int]:
    """The functions given reserved concurrency by the settings: CopyBatch (the copies then draw
    on it alone and Prepare caps the Map at it) and RecordFailure (its calls then never wait
    for slots the copies or the account's other functions hold)."""
    wanted = {
        "CopyBatch": settings.copy_reserved_concurrency,
        "RecordFailure": settings.record_failure_reserved_concurrency,
    }
    return {name: count for name, count in wanted.items() if count > 0}


def _retention(days: int) -> logs.RetentionDays:
    if days not in RETENTION:
        raise ConfigError(
            f"log_retention_days: {days} is not a CloudWatch Logs retention; use one of "
            + ", ".join(str(d) for d in RETENTION)
        )
    return logs.RetentionDays[RETENTION[days]]
