"""`ferry policy`: every printed document parses, names exactly the configured buckets,
prefixes, keys and accounts, and passes the policy grammar (our checks plus cfn-lint's schemas
for the CloudFormation resources that carry each kind of document)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from ferry.cli.main import main

FERRY_ACCOUNT, SOURCE_ACCOUNT, DEST_ACCOUNT = "999988887777", "111122223333", "444455556666"
WRITER = f"arn:aws:iam::{DEST_ACCOUNT}:role/ferry-writer"
SOURCE_KEY = f"arn:aws:kms:eu-west-1:{SOURCE_ACCOUNT}:key/1111aaaa-source"
DEST_KEY = f"arn:aws:kms:us-west-2:{DEST_ACCOUNT}:key/4444bbbb-destination"
WALKTHROUGH = {
    "context": {
        "ferry": {
            "sources": [{"bucket": "photos-a", "prefix": "camera/", "owner": SOURCE_ACCOUNT}],
            "destinations": [
                {
                    "bucket": "photos-b",
                    "prefix": "replica/",
                    "owner": DEST_ACCOUNT,
                    "region": "us-west-2",
                    "role_arn": WRITER,
                }
            ],
            "source_kms_key_arns": [SOURCE_KEY],
            "destination_kms_key_arns": [DEST_KEY],
        },
        "ferry:stackName": "Ferry",
    }
}


def run_policy(tmp_path: Path, context: dict[str, Any], *extra: str) -> tuple[int, str, str]:
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps(context))
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["policy", "--context", str(path), "--account", FERRY_ACCOUNT, "--region", "eu-west-1", *extra],
        out,
        err,
    )
    return code, out.getvalue(), err.getvalue()


def sections(text: str) -> list[tuple[str, Any]]:
    """(heading, document) pairs: each heading line, then JSON up to the next heading (None
    for the notification configuration, which its command reads and merges itself)."""
    found: list[tuple[str, Any]] = []
    for block in re.split(r"^# ", text, flags=re.M)[1:]:
        heading, _, body = block.partition("\n")
        if heading.startswith("S3 notification"):
            assert not body.strip(), heading
            found.append((heading, None))
            continue
        found.append((heading, json.loads(body)))  # raises if a document is not JSON
    return found


def strings(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in (k, *strings(v))]
    if isinstance(node, list):
        return [s for v in node for s in strings(v)]
    return [node] if isinstance(node, str) else []


ACTION = re.compile(r"[a-z0-9-]+:[A-Za-z*]+")
PRINCIPAL_KINDS = {"AWS", "Service", "Federated", "CanonicalUser"}


def grammar_errors(document: Any, *, resource_based: bool, trust: bool = False) -> list[str]:
    """The policy grammar's rules we can check offline (IAM JSON policy reference)."""
    errors = []
    if document.get("Version") != "2012-10-17":
        errors.append("Version must be 2012-10-17")
    statements = document.get("Statement")
    if not isinstance(statements, list) or not statements:
        return [*errors, "Statement must be a non-empty list"]
    for st in statements:
        if st.get("Effect") not in ("Allow", "Deny"):
            errors.append(f"Effect {st.get('Effect')!r}")
        actions = st.get("Action")
        for action in actions if isinstance(actions, list) else [actions]:
            if not (isinstance(action, str) and ACTION.fullmatch(action)):
                errors.append(f"Action {action!r}")
        principal = st.get("Principal")
        if resource_based or trust:
            if not (
                principal == "*"
                or isinstance(principal, dict)
                and principal
                and set(principal) <= PRINCIPAL_KINDS
                and all(isinstance(v, str) or isinstance(v, list) and v for v in principal.values())
            ):
                errors.append(f"Principal {principal!r}")
        elif principal is not None:
            errors.append("an identity policy names no Principal")
        if trust != ("Resource" not in st):
            errors.append("Resource: a trust policy has none, every other statement has one")
        for operator, values in (st.get("Condition") or {}).items():
            if not (isinstance(values, dict) and values and re.fullmatch(r"[A-Za-z]+", operator)):
                errors.append(f"Condition {operator!r}")
    return errors


def test_the_grammar_check_can_fail() -> None:
    bad = {
        "Version": "2008-10-17",
        "Statement": [{"Effect": "allow", "Principal": {"User": "x"}, "Action": "s3 Get"}],
    }
    assert len(grammar_errors(bad, resource_based=True)) == 5


def test_the_walkthrough_prints_every_document_for_exactly_its_buckets_keys_and_accounts(
    tmp_path: Path,
) -> None:
    code, out, err = run_policy(tmp_path, WALKTHROUGH)
    assert code == 0, err
    printed = sections(out)
    headings = [h.split(" ")[0:2] for h, _ in printed]
    assert [" ".join(h) for h in headings] == [
        "Bucket policy",  # source
        "Bucket policy",  # destination
        "Key policy",  # source key
        "Key policy",  # destination key
        "Trust policy",
        "Permissions policy",
        "S3 notification",
        "Role ferry-forward-s3-events",
        "Role ferry-forward-s3-events",
        "EventBridge rule",  # its pattern
        "EventBridge rule",  # its target
        "Resource policy",
    ]
    everything = [s for _, doc in printed for s in strings(doc)]
    arns = [s for s in everything if s.startswith("arn:")]
    assert {re.sub(r"/.*", "", a.split(":::")[1]) for a in arns if ":s3:::" in a} == {"photos-a", "photos-b"}
    assert {a.split(":")[4] for a in arns if a.split(":")[4]} == {FERRY_ACCOUNT, SOURCE_ACCOUNT, DEST_ACCOUNT}
    # A key policy's Resource is "*" (the key it is attached to): its heading names the key.
    named_keys = {w for h, _ in printed for w in h.split() if w.startswith("arn:aws:kms:")}
    assert named_keys | {a for a in arns if ":kms:" in a} == {SOURCE_KEY, DEST_KEY}
    assert {a for a in everything if a.endswith("*") and ":s3:::" in a} == {
        "arn:aws:s3:::photos-a/camera/*",
        "arn:aws:s3:::photos-b/replica/*",
        "arn:aws:s3:::photos-b/.ferry/uploads/*",  # upload marks, to resume a crashed copy
    }
    by_heading = dict(printed)
    source_policy = next(
        d for h, d in printed if h.startswith("Bucket policy for the source s3://photos-a/camera/")
    )
    assert all(
        st["Condition"]["StringEquals"] == {"aws:PrincipalTag/FerryStack": "Ferry"}
        for st in source_policy["Statement"]
    )
    dest_heading = next(h for h in by_heading if h.startswith("Bucket policy for the destination"))
    assert "BucketOwnerEnforced" in dest_heading
    key_policies = {h.split(" ")[4]: d for h, d in printed if h.startswith("Key policy")}
    assert key_policies[SOURCE_KEY]["Statement"][0]["Action"] == ["kms:Decrypt"]
    assert key_policies[DEST_KEY]["Statement"][0]["Action"] == [
        "kms:GenerateDataKey",
        "kms:Decrypt",
        "kms:Encrypt",
    ]
    pattern, targets = [d for h, d in printed if h.startswith("EventBridge rule")]
    assert pattern == {
        "source": ["aws.s3"],
        "detail-type": ["Object Created"],
        "detail": {"bucket": {"name": ["photos-a"]}, "object": {"key": [{"prefix": "camera/"}]}},
    }
    bus = f"arn:aws:events:eu-west-1:{FERRY_ACCOUNT}:event-bus/default"
    assert targets[0]["Arn"] == bus
    bus_policy = next(d for h, d in printed if h.startswith("Resource policy"))
    (allow,) = bus_policy["Statement"]
    assert allow["Principal"] == {"AWS": f"arn:aws:iam::{SOURCE_ACCOUNT}:root"}
    assert allow["Action"] == "events:PutEvents" and allow["Resource"] == bus
    assert allow["Condition"] == {
        "ArnEquals": {
            "aws:SourceArn": f"arn:aws:events:eu-west-1:{SOURCE_ACCOUNT}:rule/ferry-forward-photos-a"
        }
    }
    # The policy grammar, per kind of document.
    for heading, doc in printed:
        if heading.startswith(("S3 notification", "EventBridge rule")):
            continue
        trust = "trust policy" in heading.lower()
        identity = heading.startswith("Permissions policy") or "permissions policy" in heading
        assert grammar_errors(doc, resource_based=not identity and not trust, trust=trust) == [], heading


def test_exact_principals_replace_the_stack_name_condition(tmp_path: Path) -> None:
    role = f"arn:aws:iam::{FERRY_ACCOUNT}:role/Ferry-CopyBatchRoleABC-123"
    _, out, _ = run_policy(tmp_path, WALKTHROUGH, "--principal", role)
    trust = next(d for h, d in sections(out) if h.startswith("Trust policy"))
    assert trust["Statement"] == [
        {
            "Sid": "FerryWorkersAssume",
            "Effect": "Allow",
            "Principal": {"AWS": [role]},
            "Action": ["sts:AssumeRole"],
        }
    ]


def test_nothing_to_apply_is_said_not_printed(tmp_path: Path) -> None:
    same = {
        "context": {"ferry": {"sources": [{"bucket": "a", "owner": FERRY_ACCOUNT}], "destinations": ["b"]}}
    }
    code, out, err = run_policy(tmp_path, same)
    assert (code, out) == (0, "")
    assert "nothing for another account to apply" in err


def test_a_wrong_account_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps(WALKTHROUGH))
    err = io.StringIO()
    assert (
        main(
            ["policy", "--context", str(path), "--account", "12345", "--region", "eu-west-1"],
            io.StringIO(),
            err,
        )
        == 1
    )
    assert err.getvalue() == "ferry: error: --account: '12345' is not a 12-digit AWS account id\n"


CFN_TYPES = {  # heading start -> (resource type, property the document goes in)
    "Bucket policy": ("AWS::S3::BucketPolicy", "PolicyDocument"),
    "Key policy": ("AWS::KMS::Key", "KeyPolicy"),
    "Trust policy": ("AWS::IAM::Role", "AssumeRolePolicyDocument"),
    "Permissions policy": ("AWS::IAM::ManagedPolicy", "PolicyDocument"),
}


def test_cfn_lint_accepts_each_document_where_cloudformation_would_carry_it(tmp_path: Path) -> None:
    _, out, _ = run_policy(tmp_path, WALKTHROUGH)
    resources: dict[str, Any] = {}
    for index, (heading, doc) in enumerate(sections(out)):
        name = f"Doc{index}"
        kind = next((v for k, v in CFN_TYPES.items() if heading.startswith(k)), None)
        if kind:
            props: dict[str, Any] = {kind[1]: doc}
            if kind[0] == "AWS::S3::BucketPolicy":
                props["Bucket"] = heading.split("s3://")[1].split("/")[0]
            resources[name] = {"Type": kind[0], "Properties": props}
        elif heading.startswith("Role ferry-forward") and "trust" in heading:
            resources[name] = {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": doc}}
        elif heading.startswith("Role ferry-forward"):
            resources[name] = {"Type": "AWS::IAM::ManagedPolicy", "Properties": {"PolicyDocument": doc}}
        elif heading.startswith("EventBridge rule") and "event pattern" in heading:
            rule_name = heading.split(" ")[2]
            resources["Rule"] = {
                "Type": "AWS::Events::Rule",
                "Properties": {
                    "Name": rule_name,
                    "EventBusName": "default",
                    "EventPattern": doc,
                    "State": "ENABLED",
                },
            }
        elif heading.startswith("EventBridge rule"):  # its target, put after the rule
            resources["Rule"]["Properties"]["Targets"] = doc
        elif heading.startswith("Resource policy"):
            (statement,) = doc["Statement"]
            resources[name] = {
                "Type": "AWS::Events::EventBusPolicy",
                "Properties": {"StatementId": statement["Sid"], "Statement": statement},
            }
        else:
            assert heading.startswith("S3 notification") and doc is None  # merged by its command
    assert len(resources) == 10
    template = tmp_path / "policies.json"
    template.write_text(json.dumps({"AWSTemplateFormatVersion": "2010-09-09", "Resources": resources}))
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    done = subprocess.run(
        [str(cfn_lint), "--format", "json", "--regions", "eu-west-1", str(template)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    findings = json.loads(done.stdout or "[]")
    assert [f for f in findings if f["Level"] == "Error"] == [], json.dumps(findings, indent=1)
    # And the check can fail: a bucket policy without a Principal is an error there.
    broken = json.loads(template.read_text())
    del broken["Resources"]["Doc0"]["Properties"]["PolicyDocument"]["Statement"][0]["Principal"]
    template.write_text(json.dumps(broken))
    done = subprocess.run(
        [str(cfn_lint), "--format", "json", str(template)], capture_output=True, text=True, timeout=300
    )
    assert any(f["Level"] == "Error" for f in json.loads(done.stdout or "[]"))


def with_replication(deletes: bool, source: dict[str, Any] | None = None) -> dict[str, Any]:
    """The walkthrough plus a replication of A's prefix into B's, deletes on or off."""
    context = json.loads(json.dumps(WALKTHROUGH))
    if source is not None:
        context["context"]["ferry"]["sources"] = [source]
    context["context"]["ferry"]["replications"] = [
        {
            "name": "photos",
            "source": {"bucket": "photos-a", "prefix": "camera/"},
            "destination": {"bucket": "photos-b", "prefix": "replica/"},
            "deletes": deletes,
        }
    ]
    return context


def test_deletes_on_forward_object_deleted_and_allow_listing_versions(tmp_path: Path) -> None:
    """A replication with deletes on needs A's "Object Deleted" events (S3 sends both
    detail-types to EventBridge, user guide EventBridge.html) and ListObjectVersions on A
    (s3:ListBucketVersions) to find the version a delete marker hides."""
    _, out, _ = run_policy(tmp_path, with_replication(deletes=True))
    printed = sections(out)
    pattern = next(d for h, d in printed if h.startswith("EventBridge rule"))
    assert pattern["detail-type"] == ["Object Created", "Object Deleted"]
    source_policy = next(d for h, d in printed if h.startswith("Bucket policy for the source"))
    listing = next(st for st in source_policy["Statement"] if st["Sid"] == "FerryReadList")
    assert listing["Action"] == ["s3:ListBucket", "s3:ListBucketVersions"]
    assert listing["Condition"]["StringLike"] == {"s3:prefix": ["camera/*"]}
    # Deletes off: neither.
    _, out, _ = run_policy(tmp_path, with_replication(deletes=False))
    printed = sections(out)
    pattern = next(d for h, d in printed if h.startswith("EventBridge rule"))
    assert pattern["detail-type"] == ["Object Created"]
    source_policy = next(d for h, d in printed if h.startswith("Bucket policy for the source"))
    assert all("s3:ListBucketVersions" not in st["Action"] for st in source_policy["Statement"])


def test_a_source_read_through_a_role_lets_that_role_list_versions_for_deletes(tmp_path: Path) -> None:
    reader = f"arn:aws:iam::{SOURCE_ACCOUNT}:role/ferry-reader"
    source = {"bucket": "photos-a", "prefix": "camera/", "owner": SOURCE_ACCOUNT, "role_arn": reader}
    _, out, _ = run_policy(tmp_path, with_replication(deletes=True, source=source))
    permissions = next(d for h, d in sections(out) if h.startswith(f"Permissions policy for {reader}"))
    lists = [st for st in permissions["Statement"] if st["Sid"].startswith("FerryReadList")]
    assert [st["Action"] for st in lists] == [["s3:ListBucket", "s3:ListBucketVersions"]]


LONG_STACK = "Ferry-replication-production-eu-west-1-photos-and-videos-archive"


def test_the_stack_roles_are_named_by_their_tag_not_by_generated_role_names(tmp_path: Path) -> None:
    """CloudFormation shortens a long stack name inside the role names it generates, so a
    pattern on `role/<stack>-*` may match none of them: every statement names the stack's
    roles by the tag the stack puts on each of them (aws:PrincipalTag)."""
    from ferry.pipeline.settings import STACK_ROLE_TAG

    _, out, _ = run_policy(tmp_path, with_replication(deletes=True), "--stack-name", LONG_STACK)
    conditioned = 0
    for heading, doc in sections(out):
        assert "aws:PrincipalArn" not in json.dumps(doc), heading
        for st in doc.get("Statement", []) if isinstance(doc, dict) else []:
            if st.get("Principal") == {"AWS": f"arn:aws:iam::{FERRY_ACCOUNT}:root"}:
                assert st["Condition"]["StringEquals"][f"aws:PrincipalTag/{STACK_ROLE_TAG}"] == LONG_STACK
                conditioned += 1
    assert conditioned >= 8


def test_the_forwarding_rule_matches_a_prefix_as_written_and_url_encoded(tmp_path: Path) -> None:
    """The stack's own rule matches the source prefix in both forms an EventBridge event may
    spell a key in (ferry.pipeline.replication.event_keys): the rule printed for another account's bucket
    must match the same forms, or events spelled the other way never arrive."""
    context = json.loads(json.dumps(WALKTHROUGH))
    context["context"]["ferry"]["sources"][0]["prefix"] = "c++/my photos/"
    code, out, err = run_policy(tmp_path, context)
    assert code == 0, err
    (pattern,) = [doc for heading, doc in sections(out) if "event pattern" in heading]
    keys = pattern["detail"]["object"]["key"]
    assert sorted(k["prefix"] for k in keys) == sorted(["c++/my photos/", "c%2B%2B/my+photos/"])


FILE = re.compile(r"file://(\S+?)(?=[\s;,)]|$)")


def named_file(heading: str) -> str:
    (path,) = FILE.findall(heading)
    return path


def test_each_printed_document_names_its_own_file(tmp_path: Path) -> None:
    _, out, _ = run_policy(tmp_path, WALKTHROUGH)
    files = [named_file(heading) for heading, _ in sections(out)]
    assert len(files) == len(set(files)) == 12, files
    assert all(Path(name).name == name and name.endswith(".json") for name in files), files


def test_output_dir_writes_each_document_to_the_file_its_heading_names(tmp_path: Path) -> None:
    _, printed, _ = run_policy(tmp_path, WALKTHROUGH)
    folder = tmp_path / "policies"
    context = tmp_path / "cdk.json"
    run = subprocess.run(
        [str(Path(sys.executable).with_name("ferry")), "policy", "--context", str(context)]
        + ["--account", FERRY_ACCOUNT, "--region", "eu-west-1", "--output-dir", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    headings = [line[2:] for line in run.stdout.splitlines() if line.startswith("# ")]
    expected = sections(printed)
    assert len(headings) == len(expected)
    for heading, (stdout_heading, document) in zip(headings, expected, strict=True):
        path = Path(named_file(heading))
        assert path.parent == folder, heading
        if document is None:  # the notification configuration: its command writes the file
            assert not path.exists(), heading
            assert heading == stdout_heading.replace(path.name, str(path)), heading
            continue
        assert json.loads(path.read_text()) == document, heading
        assert heading == stdout_heading.replace(f"file://{path.name}", f"file://{path}")
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        Path(named_file(h)).name for h in headings if not h.startswith("S3 notification")
    )


def test_all_versions_grants_listing_versions_within_the_prefixes_and_reading_versioning(
    tmp_path: Path,
) -> None:
    """An all_versions job lists versions on both sides and reads both buckets' versioning
    (pipeline/history_keys.py); the documents grant that only when asked (--all-versions)."""
    _, out, _ = run_policy(tmp_path, WALKTHROUGH)
    assert "s3:ListBucketVersions" not in out and "s3:GetBucketVersioning" not in out

    code, out, _ = run_policy(tmp_path, WALKTHROUGH, "--all-versions")

    assert code == 0
    printed = sections(out)
    for side, verb, prefix in (("source", "Read", "camera/*"), ("destination", "Write", "replica/*")):
        policy = next(d for h, d in printed if h.startswith(f"Bucket policy for the {side}"))
        by_sid = {st["Sid"]: st for st in policy["Statement"]}
        listing = by_sid[f"Ferry{verb}List"]
        assert listing["Action"] == ["s3:ListBucket", "s3:ListBucketVersions"], side
        assert listing["Condition"]["StringLike"] == {"s3:prefix": [prefix]}, side
        versioning = by_sid[f"Ferry{verb}Versioning"]
        assert versioning["Action"] == ["s3:GetBucketVersioning"], side
        assert versioning["Resource"].endswith(":::" + ("photos-a" if side == "source" else "photos-b"))
        assert "s3:prefix" not in json.dumps(versioning.get("Condition", {})), side
        assert grammar_errors(policy, resource_based=True) == [], side
    permissions = next(d for h, d in printed if h.startswith(f"Permissions policy for {WRITER}"))
    actions = {a for st in permissions["Statement"] for a in st["Action"]}
    assert {"s3:ListBucketVersions", "s3:GetBucketVersioning"} <= actions


def test_marks_are_deleted_by_version_and_object_lock_defaults_read(tmp_path: Path) -> None:
    """Upload marks leave nothing in a versioned destination because they are deleted by their
    version id (s3:DeleteObjectVersion on the marks prefix only), and no mark is written where
    Object Lock's default retention would keep it (s3:GetBucketObjectLockConfiguration on the
    destination bucket): both the bucket policy and the writer role's permissions grant them."""
    code, out, err = run_policy(tmp_path, WALKTHROUGH)
    assert code == 0, err
    printed = sections(out)
    marks, bucket = "arn:aws:s3:::photos-b/.ferry/uploads/*", "arn:aws:s3:::photos-b"
    policy = next(d for h, d in printed if h.startswith("Bucket policy for the destination"))
    permissions = next(d for h, d in printed if h.startswith(f"Permissions policy for {WRITER}"))
    for document in (policy, permissions):
        by_sid = {st["Sid"]: st for st in document["Statement"]}
        assert by_sid["FerryWriteMarks"]["Action"] == [
            "s3:PutObject",
            "s3:GetObject",
            "s3:DeleteObject",
            "s3:DeleteObjectVersion",
        ]
        assert as_list(by_sid["FerryWriteMarks"]["Resource"]) == [marks]
        assert by_sid["FerryReadObjectLock"]["Action"] == ["s3:GetBucketObjectLockConfiguration"]
        assert as_list(by_sid["FerryReadObjectLock"]["Resource"]) == [bucket]
        granted = [st for st in document["Statement"] if "s3:DeleteObjectVersion" in st["Action"]]
        assert {r for st in granted for r in as_list(st["Resource"])} <= {
            marks,
            "arn:aws:s3:::photos-b/replica/*",  # the workers' own copies, deleted by version if unproved
        }
    assert grammar_errors(policy, resource_based=True) == []
    assert grammar_errors(permissions, resource_based=False) == []


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
