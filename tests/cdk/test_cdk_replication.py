"""Continuous replication in the template: per replication an EventBridge rule, an encrypted
queue with a dead-letter queue, a starter function fed by an SQS event source mapping, and
IAM that lets the starter start this stack's jobs, write its manifests and list its source
under its prefix, nothing more.
Built in-process (cdk-nag registered as cdk/app.py registers it), then cfn-lint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cdk_support import TEST_CONTEXT, as_list, load_app_module, plain, resources, statements

from ferry.errors import ConfigError
from ferry.pipeline.settings import PipelineSettings
from ferry_cdk.replication import event_pattern

REPLICATIONS = [
    {
        "name": "photos",
        "source": {"bucket": "src-bucket", "prefix": "data/photos"},
        "destination": {"bucket": "dst-bucket", "prefix": "backup/photos/"},
        "options": {"storage_class": "STANDARD_IA"},
        "batch_size": 5000,
        "batch_window_seconds": 45,
        "max_concurrent_batches": 7,
    },
    {
        "name": "whole",
        "source": {"bucket": "src-whole"},
        "destination": {"bucket": "dst-bucket", "prefix": "backup/whole/"},
        "batch_size": 10,
        "batch_window_seconds": 0,
    },
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    tmp = tmp_path_factory.mktemp("cdk-replication")
    app = cdk.App(
        outdir=str(tmp / "cdk.out"),
        context={
            "ferry": {**TEST_CONTEXT, "replications": REPLICATIONS},
            "aws:cdk:bundling-stacks": [],
            "aws:cdk:enable-path-metadata": True,
        },
    )
    stack = load_app_module().build(app)
    template = Template.from_stack(stack)  # synthesizes: an unacknowledged cdk-nag error fails here
    assembly = app.synth()
    return SimpleNamespace(
        stack=stack,
        template=template.to_json(),
        template_file=Path(assembly.directory) / stack.template_file,
        out=Path(assembly.directory),
    )


def by_type(template: dict[str, Any], kind: str, name: str) -> dict[str, dict[str, Any]]:
    return {lid: r for lid, r in resources(template, kind).items() if lid.startswith(f"Replication{name}")}


def test_each_replication_has_a_rule_for_object_created_under_its_prefix(built) -> None:
    rules = {lid: r["Properties"] for lid, r in resources(built.template, "AWS::Events::Rule").items()}
    patterns = sorted(json.dumps(r["EventPattern"], sort_keys=True) for r in rules.values())
    assert patterns == sorted(
        json.dumps(p, sort_keys=True)
        for p in (
            {
                "source": ["aws.s3"],
                "detail-type": ["Object Created"],
                "detail": {
                    "bucket": {"name": ["src-bucket"]},
                    "object": {"key": [{"prefix": "data/photos/"}]},
                },
            },
            {
                "source": ["aws.s3"],
                "detail-type": ["Object Created"],
                "detail": {"bucket": {"name": ["src-whole"]}},
            },
        )
    )
    for rule in rules.values():
        assert "EventBusName" not in rule  # the default bus, where S3 sends its events
        (target,) = rule["Targets"]
        queue = target["Arn"]["Fn::GetAtt"][0]
        assert built.template["Resources"][queue]["Type"] == "AWS::SQS::Queue"
        assert "DeadLetters" in target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]


def test_queues_are_encrypted_with_a_dead_letter_queue_and_a_long_enough_visibility(built) -> None:
    for name, window in (("photos", 45), ("whole", 0)):
        queues = by_type(built.template, "AWS::SQS::Queue", name)
        (events_id,) = [lid for lid in queues if "Events" in lid]
        (dlq_id,) = [lid for lid in queues if "DeadLetters" in lid]
        events = queues[events_id]["Properties"]
        assert events["SqsManagedSseEnabled"] is True and queues[dlq_id]["Properties"]["SqsManagedSseEnabled"]
        assert events["RedrivePolicy"] == {
            "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
            "maxReceiveCount": 5,
        }
        (starter,) = by_type(built.template, "AWS::Lambda::Function", name).values()
        timeout = starter["Properties"]["Timeout"]
        assert events["VisibilityTimeout"] >= 6 * timeout + window  # Lambda's SQS guidance
        # Expiry counts from the first send (standard queues, SQS developer guide): the DLQ keeps
        # a message longer than the queue it came from, 14 days being SQS's longest.
        dlq_retention = queues[dlq_id]["Properties"]["MessageRetentionPeriod"]
        assert dlq_retention == 14 * 24 * 3600
        assert events["MessageRetentionPeriod"] == 7 * 24 * 3600
        assert dlq_retention - events["MessageRetentionPeriod"] >= 7 * 24 * 3600
        # TLS only on both queues (cdk-nag AwsSolutions-SQS4)
        for queue_id in (events_id, dlq_id):
            policies = [
                p["Properties"]["PolicyDocument"]["Statement"]
                for p in resources(built.template, "AWS::SQS::QueuePolicy").values()
                if {"Ref": queue_id} in p["Properties"]["Queues"]
            ]
            assert any(
                s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
                for statements_ in policies
                for s in statements_
            ), queue_id


def test_the_starter_reads_its_queue_in_configured_batches_with_partial_failures(built) -> None:
    mappings = [
        m["Properties"] for m in resources(built.template, "AWS::Lambda::EventSourceMapping").values()
    ]
    got = sorted(
        (m["BatchSize"], m.get("MaximumBatchingWindowInSeconds"), m["FunctionResponseTypes"])
        for m in mappings
    )
    assert got == [(10, None, ["ReportBatchItemFailures"]), (5000, 45, ["ReportBatchItemFailures"])]
    # A burst is taken by a bounded number of concurrent starters, each filling its batch:
    # the default is Lambda's smallest maximum concurrency (2), "photos" sets 7.
    concurrency = sorted(m["ScalingConfig"]["MaximumConcurrency"] for m in mappings)
    assert concurrency == [2, 7]
    for m in mappings:
        queue = m["EventSourceArn"]["Fn::GetAtt"][0]
        assert "Events" in queue


def test_the_starter_knows_its_replication_the_report_bucket_and_the_state_machine(built) -> None:
    (starter,) = by_type(built.template, "AWS::Lambda::Function", "photos").values()
    props = starter["Properties"]
    assert props["Handler"] == "handlers.start_replication.handler"
    env = plain(props["Environment"]["Variables"], built.template)
    replication = json.loads(env["FERRY_REPLICATION"])
    assert replication["name"] == "photos" and replication["source"] == {
        "bucket": "src-bucket",
        "prefix": "data/photos/",
    }
    assert replication["options"] == {"storage_class": "STANDARD_IA"}
    machine = next(iter(resources(built.template, "AWS::StepFunctions::StateMachine")))
    bucket = next(
        lid for lid in resources(built.template, "AWS::S3::Bucket") if lid.startswith("ReportBucket")
    )
    variables = props["Environment"]["Variables"]
    assert variables["FERRY_STATE_MACHINE_ARN"] == {"Ref": machine}  # a state machine's Ref is its ARN
    assert variables["FERRY_REPORT_BUCKET"] == {"Ref": bucket}
    assert props["Layers"] and props["Architectures"] == ["arm64"]


def test_the_starter_may_start_this_state_machine_and_write_its_manifests_only(built) -> None:
    machine = next(iter(resources(built.template, "AWS::StepFunctions::StateMachine")))
    for name in ("photos", "whole"):
        granted = [
            st
            for lid, st in statements(built.template)
            if lid.startswith(f"Replication{name}StarterRoleDefaultPolicy")
        ]
        data = {
            a: as_list(st["Resource"])
            for st in granted
            for a in as_list(st["Action"])
            if not a.startswith(("sqs:", "xray:", "logs:"))
        }
        assert set(data) == {"states:StartExecution", "s3:PutObject", "s3:ListBucket"}, data
        assert data["states:StartExecution"] == [plain({"Ref": machine}, built.template)]
        # Listing its source, under its prefix only: which key an event names (event_keys).
        (listing,) = [st for st in granted if "s3:ListBucket" in as_list(st["Action"])]
        source = next(r for r in REPLICATIONS if r["name"] == name)["source"]
        assert as_list(listing["Action"]) == ["s3:ListBucket"]
        assert as_list(listing["Resource"]) == [f"arn:aws:s3:::{source['bucket']}"] or "Fn::Join" in str(
            listing["Resource"]
        )
        prefix = source.get("prefix")
        expected = {"StringLike": {"s3:prefix": [prefix.rstrip("/") + "/*"]}} if prefix else None
        assert listing.get("Condition") == expected, listing
        (manifests,) = data["s3:PutObject"]
        assert manifests.endswith(f"/jobs/{name}-*/events.jsonl"), manifests
        sqs = {a for st in granted for a in as_list(st["Action"]) if a.startswith("sqs:")}
        assert {"sqs:ReceiveMessage", "sqs:DeleteMessage"} <= sqs
    prepare = [st for lid, st in statements(built.template) if lid.startswith("PrepareRoleDefaultPolicy")]
    (read,) = [st for st in prepare if st.get("Sid") == "ReadEventManifests"]
    assert sorted(as_list(read["Resource"])) == sorted(
        r
        for r in as_list(read["Resource"])
        if r.endswith(("/jobs/photos-*/events.jsonl", "/jobs/whole-*/events.jsonl"))
    )


def test_the_rule_matches_the_prefix_as_s3_writes_keys_in_events() -> None:
    # S3 URL-encodes keys in its notifications (spaces as '+'); whether EventBridge's carry
    # them so is not shown by any AWS page: the rule matches the prefix in both forms.
    entry = {**REPLICATIONS[0], "source": {"bucket": "src-bucket", "prefix": "data/my photos+ü"}}
    settings = PipelineSettings.from_context(
        {**TEST_CONTEXT, "sources": [{"bucket": "src-bucket"}], "replications": [entry]}
    )
    pattern = event_pattern(settings.replications[0])
    assert pattern.detail == {
        "bucket": {"name": ["src-bucket"]},
        "object": {"key": [{"prefix": "data/my+photos%2B%C3%BC/"}, {"prefix": "data/my photos+ü/"}]},
    }
    assert pattern.source == ["aws.s3"] and pattern.detail_type == ["Object Created"]


def test_the_queues_are_exposed_for_alarms(built) -> None:
    queues = built.stack.replication_queues
    assert sorted(queues) == ["photos", "whole"]
    assert queues["photos"].queue.dead_letter_queue.queue is queues["photos"].dlq


def test_cdk_nag_and_cfn_lint_are_clean(built) -> None:
    # cdk-nag ran over the starters (their acknowledgments are written into the template) ...
    for name in ("photos", "whole"):
        (starter,) = by_type(built.template, "AWS::Lambda::Function", name).values()
        rules = starter.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
        assert "AwsSolutions-L1" in [r["id"] for r in rules]
    # ... found nothing unacknowledged (an error would have failed the synth), and cfn-lint agrees.
    report = (
        json.loads((built.out / "validation-report.json").read_text())
        if (built.out / "validation-report.json").exists()
        else {"pluginReports": []}
    )
    assert [r for r in report["pluginReports"] if r.get("conclusion") != "success"] == []
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    done = subprocess.run(
        [str(cfn_lint), "--format", "json", str(built.template_file)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors = [f for f in json.loads(done.stdout or "[]") if f["Level"] == "Error"]
    assert errors == [], json.dumps(errors, indent=1)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "bad name"}, "replications[0].name: 'bad name' must be 1-40 letters"),
        ({"batch_size": 11, "batch_window_seconds": 0}, "batch_window_seconds: Lambda takes more than 10"),
        ({"batch_size": 10_001}, "batch_size: 10001 is out of range (1 to 10000)"),
        ({"source": {"bucket": "elsewhere"}}, "is not inside any of 'sources'"),
        ({"destination": {"bucket": "src-bucket", "prefix": "data/photos/copy/"}}, "is inside the source"),
        ({"options": {"skip_existing": False}}, "options.skip_existing: a replication always skips"),
        ({"options": {"mode": "fast"}}, "options.mode: 'fast' is not one of"),
        ({"colour": "red"}, "unknown field(s) colour"),
        ({"max_concurrent_batches": 1}, "max_concurrent_batches: 1 is out of range (2 to 1000)"),
        ({"max_concurrent_batches": 1001}, "max_concurrent_batches: 1001 is out of range (2 to 1000)"),
        (
            {"deletes": True, "batch_size": 5000},
            "batch_size: 5000 deletions one after another may outrun the starter's 900 s",
        ),
    ],
)
def test_a_wrong_replication_is_one_clear_line(change: dict[str, Any], message: str) -> None:
    entry = {**REPLICATIONS[0], **change}
    with pytest.raises(ConfigError) as raised:
        PipelineSettings.from_context({**TEST_CONTEXT, "replications": [entry]})
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_two_replications_may_not_share_a_name() -> None:
    with pytest.raises(ConfigError, match="the name 'photos' is used twice"):
        PipelineSettings.from_context({**TEST_CONTEXT, "replications": [REPLICATIONS[0], REPLICATIONS[0]]})


def test_a_batch_of_keys_to_look_up_is_done_before_its_messages_reach_the_dead_letter_queue(built) -> None:
    """The starter looks up at most lookup_bound(its timeout less its reserve) keys with two
    spellings an invocation and returns the rest as batch item failures, which the event source
    mapping reports (ReportBatchItemFailures): only those are delivered again. A batch whose
    every key needs a look-up then takes several deliveries, fewer than the queue's
    maxReceiveCount, for each configured replication and at the largest batch_size allowed."""
    from ferry.pipeline.replication.config import MAX_BATCH_SIZE
    from ferry.pipeline.replication.starter import RESERVE_SECONDS
    from ferry.pipeline.replication.starter_lookups import lookup_bound
    from ferry_cdk.replication import STARTER_TIMEOUT_SECONDS

    mappings = list(resources(built.template, "AWS::Lambda::EventSourceMapping").values())
    for name, batch_size in (("photos", 5000), ("whole", 10)):
        (starter_id,) = by_type(built.template, "AWS::Lambda::Function", name)
        starter = resources(built.template, "AWS::Lambda::Function")[starter_id]["Properties"]
        (mapping,) = [
            m["Properties"] for m in mappings if m["Properties"]["FunctionName"] == {"Ref": starter_id}
        ]
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert mapping["BatchSize"] == batch_size
        (events,) = [
            q for lid, q in by_type(built.template, "AWS::SQS::Queue", name).items() if "Events" in lid
        ]
        receives = events["Properties"]["RedrivePolicy"]["maxReceiveCount"]
        assert starter["Timeout"] == STARTER_TIMEOUT_SECONDS
        per_invocation = lookup_bound(starter["Timeout"] - RESERVE_SECONDS)
        assert -(-batch_size // per_invocation) < receives, name
        assert -(-MAX_BATCH_SIZE // per_invocation) < receives
