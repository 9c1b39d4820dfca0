"""The CDK stack, built in-process from a test configuration: what the template says.

One app is built (and synthesized, with cdk-nag registered as `cdk/app.py` registers it) for
the whole module, from `TEST_CONTEXT` plus a `ferry:configFile` that overrides part of it.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from cdk_support import (
    TEST_CONFIG_FILE,
    TEST_CONTEXT,
    as_list,
    definition,
    load_app_module,
    only,
    plain,
    resources,
    statements,
    states,
)

from ferry.pipeline.settings import PipelineSettings, WorkerSettings

FUNCTIONS = ("Prepare", "ListVersions", "CopyBatch", "RecordFailure", "Finalize")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    tmp = tmp_path_factory.mktemp("cdk")
    config = tmp / "override.json"
    config.write_text(json.dumps(TEST_CONFIG_FILE))
    app_module = load_app_module()
    app = cdk.App(
        outdir=str(tmp / "cdk.out"),
        context={
            "ferry": TEST_CONTEXT,
            "ferry:configFile": str(config),
            "aws:cdk:bundling-stacks": [],  # the layer's pip install is tested by the CLI synth
            "aws:cdk:enable-path-metadata": True,  # as the CLI sets it
        },
    )
    stack = app_module.build(app)
    template = Template.from_stack(stack)  # synthesizes: cdk-nag errors would fail here
    return SimpleNamespace(
        app=app, stack=stack, settings=stack.settings, assertions=template, template=template.to_json()
    )


def function_by_name(template: dict[str, Any], name: str) -> dict[str, Any]:
    found = [r for lid, r in resources(template, "AWS::Lambda::Function").items() if lid.startswith(name)]
    assert len(found) == 1, name
    return found[0]["Properties"]


def role_statements(template: dict[str, Any], role_prefix: str) -> list[dict[str, Any]]:
    return [st for lid, st in statements(template) if lid.startswith(role_prefix)]


# -- configuration --------------------------------------------------------------------------


def test_config_file_overrides_the_context(built: SimpleNamespace) -> None:
    expected = PipelineSettings.from_context({**TEST_CONTEXT, **TEST_CONFIG_FILE})
    assert built.settings == expected
    assert built.settings.max_items_per_batch == 37 and built.settings.capacity_provider == "FARGATE"


# -- the state machine ----------------------------------------------------------------------


def test_distributed_maps_read_batch_and_write_results(built: SimpleNamespace) -> None:
    machine = definition(built.template)
    maps = {name: s for name, s in machine["States"].items() if s["Type"] == "Map"}  # the job's own
    distributed = {
        n: s for n, s in maps.items() if s["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
    }
    readers = sorted(
        (s["ItemReader"]["Resource"], s["ItemReader"].get("ReaderConfig", {}).get("InputType"))
        for s in distributed.values()
    )
    assert readers == [
        ("arn:aws:states:::s3:getObject", "CSV"),
        ("arn:aws:states:::s3:getObject", "JSONL"),
        ("arn:aws:states:::s3:getObject", "JSONL"),  # an all_versions job's keys, listed in parts
        ("arn:aws:states:::s3:getObject", "MANIFEST"),
        ("arn:aws:states:::s3:listObjectsV2", None),
    ]
    # The keys the ListVersions loop lists for an all_versions job are read from the stack's
    # own bucket: the parts the last run's manifest names (an Athena data manifest).
    histories = distributed["CopyVersionHistories"]["ItemReader"]["Parameters"]
    assert histories["Key.$"] == "$.job.histories.manifest"
    assert distributed["CopyVersionHistories"]["ItemReader"]["ReaderConfig"] == {
        "ManifestType": "ATHENA_DATA",
        "InputType": "JSONL",
    }
    bucket_lid, _ = only(built.template, "AWS::S3::Bucket")
    for name, state in distributed.items():
        assert state["ItemProcessor"]["ProcessorConfig"]["ExecutionType"] == "STANDARD", name
        assert {"MaxItemsPerBatchPath", "MaxInputBytesPerBatchPath"} <= state["ItemBatcher"].keys(), name
        writer = state["ResultWriter"]
        assert writer["Resource"] == "arn:aws:states:::s3:putObject", name
        assert writer["Parameters"]["Bucket"] == plain({"Ref": bucket_lid}, built.template), name
    assert histories["Bucket"] == plain({"Ref": bucket_lid}, built.template)


def test_each_batch_runs_its_large_objects_as_child_executions_the_role_may_start(
    built: SimpleNamespace,
) -> None:
    """CopyLargeObjects is a Distributed Map inside each batch's child workflow, so a batch's
    history does not grow with its large objects: each object is a child execution of this
    state machine (STANDARD, as ecs:runTask.sync needs), which the role may start (on the
    machine) and follow, stop and redrive (on its executions' names, a nested Map Run's too)."""
    from fnmatch import fnmatchcase

    machine = definition(built.template)
    jobs_maps = [name for name, s in machine["States"].items() if s["Type"] == "Map"]
    nested = {name: s for name, s in states(machine) if name.startswith("CopyLargeObjects")}
    assert sorted(nested) == sorted(f"CopyLargeObjects ({name})" for name in jobs_maps)
    for name, state in nested.items():
        assert state["ItemProcessor"]["ProcessorConfig"] == {
            "Mode": "DISTRIBUTED",
            "ExecutionType": "STANDARD",
        }
        assert state["ItemsPath"] == "$.large" and "ItemReader" not in state, name
    by_action: dict[str, set[str]] = {}
    for st in role_statements(built.template, "StateMachineRole"):
        for action in as_list(st["Action"]):
            by_action.setdefault(action, set()).update(as_list(st["Resource"]))
    name = built.stack.state_machine_name
    assert by_action["states:StartExecution"] == {
        f"arn:aws:states:us-east-1:123456789012:stateMachine:{name}"
    }
    nested_child = f"arn:aws:states:us-east-1:123456789012:execution:{name}/9f8e7d6c/5b4a3928:0a1b2c3d-4e5f"
    for action in ("states:DescribeExecution", "states:StopExecution", "states:RedriveExecution"):
        assert any(fnmatchcase(nested_child, arn) for arn in by_action[action]), action


def test_the_child_workflow_runs_the_functions_and_the_fargate_task(built: SimpleNamespace) -> None:
    t = built.template
    machine = definition(t)
    tasks = {name: s for name, s in states(machine) if s["Type"] == "Task"}
    invoked = {
        s["Parameters"]["FunctionName"] for s in tasks.values() if s["Resource"].endswith("lambda:invoke")
    }
    function_arns = {plain({"Fn::GetAtt": [lid, "Arn"]}, t) for lid in resources(t, "AWS::Lambda::Function")}
    assert invoked == function_arns  # every function, and nothing else

    ecs_tasks = [s for s in tasks.values() if s["Resource"] == "arn:aws:states:::ecs:runTask.sync"]
    assert ecs_tasks
    cluster_lid, _ = only(t, "AWS::ECS::Cluster")
    task_lid, _ = only(t, "AWS::ECS::TaskDefinition")
    sg_lid, _ = only(t, "AWS::EC2::SecurityGroup")
    subnets = sorted(plain({"Ref": lid}, t) for lid in resources(t, "AWS::EC2::Subnet"))
    for state in ecs_tasks:
        p = state["Parameters"]
        assert p["Cluster"] == plain({"Fn::GetAtt": [cluster_lid, "Arn"]}, t)
        assert p["TaskDefinition"] == plain({"Ref": task_lid}, t)
        assert p["CapacityProviderStrategy"] == [
            {"CapacityProvider": "FARGATE", "Weight": 1}
        ]  # fargate_spot false
        network = p["NetworkConfiguration"]["AwsvpcConfiguration"]
        assert sorted(network["Subnets"]) == subnets
        assert network["SecurityGroups"] == [plain({"Fn::GetAtt": [sg_lid, "GroupId"]}, t)]
        assert network["AssignPublicIp"] == "ENABLED"  # public subnets, no NAT gateway
        assert p["Overrides"]["ContainerOverrides"][0]["Name"] == "worker"


def test_state_machine_is_standard_traced_and_logged(built: SimpleNamespace) -> None:
    t = built.template
    _, machine = only(t, "AWS::StepFunctions::StateMachine")
    props = machine["Properties"]
    assert props["StateMachineType"] == "STANDARD"
    assert props["TracingConfiguration"] == {"Enabled": True}
    logging = props["LoggingConfiguration"]
    assert logging["Level"] == "ALL" and logging["IncludeExecutionData"] is False
    group_arn = logging["Destinations"][0]["CloudWatchLogsLogGroup"]["LogGroupArn"]
    group = t["Resources"][group_arn["Fn::GetAtt"][0]]["Properties"]
    assert group["LogGroupName"].startswith("/aws/vendedlogs/states/")
    assert group["RetentionInDays"] == 14


# -- one source of truth ---------------------------------------------------------------------


def test_workers_get_the_settings_and_the_definition_reads_them_by_path(built: SimpleNamespace) -> None:
    t, settings = built.template, built.settings
    table_lid, _ = only(t, "AWS::DynamoDB::Table")
    bucket_lid, _ = only(t, "AWS::S3::Bucket")
    names = {"FERRY_TABLE": {"Ref": table_lid}, "FERRY_REPORT_BUCKET": {"Ref": bucket_lid}}
    powertools = {"POWERTOOLS_SERVICE_NAME": "ferry", "POWERTOOLS_METRICS_NAMESPACE": "Ferry"}

    for name in FUNCTIONS:
        env = function_by_name(t, name)["Environment"]["Variables"]
        assert env == {**names, **powertools, **settings.worker_environment()}, name
    _, task = only(t, "AWS::ECS::TaskDefinition")
    (container,) = task["Properties"]["ContainerDefinitions"]
    env = {e["Name"]: e["Value"] for e in container["Environment"]}
    assert env == {**names, **powertools, **settings.worker_environment(fargate=True)}

    # What a worker reads back is exactly what was configured...
    worker = WorkerSettings.from_environ({**env, "FERRY_TABLE": "t", "FERRY_REPORT_BUCKET": "b"})
    limits = worker.batching()
    assert limits == {
        "max_items_per_batch": 37,
        "max_input_bytes_per_batch": 54 * 1024,
        "max_concurrency": 13,
        "tolerated_failure_percentage": 17,
        "large_object_concurrency": 11,
    }
    assert worker.large_object_threshold == settings.large_object_threshold == 3 * 1024**3
    assert (
        worker.deadline_margin_seconds == 77 and worker.max_passes == 19 and worker.checkpoint_ttl_days == 4
    )

    # ...and the definition takes these limits from the job (`$.job.limits`, which Prepare
    # fills from that same environment), never as numbers of its own.
    machine = definition(t)
    paths: set[str] = set()
    literal_keys = (
        "MaxItemsPerBatch",
        "MaxInputBytesPerBatch",
        "MaxConcurrency",
        "ToleratedFailurePercentage",
    )
    for name, state in states(machine):
        if state["Type"] != "Map":
            continue
        for container_ in (state, state.get("ItemBatcher", {})):
            for key, value in container_.items():
                assert key not in literal_keys, f"{name} has a literal {key}"
                if key.endswith("Path") and isinstance(value, str) and value.startswith("$.job.limits."):
                    paths.add(value.removeprefix("$.job.limits."))
    assert paths == set(limits), "the limits the definition reads are the limits the workers have"
    numbers = set(_numbers(machine))
    for name, value in limits.items():
        assert value not in numbers, f"{name}={value} is hard-coded in the definition"


def _numbers(node: Any) -> list[int | float]:
    if isinstance(node, dict):
        return [n for v in node.values() for n in _numbers(v)]
    if isinstance(node, list):
        return [n for v in node for n in _numbers(v)]
    return [node] if isinstance(node, int | float) and not isinstance(node, bool) else []


# -- Lambda and Fargate ----------------------------------------------------------------------


def test_lambdas_are_arm64_on_the_configured_runtime_with_the_layer(built: SimpleNamespace) -> None:
    t = built.template
    layer_lid, layer = only(t, "AWS::Lambda::LayerVersion")
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    handlers = {}
    for name in FUNCTIONS:
        props = function_by_name(t, name)
        assert props["Architectures"] == ["arm64"], name
        assert props["Runtime"] == built.settings.lambda_runtime == "python3.13", name
        assert props["TracingConfig"] == {"Mode": "Active"}, name
        assert props["Layers"] == [{"Ref": layer_lid}], name
        handlers[name] = props["Handler"]
        group = t["Resources"][props["LoggingConfig"]["LogGroup"]["Ref"]]["Properties"]
        assert group["RetentionInDays"] == 14, name
    assert handlers == {
        "Prepare": "handlers.prepare.handler",
        "ListVersions": "handlers.list_versions.handler",
        "CopyBatch": "handlers.copy_batch.handler",
        "RecordFailure": "handlers.record_failure.handler",
        "Finalize": "handlers.finalize.handler",
    }
    copy_batch = function_by_name(t, "CopyBatch")
    assert copy_batch["MemorySize"] == 3008 and copy_batch["Timeout"] == 900
    for name in FUNCTIONS:
        assert function_by_name(t, name)["Timeout"] <= 900


def test_fargate_task_definition(built: SimpleNamespace) -> None:
    t = built.template
    _, task = only(t, "AWS::ECS::TaskDefinition")
    props = task["Properties"]
    assert props["RuntimePlatform"] == {"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"}
    assert props["RequiresCompatibilities"] == ["FARGATE"] and props["NetworkMode"] == "awsvpc"
    assert (props["Cpu"], props["Memory"]) == ("1024", "3072")
    (container,) = props["ContainerDefinitions"]
    assert container["Name"] == "worker"
    assert container["Command"] == ["python", "-m", "handlers.copy_large"]
    assert container["StopTimeout"] == 120  # Fargate Spot's two-minute warning, all of it
    assert container["ReadonlyRootFilesystem"] is True
    assert container["MountPoints"] == [{"ContainerPath": "/tmp", "ReadOnly": False, "SourceVolume": "tmp"}]
    assert container["LogConfiguration"]["LogDriver"] == "awslogs"
    _, cluster = only(t, "AWS::ECS::ClusterCapacityProviderAssociations")
    assert set(cluster["Properties"]["CapacityProviders"]) == {"FARGATE", "FARGATE_SPOT"}


def test_network_is_public_subnets_without_nat(built: SimpleNamespace) -> None:
    t = built.template
    assert not resources(t, "AWS::EC2::NatGateway")
    subnets = resources(t, "AWS::EC2::Subnet")
    assert len(subnets) == 2 and all(s["Properties"]["MapPublicIpOnLaunch"] for s in subnets.values())
    (endpoint,) = resources(t, "AWS::EC2::VPCEndpoint").values()
    assert endpoint["Properties"]["VpcEndpointType"] == "Gateway"
    assert "s3" in json.dumps(endpoint["Properties"]["ServiceName"])
    _, group = only(t, "AWS::EC2::SecurityGroup")
    assert "SecurityGroupIngress" not in group["Properties"]
    assert not resources(t, "AWS::EC2::SecurityGroupIngress")


# -- storage ---------------------------------------------------------------------------------


def test_table_on_demand_with_recovery_encryption_and_ttl(built: SimpleNamespace) -> None:
    _, table = only(built.template, "AWS::DynamoDB::Table")
    props = table["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert {k["AttributeName"]: k["KeyType"] for k in props["KeySchema"]} == {"pk": "HASH", "sk": "RANGE"}
    assert table["DeletionPolicy"] == "Retain"


def test_report_bucket_encrypted_private_tls_only_with_lifecycle(built: SimpleNamespace) -> None:
    t = built.template
    bucket_lid, bucket = only(t, "AWS::S3::Bucket")
    props = bucket["Properties"]
    (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    rules = {r["Id"]: r for r in props["LifecycleConfiguration"]["Rules"]}
    assert rules["ExpireJobReports"]["Prefix"] == "jobs/"
    assert rules["ExpireJobReports"]["ExpirationInDays"] == 45
    assert rules["AbortIncompleteMultipartUploads"]["AbortIncompleteMultipartUpload"] == {
        "DaysAfterInitiation": 1
    }
    assert all(r["Status"] == "Enabled" for r in rules.values())
    assert bucket["DeletionPolicy"] == "Retain"
    _, policy = only(t, "AWS::S3::BucketPolicy")
    (deny,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Action"] == "s3:*" and deny["Principal"] == {"AWS": "*"}
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert policy["Properties"]["Bucket"] == {"Ref": bucket_lid}


# -- least privilege -------------------------------------------------------------------------

SOURCE_ONLY = {  # (s3:GetObjectVersion and s3:GetObjectVersionTagging also read back a
    # destination's version the engine wrote, by its VersionId)
    "s3:GetObjectAttributes",
    "s3:GetObjectVersionAttributes",
    "s3:RestoreObject",
}
WRITES = {
    "s3:PutObject",
    "s3:PutObjectTagging",
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
}


def allowed_arns(built: SimpleNamespace) -> dict[str, set[str]]:
    """Every S3 ARN a statement may name, by kind, as the template spells it (fake values)."""
    from ferry_cdk.access import iam_escape

    s, t = built.settings, built.template
    bucket_lid, _ = only(t, "AWS::S3::Bucket")
    reports = plain({"Fn::GetAtt": [bucket_lid, "Arn"]}, t) + "/jobs/*"

    def objects(locations: Any) -> set[str]:
        return {f"arn:aws:s3:::{loc.bucket}/{iam_escape(loc.prefix)}*" for loc in locations}

    return {
        "sources": objects(s.sources),
        "destinations": objects(s.destinations),
        "marks": {f"arn:aws:s3:::{loc.bucket}/.ferry/uploads/*" for loc in s.destinations},
        "manifests": objects(s.manifests),
        "reports": {reports},
        "buckets": {f"arn:aws:s3:::{loc.bucket}" for loc in (*s.sources, *s.destinations)}
        | {f"arn:aws:s3:::{plain({'Ref': bucket_lid}, t)}"},
    }


def test_no_wildcard_actions_and_no_star_resource_on_data(built: SimpleNamespace) -> None:
    from ferry_cdk.nag import UNSCOPABLE_ACTIONS

    checked = 0
    for lid, st in statements(built.template):
        assert st["Effect"] == "Allow", lid
        actions = as_list(st["Action"])
        for action in actions:
            assert "*" not in action, f"{lid} grants the wildcard action {action}"
        if "*" in as_list(st["Resource"]):
            assert set(actions) <= UNSCOPABLE_ACTIONS.keys(), f"{lid} grants {actions} on every resource"
        checked += 1
    assert checked > 30


def test_s3_grants_name_only_the_configured_prefixes(built: SimpleNamespace) -> None:
    arns = allowed_arns(built)
    data = arns["sources"] | arns["destinations"] | arns["manifests"] | arns["reports"] | arns["marks"]
    seen: set[str] = set()
    for lid, st in statements(built.template):
        for action in (a for a in as_list(st["Action"]) if a.startswith("s3:")):
            targets = set(as_list(st["Resource"]))
            seen |= targets
            if action in (
                "s3:ListBucket",
                "s3:ListBucketMultipartUploads",
                "s3:ListBucketVersions",
                "s3:GetBucketVersioning",
                "s3:GetBucketObjectLockConfiguration",
            ):
                assert targets <= arns["buckets"], (lid, targets)
                continue
            assert targets <= data, (lid, action, targets - data)
            if action in SOURCE_ONLY:
                assert targets <= arns["sources"], (lid, action, targets)
            if action in WRITES:
                assert targets <= arns["destinations"] | arns["reports"] | arns["marks"], (
                    lid,
                    action,
                    targets,
                )
    assert data <= seen  # and every configured location is granted somewhere


def test_list_bucket_is_limited_to_the_prefixes(built: SimpleNamespace) -> None:
    listings = 0
    for lid, st in statements(built.template):
        actions = set(as_list(st["Action"]))
        if not actions & {"s3:ListBucket", "s3:ListBucketVersions"}:
            continue
        assert actions <= {"s3:ListBucket", "s3:ListBucketVersions"}, lid  # never beside other actions
        listings += "s3:ListBucketVersions" in actions
        (bucket,) = as_list(st["Resource"])
        if bucket == "arn:aws:s3:::src-whole":  # configured without a prefix: the whole bucket
            assert "Condition" not in st, lid
            continue
        if bucket not in ("arn:aws:s3:::src-bucket", "arn:aws:s3:::dst-bucket"):
            # the stack's own report bucket holds only Ferry's reports: listed whole, so a GET
            # of a report not (yet) written answers 404
            assert lid.startswith("FinalizeRole") and "Condition" not in st, lid
            continue
        # StringLike, never ...IfExists: a listing without a Prefix must be refused
        (operator, condition), *rest = st["Condition"].items()
        assert not rest and operator == "StringLike", lid
        prefixes = condition["s3:prefix"]
        if bucket == "arn:aws:s3:::src-bucket":
            assert sorted(prefixes) == ["data/*", "odd${*}${?}${$}/*"], lid
        elif lid.startswith("FinalizeRole"):  # it lists the upload marks, nothing else
            assert prefixes == [".ferry/uploads/*"], lid
        else:
            assert prefixes == ["backup/*"], lid
    assert listings > 0  # ListObjectVersions (all_versions jobs) is held to the prefixes too


def test_each_role_gets_what_its_code_does(built: SimpleNamespace) -> None:
    t = built.template
    arns = allowed_arns(built)

    def actions_on(role: str, targets: set[str]) -> set[str]:
        found = set()
        for st in role_statements(t, role):
            if set(as_list(st["Resource"])) & targets:
                found |= set(as_list(st["Action"]))
        return found

    copy = {
        "s3:GetObject",
        "s3:GetObjectVersion",
        "s3:GetObjectTagging",
        "s3:GetObjectVersionTagging",
        "s3:GetObjectAttributes",
        "s3:GetObjectVersionAttributes",  # GetObjectAttributes with a VersionId (resume_parts.py)
        "s3:RestoreObject",
    }
    write = {
        "s3:PutObject",
        "s3:PutObjectTagging",
        "s3:GetObject",
        "s3:GetObjectTagging",
        "s3:AbortMultipartUpload",
        "s3:ListMultipartUploadParts",
        "s3:DeleteObject",
        # Versioned destinations: the engine HEADs (to verify) and deletes (an unproved copy)
        # exactly the version it wrote, with VersionId (server_side._written_head, discard_copy).
        "s3:GetObjectVersion",
        "s3:DeleteObjectVersion",
        # ... and reads back the tags of that version (streaming.check_tags_kept).
        "s3:GetObjectVersionTagging",
    }
    dest_buckets = {f"arn:aws:s3:::{loc.bucket}" for loc in built.settings.destinations}
    src_only = {f"arn:aws:s3:::{loc.bucket}" for loc in built.settings.sources} - dest_buckets
    for role in ("CopyBatchRole", "CopyTaskRole"):
        assert actions_on(role, arns["sources"]) == copy, role
        assert actions_on(role, arns["destinations"]) == write, role
        # Upload marks, and finding a crashed run's uploads to resume (ferry.engine.records.upload_marks):
        # a mark is deleted by its version id, so a versioned bucket keeps none of it, and none
        # is written where Object Lock's default retention would keep it.
        assert actions_on(role, arns["marks"]) == {
            "s3:PutObject",
            "s3:GetObject",
            "s3:DeleteObject",
            "s3:DeleteObjectVersion",
        }, role
        assert "s3:ListBucketMultipartUploads" in actions_on(role, dest_buckets), role
        assert "s3:GetBucketObjectLockConfiguration" in actions_on(role, dest_buckets), role
        assert "s3:GetBucketObjectLockConfiguration" not in actions_on(role, src_only), role
        assert actions_on(role, arns["reports"]) == {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, role
    assert actions_on("PrepareRole", arns["sources"]) == set()  # lists them, reads no object
    assert actions_on("ListVersionsRole", arns["sources"] | arns["destinations"]) == set()
    # all_versions: each key's history listed on both sides by the workers; Prepare checks the
    # source's versions can be listed and reads both buckets' versioning; the ListVersions loop
    # lists the source's versions; nothing else does either.
    src_buckets = {f"arn:aws:s3:::{loc.bucket}" for loc in built.settings.sources}
    for role in ("CopyBatchRole", "CopyTaskRole"):
        assert "s3:ListBucketVersions" in actions_on(role, src_buckets), role
        assert "s3:ListBucketVersions" in actions_on(role, dest_buckets), role
        assert "s3:GetBucketVersioning" not in actions_on(role, src_buckets | dest_buckets), role
    assert {"s3:ListBucketVersions", "s3:GetBucketVersioning"} <= actions_on("PrepareRole", src_buckets)
    assert "s3:GetBucketVersioning" in actions_on("PrepareRole", dest_buckets)
    assert "s3:ListBucketVersions" not in actions_on("PrepareRole", dest_buckets - src_buckets)
    assert actions_on("ListVersionsRole", src_buckets | dest_buckets) == {"s3:ListBucketVersions"}
    assert "s3:ListBucketVersions" not in actions_on("ListVersionsRole", dest_buckets - src_buckets)
    for role in ("RecordFailureRole", "FinalizeRole", "StateMachineRole"):
        assert not {"s3:ListBucketVersions", "s3:GetBucketVersioning"} & actions_on(
            role, src_buckets | dest_buckets
        ), role
    # The destination probe: a multipart upload opened and aborted, with the job's tags if any.
    assert actions_on("PrepareRole", arns["destinations"]) == {
        "s3:PutObject",
        "s3:PutObjectTagging",
        "s3:AbortMultipartUpload",
    }
    for role in ("RecordFailureRole", "PrepareRole"):
        assert actions_on(role, arns["marks"]) == set(), role
    assert actions_on("RecordFailureRole", arns["sources"] | arns["destinations"]) == set()
    assert actions_on("FinalizeRole", arns["sources"]) == set()
    # Finalize aborts its job's abandoned uploads and deletes their marks (abandoned_uploads.py).
    assert actions_on("FinalizeRole", arns["destinations"]) == {"s3:AbortMultipartUpload"}
    assert actions_on("FinalizeRole", arns["marks"]) == {
        "s3:GetObject",
        "s3:DeleteObject",
        "s3:DeleteObjectVersion",
    }
    assert "s3:ListBucketMultipartUploads" in actions_on("FinalizeRole", dest_buckets)
    assert actions_on("StateMachineRole", arns["sources"] | arns["destinations"]) == set()
    assert actions_on("StateMachineRole", arns["manifests"]) == {"s3:GetObject"}  # ItemReader
    assert actions_on("PrepareRole", arns["manifests"]) == {"s3:GetObject"}  # checks it first
    assert actions_on("StateMachineRole", arns["reports"]) == {  # ResultWriter
        "s3:PutObject",
        "s3:GetObject",
        "s3:ListMultipartUploadParts",
        "s3:AbortMultipartUpload",
    }


def test_kms_only_on_the_configured_keys(built: SimpleNamespace) -> None:
    s = built.settings
    grants: dict[str, set[str]] = {}
    for lid, st in statements(built.template):
        for action in (a for a in as_list(st["Action"]) if a.startswith("kms:")):
            for key in as_list(st["Resource"]):
                grants.setdefault(key, set()).add(action)
                assert key in (
                    *s.source_kms_key_arns,
                    *s.destination_kms_key_arns,
                    *s.manifest_kms_key_arns,
                ), (lid, key)
    (source_key,) = s.source_kms_key_arns
    (destination_key,) = s.destination_kms_key_arns
    (manifest_key,) = s.manifest_kms_key_arns
    assert grants == {
        source_key: {"kms:Decrypt"},
        destination_key: {"kms:GenerateDataKey", "kms:Decrypt", "kms:Encrypt"},
        manifest_key: {"kms:Decrypt"},
    }


def test_kms_encrypted_manifests_can_be_read_by_the_item_reader_and_prepare(built: SimpleNamespace) -> None:
    """The Map's ItemReader runs as the state machine role: an SSE-KMS manifest, inventory
    manifest.json or inventory data file needs kms:Decrypt there (and in Prepare, which reads it
    first); only on the configured manifest keys."""
    (manifest_key,) = built.settings.manifest_kms_key_arns
    for role in ("StateMachineRole", "PrepareRole"):
        decrypt = [
            st for st in role_statements(built.template, role) if "kms:Decrypt" in as_list(st["Action"])
        ]
        assert [as_list(st["Resource"]) for st in decrypt] == [[manifest_key]], role
    for role in ("CopyBatchRole", "CopyTaskRole", "RecordFailureRole", "FinalizeRole"):
        for st in role_statements(built.template, role):
            assert manifest_key not in as_list(st["Resource"]), role


def test_workers_name_the_configured_bucket_owners(built: SimpleNamespace) -> None:
    """Every worker (Lambda and Fargate) gets the owners, and sends them (clients.expect_owners)."""
    owners = {"dst-bucket": "222233334444", "inventory-bucket": "555566667777"}
    for name in FUNCTIONS:
        env = function_by_name(built.template, name)["Environment"]["Variables"]
        assert json.loads(env["FERRY_BUCKET_OWNERS"]) == owners, name
    _, task = only(built.template, "AWS::ECS::TaskDefinition")
    (container,) = task["Properties"]["ContainerDefinitions"]
    env = {e["Name"]: e["Value"] for e in container["Environment"]}
    assert json.loads(env["FERRY_BUCKET_OWNERS"]) == owners
    assert (
        WorkerSettings.from_environ({**env, "FERRY_TABLE": "t", "FERRY_REPORT_BUCKET": "r"}).bucket_owners
        == owners
    )


def test_arm64_fargate_spot_runs_on_a_platform_version_that_offers_it(built: SimpleNamespace) -> None:
    """FARGATE_SPOT runs ARM64 tasks from platform version 1.4.0 (ECS API reference,
    CapacityProviderStrategyItem; "Amazon ECS now supports AWS Graviton-based Spot compute with
    AWS Fargate", 2024-09): the RunTask must not pin an older one (absent means LATEST, 1.4.0)."""
    for _, state in states(definition(built.template)):
        if state.get("Resource", "").startswith("arn:aws:states:::ecs:runTask"):
            assert state["Parameters"].get("PlatformVersion", "LATEST") in ("LATEST", "1.4.0")
            break
    else:
        raise AssertionError("no ecs:runTask state")


def test_state_machine_role_is_scoped(built: SimpleNamespace) -> None:
    t = built.template
    by_action: dict[str, set[str]] = {}
    for st in role_statements(t, "StateMachineRole"):
        for action in as_list(st["Action"]):
            by_action.setdefault(action, set()).update(as_list(st["Resource"]))
    machine = f"arn:aws:states:us-east-1:123456789012:stateMachine:{built.stack.state_machine_name}"
    assert by_action["states:StartExecution"] == {machine}
    assert by_action["states:DescribeExecution"] == {
        f"arn:aws:states:us-east-1:123456789012:execution:{built.stack.state_machine_name}/*"
    }
    task_lid, _ = only(t, "AWS::ECS::TaskDefinition")
    assert by_action["ecs:RunTask"] == {plain({"Ref": task_lid}, t)}
    assert by_action["events:PutRule"] == {
        "arn:aws:events:us-east-1:123456789012:rule/StepFunctionsGetEventsForECSTaskRule"
    }
    roles = {
        plain({"Fn::GetAtt": [lid, "Arn"]}, t) for lid in resources(t, "AWS::IAM::Role") if "CopyTask" in lid
    }
    assert by_action["iam:PassRole"] == roles and len(roles) == 2
    functions = {plain({"Fn::GetAtt": [lid, "Arn"]}, t) for lid in resources(t, "AWS::Lambda::Function")}
    assert by_action["lambda:InvokeFunction"] == functions


# -- cdk-nag ---------------------------------------------------------------------------------


def test_nag_passes_and_every_acknowledgment_hides_a_real_finding(
    built: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import aws_cdk as cdk
    from cdk_nag import AwsSolutionsChecks

    from ferry_cdk.stack import FerryStack

    report = AwsSolutionsChecks().validate_scope(built.app)
    assert [v.rule_name for v in report.violations if v.severity == "error"] == []

    # The same stack without its acknowledgments: each one we made is a finding again.
    bare_app = cdk.App(outdir=str(tmp_path_factory.mktemp("bare")), context={"aws:cdk:bundling-stacks": []})
    FerryStack(bare_app, "Ferry", settings=built.settings, acknowledge_nag_findings=False)
    bare = AwsSolutionsChecks().validate_scope(bare_app)
    errors = {
        (v.rule_name, r.construct_path)
        for v in bare.violations
        if v.severity == "error"
        for r in v.violating_resources
    }
    acknowledged = {
        (rule["id"], resource["Metadata"]["aws:cdk:path"])
        for resource in built.template["Resources"].values()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
        if rule["id"].startswith("AwsSolutions-")
    }
    rules = {rule for rule, _ in acknowledged}
    assert {"AwsSolutions-S1", "AwsSolutions-L1", "AwsSolutions-ECS2", "AwsSolutions-ECS4"} <= rules
    assert acknowledged == errors  # nothing acknowledged that is not found, nowhere else


# -- the dependency layer --------------------------------------------------------------------


def test_layer_is_built_by_pip_for_the_lambda_platform_and_cached_by_content(tmp_path: Any) -> None:
    from ferry_cdk import bundling

    requirements = tmp_path / "requirements.txt"
    requirements.write_text("boto3==1.44.5\n")
    command = bundling.pip_command(requirements, "arm64", "python3.13", tmp_path / "out")
    for flag in (
        ["--platform", "manylinux2014_aarch64"],
        ["--python-version", "3.13"],
        ["--implementation", "cp"],
        ["--only-binary=:all:"],
        ["--target", str(tmp_path / "out")],
    ):
        assert any(command[i : i + len(flag)] == flag for i in range(len(command))), flag
    assert "manylinux2014_x86_64" in bundling.pip_command(requirements, "x86_64", "python3.12", tmp_path)

    key = bundling.layer_key(requirements, "arm64", "python3.13")
    assert key == bundling.layer_key(requirements, "arm64", "python3.13")
    assert key != bundling.layer_key(requirements, "x86_64", "python3.13")
    assert key != bundling.layer_key(requirements, "arm64", "python3.12")
    requirements.write_text("boto3==1.44.6\n")
    assert key != bundling.layer_key(requirements, "arm64", "python3.13")


def test_outputs_name_what_the_job_commands_need(built: SimpleNamespace) -> None:
    """`ferry job --stack NAME` reads these outputs by name (cli/shared/stack_outputs.py)."""
    from ferry.cli.shared.stack_outputs import REPORT_BUCKET_OUTPUT, STATE_MACHINE_OUTPUT, TABLE_OUTPUT

    t = built.template
    outputs = t["Outputs"]
    machine_lid, _ = only(t, "AWS::StepFunctions::StateMachine")
    table_lid, _ = only(t, "AWS::DynamoDB::Table")
    bucket_lid, _ = only(t, "AWS::S3::Bucket")
    assert outputs[STATE_MACHINE_OUTPUT]["Value"] == {"Ref": machine_lid}  # Ref: the ARN
    assert outputs[TABLE_OUTPUT]["Value"] == {"Ref": table_lid}  # Ref: the table name
    assert outputs[REPORT_BUCKET_OUTPUT]["Value"] == {"Ref": bucket_lid}  # Ref: the bucket name


def test_prepare_may_read_a_retry_manifest_in_the_report_bucket(built: SimpleNamespace) -> None:
    """`ferry job retry` writes the failed objects' manifest under jobs/; Prepare HEADs it and
    does nothing else there. The ListVersions loop writes an all_versions job's keys there
    (jobs/<id>/histories/: parts streamed as multipart uploads, and manifests, each run reading
    back the one before)."""
    reports = allowed_arns(built)["reports"]

    def found(role: str) -> set[str]:
        actions: set[str] = set()
        for st in role_statements(built.template, role):
            if set(as_list(st["Resource"])) & reports:
                actions |= set(as_list(st["Action"]))
        return actions

    assert found("PrepareRole") == {"s3:GetObject"}
    assert found("ListVersionsRole") == {"s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"}
    assert (
        function_by_name(built.template, "ListVersions")["Timeout"] == 15 * 60
    )  # a run lists until its deadline


def test_only_prepare_reads_the_accounts_lambda_quota_and_nothing_is_reserved_by_default(
    built: SimpleNamespace,
) -> None:
    """Prepare lowers the Maps' MaxConcurrency to the account's Lambda concurrency
    (GetAccountSettings, which takes no resource). No function reserves concurrency unless the
    settings ask: a reservation cannot deploy in an account whose quota is 100 or less."""
    readers = {
        lid.split("Role")[0]
        for lid, st in statements(built.template)
        if "lambda:GetAccountSettings" in as_list(st["Action"])
    }
    assert readers == {"Prepare"}
    (st,) = [
        st for lid, st in statements(built.template) if "lambda:GetAccountSettings" in as_list(st["Action"])
    ]
    assert as_list(st["Action"]) == ["lambda:GetAccountSettings"] and as_list(st["Resource"]) == ["*"]
    for name in FUNCTIONS:
        assert "ReservedConcurrentExecutions" not in function_by_name(built.template, name), name
    assert (
        function_by_name(built.template, "Prepare")["Environment"]["Variables"][
            "FERRY_COPY_RESERVED_CONCURRENCY"
        ]
        == "0"
    )
