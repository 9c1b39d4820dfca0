"""A stack whose settings reserve Lambda concurrency for CopyBatch and RecordFailure.

A stack of its own (TEST_CONTEXT plus the reservations), so the main template tests keep their
exact expectations. AWS refuses a reservation that leaves fewer than 100 unreserved, and the
account's quota is not known at synth (new accounts get as little as 10): synth says what the
deploy needs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from cdk_support import TEST_CONTEXT, load_app_module, resources

CONTEXT: dict[str, Any] = {
    **TEST_CONTEXT,
    "copy_reserved_concurrency": 50,
    "record_failure_reserved_concurrency": 5,
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    import aws_cdk as cdk
    from aws_cdk.assertions import Annotations, Template

    tmp = tmp_path_factory.mktemp("cdk-concurrency")
    app = cdk.App(outdir=str(tmp / "cdk.out"), context={"ferry": CONTEXT, "aws:cdk:bundling-stacks": []})
    stack = load_app_module().build(app)
    template = Template.from_stack(stack).to_json()  # synthesizes: cdk-nag errors fail here
    return SimpleNamespace(stack=stack, template=template, annotations=Annotations.from_stack(stack))


def reserved(template: dict[str, Any]) -> dict[str, Any]:
    return {
        lid.rstrip("0123456789ABCDEF"): r["Properties"].get("ReservedConcurrentExecutions")
        for lid, r in resources(template, "AWS::Lambda::Function").items()
    }


def test_the_settings_reservations_are_the_functions(built: SimpleNamespace) -> None:
    found = {name: count for name, count in reserved(built.template).items() if count is not None}
    assert found == {"CopyBatch": 50, "RecordFailure": 5}
    prepare = next(
        r["Properties"]
        for lid, r in resources(built.template, "AWS::Lambda::Function").items()
        if lid.startswith("Prepare")
    )
    assert prepare["Environment"]["Variables"]["FERRY_COPY_RESERVED_CONCURRENCY"] == "50"  # its cap


def test_synth_says_what_quota_the_reservations_need(built: SimpleNamespace) -> None:
    from aws_cdk.assertions import Match

    built.annotations.has_warning(
        "*", Match.string_like_regexp(r"CopyBatch reserves 50 and RecordFailure reserves 5: .* at least 155")
    )
