"""`ferry policy`'s printed commands run as printed: each heading's command (from `aws` to the
end of the line) is pasted into bash and run with the real AWS CLI against moto's server, as
the other account's administrator would run it. The notification command keeps the bucket's
other notifications (a configuration put alone replaces them all), and the EventBridge rule
and its target are made by the two commands printed for them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from conftest import REPO, S3Server

FERRY_ACCOUNT, SOURCE_ACCOUNT = "999988887777", "111122223333"
MOTO_ACCOUNT = "123456789012"  # the account moto's server answers as
REGION = "eu-west-1"


def aws_cli() -> str:
    """The AWS CLI the tests install (requirements.txt), else one on PATH."""
    found = shutil.which("aws", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    if not found:
        pytest.fail("the AWS CLI is missing: `make test` installs it into .venv (requirements.txt)")
    return found


def ferry_here(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """This checkout's `ferry` (python -m), whatever an installed `ferry` would run."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "functions")}
    return subprocess.run(
        [sys.executable, "-m", "ferry.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def printed_commands(stdout: str) -> dict[str, str]:
    """Each heading's command, by the heading's text before it."""
    commands = {}
    for line in stdout.splitlines():
        if line.startswith("# ") and ": aws " in line:
            what, _, command = line[2:].partition(": aws ")
            commands[what] = "aws " + command
    return commands


def run_in_bash(command: str, moto: S3Server, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command as pasted into bash, `aws` being the CLI, talking to moto's server."""
    folder = str(Path(aws_cli()).parent)
    env = {
        **os.environ,
        "PATH": os.pathsep.join([folder, os.environ["PATH"]]),
        "AWS_ENDPOINT_URL": moto.url,
        "AWS_DEFAULT_REGION": REGION,
    }
    return subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def bucket_notifications(bucket: str) -> Any:
    """What moto's server holds for the bucket (its GET leaves EventBridgeConfiguration out)."""
    from moto.s3.models import s3_backends

    return s3_backends[MOTO_ACCOUNT]["aws"].get_bucket(bucket).notification_configuration


@pytest.mark.parametrize("output_dir", [False, True])
def test_the_printed_notification_and_rule_commands_run_as_printed_and_keep_other_notifications(
    motoserver: S3Server, tmp_path: Path, output_dir: bool
) -> None:
    bucket = f"photos-{uuid.uuid4().hex[:10]}"
    s3 = motoserver.client
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    queue = f"arn:aws:sqs:{REGION}:{SOURCE_ACCOUNT}:uploads"
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={
            "QueueConfigurations": [{"Id": "theirs", "QueueArn": queue, "Events": ["s3:ObjectCreated:*"]}]
        },
    )
    context = tmp_path / "cdk.json"
    context.write_text(
        json.dumps(
            {
                "context": {
                    "ferry": {
                        "sources": [{"bucket": bucket, "prefix": "camera/", "owner": SOURCE_ACCOUNT}],
                        "destinations": [{"bucket": "backup", "owner": FERRY_ACCOUNT}],
                    }
                }
            }
        )
    )
    extra = ["--output-dir", str(tmp_path / "policies")] if output_dir else []
    done = ferry_here(
        "policy",
        "--context",
        str(context),
        "--account",
        FERRY_ACCOUNT,
        "--region",
        REGION,
        *extra,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    if not output_dir:  # the documents, saved as the headings name them
        for block in re.split(r"^# ", done.stdout, flags=re.M)[1:]:
            heading, _, body = block.partition("\n")
            names = [w for w in heading.split() if w.startswith("file://")]
            if body.strip() and names:
                (tmp_path / names[-1].removeprefix("file://")).write_text(body)
    commands = printed_commands(done.stdout)
    notification = [c for w, c in commands.items() if w.startswith("S3 notification")]
    assert len(notification) == 1, done.stdout
    ran = run_in_bash(notification[0], motoserver, tmp_path)
    assert ran.returncode == 0, f"{notification[0]}\n{ran.stdout}{ran.stderr}"
    kept = s3.get_bucket_notification_configuration(Bucket=bucket)
    assert [q["QueueArn"] for q in kept.get("QueueConfigurations", [])] == [queue], kept
    assert bucket_notifications(bucket).event_bridge == {}

    for what, command in commands.items():  # every printed command is one bash command line
        checked = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
        assert checked.returncode == 0, f"{what}: {command}\n{checked.stderr}"
    rule = [c for w, c in commands.items() if w.startswith("EventBridge rule")]
    assert rule, done.stdout
    for command in rule:
        ran = run_in_bash(command, motoserver, tmp_path)
        assert ran.returncode == 0, f"{command}\n{ran.stdout}{ran.stderr}"
    events = boto3.client("events", endpoint_url=motoserver.url, region_name=REGION)
    name = f"ferry-forward-{bucket}"
    pattern = json.loads(events.describe_rule(Name=name)["EventPattern"])
    assert pattern["detail"]["bucket"]["name"] == [bucket]
    assert pattern["detail-type"] == ["Object Created"]
    (target,) = events.list_targets_by_rule(Rule=name)["Targets"]
    assert target["Arn"] == f"arn:aws:events:{REGION}:{FERRY_ACCOUNT}:event-bus/default"
    assert target["RoleArn"] == f"arn:aws:iam::{SOURCE_ACCOUNT}:role/ferry-forward-s3-events"
