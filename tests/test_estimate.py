"""The estimate's arithmetic against cases computed by hand, and its constants tied to the code
and the state machines they describe (a change there breaks these tests)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from ferry.costs import durations, inputs, requests, workload
from ferry.costs import estimate as model
from ferry.costs.estimate import estimate
from ferry.costs.inputs import Assumptions, PipelineShape
from ferry.costs.requests import object_requests
from ferry.costs.workload import Workload
from ferry.engine.compare.dest_listing import MIN_WINDOW
from ferry.engine.proofs.source import NEVER_ARCHIVED
from ferry.limits import GiB, KiB, MiB
from ferry.pipeline.ledger.dynamodb_checkpoints import PARTS_PER_ITEM
from ferry.pipeline.settings import PipelineSettings

REPO = Path(__file__).resolve().parents[1]
PUT = 0.005 / 1000
GET = 0.0004 / 1000


def _server_side_seconds(objects: int, size: int, case: str = "expected") -> float:
    """One worker's seconds for small server-side copies, as the model reckons them: the slower
    of the measured CPU per object and the assumed bytes S3 copies per second (100-400 MiB/s),
    in the fast case, the slow case (half the CPU-bound rate, the slower byte rate) or the
    expected case (the geometric mean of the two)."""
    cpu = inputs.MEASURED_CPU_PER_SMALL_OBJECT
    per_object = {"fast": cpu, "slow": 2 * cpu, "expected": cpu / math.sqrt(0.5)}[case]
    per_byte = {"fast": 400 * MiB, "slow": 100 * MiB, "expected": math.sqrt(100 * 400) * MiB}[case]
    return max(objects * per_object, objects * size / per_byte)


def line(result: Any, service: str, what: str) -> Any:
    lines = [x for x in result.lines if x.service == service]
    exact = [x for x in lines if x.what == what]
    (found,) = exact or [x for x in lines if x.what.startswith(what + " ")]
    return found


# -- tied to the code ---------------------------------------------------------------------------


def states(name: str) -> dict[str, Any]:
    return json.loads((REPO / "statemachine" / name).read_text())


def walk(
    machine: dict[str, Any],
    decisions: dict[str, list[str]] | None = None,
    errors: dict[str, list[str]] | None = None,
) -> list[str]:
    """The states one execution enters, from StartAt to an end. A Choice takes its Default
    unless `decisions` names the branch (each in turn); Task/Map/Pass follow Next, unless
    `errors` names the error the state raises (each in turn): then the first Catch whose
    ErrorEquals holds it (or States.ALL), as Step Functions picks a catcher."""
    decisions = {k: list(v) for k, v in (decisions or {}).items()}
    errors = {k: list(v) for k, v in (errors or {}).items()}
    path, name = [], machine["StartAt"]
    while True:
        state = machine["States"][name]
        path.append(name)
        if state["Type"] == "Choice":
            branches = {c["Next"] for c in state.get("Choices", [])}
            wanted = decisions.get(name)
            name = wanted.pop(0) if wanted else state["Default"]
            assert name in branches | {state["Default"]}, f"{name} is not a branch of {path[-1]}"
            continue
        if errors.get(name):
            error = errors[name].pop(0)
            catchers = [c for c in state["Catch"] if {error, "States.ALL"} & set(c["ErrorEquals"])]
            name = catchers[0]["Next"]
            continue
        if state["Type"] in ("Succeed", "Fail") or state.get("End"):
            return path
        name = state["Next"]


def test_parent_transitions_are_the_states_of_its_normal_path() -> None:
    path = walk(
        states("ferry.asl.json"), {"HowToList": ["CopyPrefix"], "DidEveryObjectSucceed": ["JobSucceeded"]}
    )
    assert path[-1] == "JobSucceeded" and states("ferry.asl.json")["States"]["CopyPrefix"]["Type"] == "Map"
    assert len(path) == model.PARENT_TRANSITIONS


def test_child_transitions_per_batch_pass_and_large_object_follow_the_asl() -> None:
    child = states("copy_batch.asl.json")
    one_pass = walk(child)
    assert one_pass == ["CopyBatch"]
    assert len(one_pass) == model.CHILD_TRANSITIONS
    handed_over = {"CopyBatch": ["FerryHandOver"]}
    two_passes = walk(child, {"WhatIsLeft": ["NextPass"]}, handed_over)
    assert two_passes == ["CopyBatch", "ResumeHandOver", "WhatIsLeft", "NextPass", "CopyBatch"]
    assert len(two_passes) - len(one_pass) == model.EXTRA_PASS_TRANSITIONS
    with_large = walk(child, {"WhatIsLeft": ["CopyLargeObjects"]}, handed_over)
    assert with_large == ["CopyBatch", "ResumeHandOver", "WhatIsLeft", "CopyLargeObjects", "BatchDone"]
    assert len(with_large) - len(one_pass) == model.LARGE_BATCH_TRANSITIONS
    # Each large object is a child execution of its own (a Distributed Map in the child): its
    # start, as the parent's Map's are, then its own path.
    large_objects = child["States"]["CopyLargeObjects"]["ItemProcessor"]
    assert large_objects["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
    per_large_object = walk(large_objects)
    assert model.CHILD_START_TRANSITIONS + len(per_large_object) == model.LARGE_OBJECT_TRANSITIONS
    # The Distributed Map is charged one transition per child execution it starts
    # (docs.aws.amazon.com/step-functions/latest/dg/concepts-transitions.html).
    assert model.CHILD_START_TRANSITIONS == 1


def test_a_hand_over_is_caught_never_retried() -> None:
    """FerryHandOver is not a failure: no retrier of CopyBatch may match it (a retry would copy
    the pass again and cost transitions), and its catcher must come before States.ALL's."""
    copy_batch = states("copy_batch.asl.json")["States"]["CopyBatch"]
    for retrier in copy_batch["Retry"]:
        assert not {"FerryHandOver", "States.ALL", "States.TaskFailed"} & set(retrier["ErrorEquals"])
    first = copy_batch["Catch"][0]
    assert first["ErrorEquals"] == ["FerryHandOver"] and first["Next"] == "ResumeHandOver"
    assert first["ResultPath"] == "$.handed_over", "the batch's items stay in the state beside the error"


def test_pipeline_shape_defaults_are_the_pipeline_settings_defaults() -> None:
    defaults = {
        f: PipelineSettings.__dataclass_fields__[f].default for f in PipelineShape.__dataclass_fields__
    }
    assert defaults == {f: getattr(PipelineShape(), f) for f in PipelineShape.__dataclass_fields__}


def test_pipeline_shape_reads_cdk_json_as_the_pipeline_does() -> None:
    context = json.loads((REPO / "cdk.json").read_text())["context"]["ferry"]
    settings = PipelineSettings.from_context(context)
    shape = PipelineShape.from_cdk_json(str(REPO / "cdk.json"))
    assert {f: getattr(shape, f) for f in PipelineShape.__dataclass_fields__} == {
        f: getattr(settings, f) for f in PipelineShape.__dataclass_fields__
    }


def test_classes_copied_from_the_listing_are_the_engines() -> None:
    assert requests.LISTING_CLASSES == NEVER_ARCHIVED


# -- by hand ------------------------------------------------------------------------------------


def test_a_million_objects_of_500_kb_server_side() -> None:
    result = estimate(Workload.uniform(1_000_000, 500_000))

    # Items of 152 bytes (a 60-character key, one-letter names) and a comma each, in 153,600
    # bytes less the child input's wrapper (123): 1,003 < 10,000: the bytes cap binds.
    assert workload.item_json_bytes(60, 500_000, "STANDARD") == 152 and workload.BATCH_WRAPPER_BYTES == 123
    assert result.items_per_batch == (153_600 - 123 + 1) // 153 == 1_003
    assert result.batches == 998 and result.passes == 998  # 1,000,000 / 1,003, rounded up
    # The destination listed per batch: 997 batches of 1,003 (2 pages of 1,000), one of 9.
    assert result.requests == {
        "CopyObject": 1_000_000,
        "ListObjectsV2": 1_000 + 997 * 2 + 1,
        "PutObject": 998 + 3,
    }
    assert line(result, "S3 requests", "CopyObject").usd == pytest.approx(5.00)
    assert line(result, "S3 requests", "ListObjectsV2").usd == pytest.approx(2_995 * PUT)
    assert line(result, "S3 requests", "PutObject (reports)").usd == pytest.approx(1_001 * PUT)
    # The slower of CPU-bound (the measured CPU per object, at the geometric mean of 1x and 0.5x
    # that rate; 1,769 MB gives a whole vCPU) and bytes-bound (S3 copying 100-400 MiB/s for one
    # worker, assumed: geometric mean 200 MiB/s), + 0.5 s per pass; 1,769 MB.
    seconds = _server_side_seconds(1_000_000, 500_000)
    gb_seconds = 1_769 / 1_024 * (seconds + 998 * 0.5)
    assert line(result, "Lambda", "CopyBatch duration").quantity == pytest.approx(gb_seconds)
    assert line(result, "Lambda", "CopyBatch duration").usd == pytest.approx(gb_seconds * 0.0000133334)
    assert line(result, "Lambda", "invocations").quantity == 1_000
    # 6 parent + 998 x (1 child start + CopyBatch) = 2,002 transitions.
    assert line(result, "Step Functions", "STANDARD state transitions").quantity == 2_002
    assert line(result, "Step Functions", "STANDARD state transitions").usd == pytest.approx(
        2_002 * 0.025 / 1000
    )
    assert line(result, "DynamoDB", "write request units").quantity == 998 + 3
    # The job read once per worker (100 at once), Finalize's tally: 998 x 600 B / 4 KB.
    assert line(result, "DynamoDB", "read request units").quantity == 100 + 147 + 2
    total = 5.00 + 2_995 * PUT + 1_001 * PUT + gb_seconds * 0.0000133334 + 1_000 * 0.2e-6
    total += 2_002 * 0.025e-3 + 1_001 * 0.625e-6 + 249 * 0.125e-6
    assert result.total == pytest.approx(total)
    # Orchestration: everything but the engine's CopyObjects.
    assert result.orchestration == pytest.approx(total - 5.00)
    assert result.orchestration_per_million == pytest.approx(total - 5.00)
    batch_ops = result.alternatives["S3 Batch Operations (Copy)"]
    assert sum(x.usd for x in batch_ops) == pytest.approx(0.25 + 1.00 + 5.00)
    # Fast and slow cases; 998 passes of 0.5 s; 100 workers; + 30 s.
    assert result.duration_seconds == pytest.approx(
        (
            (_server_side_seconds(1_000_000, 500_000, "fast") + 998 * 0.5) / 100 + 30,
            (_server_side_seconds(1_000_000, 500_000, "slow") + 998 * 0.5) / 100 + 30,
        )
    )


def test_batches_shrink_when_the_bytes_cap_binds() -> None:
    shape = PipelineShape(max_input_bytes_per_batch=20_000)
    result = estimate(Workload.uniform(1_000, 500_000), shape)
    assert result.items_per_batch == (20_000 - 123 + 1) // 153 == 129
    assert result.batches == 8  # 1,000 / 129, rounded up


def test_multipart_sources_with_md5_etags_are_copied_in_their_layout() -> None:
    result = estimate(Workload.uniform(1_000, 100 * MiB))
    # 100 MiB in 8 MiB parts: 13. HEAD + 2 layout HEADs, Create, 13 UploadPartCopy, Complete, tags.
    assert result.requests["HeadObject"] == 3_000
    assert result.requests["UploadPartCopy"] == 13_000
    assert result.requests["CreateMultipartUpload"] == result.requests["CompleteMultipartUpload"] == 1_000
    assert result.requests["GetObjectTagging"] == 1_000
    assert "CopyObject" not in result.requests
    # One pass each: a multipart copy reads its (empty) checkpoint and, done, lists it to delete
    # it, with nothing saved to delete; 2 markers; Finalize's tally of 2 markers.
    assert line(result, "DynamoDB", "write request units").quantity == 2 + 3
    assert line(result, "DynamoDB", "read request units").quantity == 2 + 2 * 1_000 + 1 + 2
    # Batches of 764 and 236: 1,000 x 100 MiB at 200 MiB/s = 500 s over 2 batches, one pass each
    # (810 s usable).
    assert result.passes == 2
    assert line(result, "Lambda", "CopyBatch duration").quantity == pytest.approx(
        1_769 / 1_024 * (1_000 * 0.5 + 2 * 0.5)
    )


def test_multipart_sources_with_a_full_object_crc_take_one_copy() -> None:
    result = estimate(Workload.uniform(1_000, 100 * MiB), a=Assumptions(source_full_checksum=True))
    assert {k: v for k, v in result.requests.items() if k not in ("ListObjectsV2", "PutObject")} == {
        "HeadObject": 1_000,
        "CopyObject": 1_000,
    }


def test_streamed_small_objects_get_put_and_tags() -> None:
    work = Workload.uniform(1_000, 100 * KiB)
    assert object_requests(100 * KiB, "STANDARD", Assumptions(mode="stream")) == {
        "GetObject": 1,
        "PutObject": 1,
        "GetObjectTagging": 1,
    }
    result = estimate(work, a=Assumptions(mode="stream", preserve_tags=False))
    assert result.requests["GetObject"] == 1_000
    assert result.requests["PutObject"] == 1_000 + 1 + 3  # the copies, then 1 batch report + 3
    assert "GetObjectTagging" not in result.requests
    assert line(result, "S3 requests", "GetObject").usd == pytest.approx(1_000 * GET)


def test_a_20_gib_object_goes_to_fargate_in_90_second_passes() -> None:
    result = estimate(Workload.uniform(1, 20 * GiB))
    assert result.large_objects == 1
    # 20 GiB / 200 MiB/s = 102.4 s: two 90-second passes, one checkpoint save between them.
    # The second pass HEADs the source (3) and the destination again, reads the tags again and
    # lists the upload's 2,560 parts (3 pages of 1,000).
    assert result.requests["UploadPartCopy"] == 2_560
    assert result.requests["HeadObject"] == 3 + 1 + 4
    assert result.requests["GetObjectTagging"] == 2
    assert result.requests["ListParts"] == 3
    hours = (102.4 + 60) / 3600
    assert line(result, "Fargate", "vCPU-hours").quantity == pytest.approx(2 * hours)
    assert line(result, "Fargate", "vCPU-hours").usd == pytest.approx(2 * hours * 0.03238 * 0.3)  # Spot: -70%
    assert line(result, "Fargate", "GB-hours").usd == pytest.approx(4 * hours * 0.00356 * 0.3)
    # 6 parent; the child's start and CopyBatch; its hand-over to Fargate (ResumeHandOver,
    # WhatIsLeft, CopyLargeObjects, BatchDone); the object's child start and CopyLargeObject.
    assert line(result, "Step Functions", "STANDARD state transitions").quantity == 6 + 2 + 4 + 2
    assert line(result, "Lambda", "invocations").quantity == 1 + 1 + 2  # the pass, its resume
    # The ledger's units: test_a_checkpoint_is_saved_where_its_pass_ends_read_by_the_next_pass_...
    # The batch's CopyBatch pass first (its overhead), then the task (its start-up, then the copy).
    first = durations.PASS_OVERHEAD_SECONDS
    assert result.duration_seconds == pytest.approx((first + 51.2 + 60 + 30, first + 204.8 + 60 + 30))


def test_cross_region_and_the_alternatives() -> None:
    result = estimate(Workload.uniform(1_000, 10**9), a=Assumptions(cross_region=True))
    assert line(result, "Data transfer", "between regions").usd == pytest.approx(1_000 * 0.02)  # $20
    batch_ops = sum(x.usd for x in result.alternatives["S3 Batch Operations (Copy)"])
    assert batch_ops == pytest.approx(0.25 + 1_000 * 1e-6 + 1_000 * PUT + 20)
    datasync = sum(x.usd for x in result.alternatives["DataSync"])
    assert datasync == pytest.approx(1_000 * 0.0125 + 2 * PUT + 3_000 * GET + 1_000 * PUT + 20)
    replication = sum(x.usd for x in result.alternatives["S3 Batch Replication"])
    assert replication == pytest.approx(0.25 + 1_000 * 1e-6 + 1_000 * PUT + 20)


def test_archived_objects_are_only_headed_unless_restored() -> None:
    result = estimate(Workload.uniform(10, 1_000_000, "GLACIER"))
    assert result.skipped_archived == 10
    assert {k: v for k, v in result.requests.items() if k not in ("ListObjectsV2", "PutObject")} == {
        "HeadObject": 10
    }
    restored = estimate(Workload.uniform(10, 10**9, "DEEP_ARCHIVE"), a=Assumptions(restore="bulk"))
    assert restored.skipped_archived == 0
    assert line(restored, "S3 restore", "DEEP_ARCHIVE bulk retrieval requests").usd == pytest.approx(
        10 * 0.025 / 1000
    )
    assert line(restored, "S3 restore", "DEEP_ARCHIVE bulk retrieval").quantity == 10


def test_writes_are_priced_at_the_destination_class() -> None:
    result = estimate(Workload.uniform(1_000, 1_000), a=Assumptions(storage_class="GLACIER"))
    assert line(result, "S3 requests", "CopyObject").usd == pytest.approx(1_000 * 0.03 / 1000)


def test_the_histogram_stays_bounded() -> None:
    work = Workload()
    for n in range(200_000):
        work.add(1 + (n * 7919) % (5 * GiB), "STANDARD" if n % 2 else "STANDARD_IA", f"k/{n}")
    assert work.objects == 200_000
    assert len(work.bins) <= 2 * 8 * 33  # classes x bins per doubling x doublings up to 5 GiB


def test_a_streamed_single_part_source_without_checksum_goes_in_one_put_up_to_the_memory_limit() -> None:
    stream = Assumptions(mode="stream", source_multipart_threshold=5 * GiB)  # single-part sources
    # 100 MiB, MD5 ETag only: one GET and one PutObject keep the ETag (limit: 1,769 MB / 3).
    assert object_requests(100 * MiB, "STANDARD", stream, 1, False) == {
        "HeadObject": 1,
        "GetObject": 1,
        "PutObject": 1,
        "GetObjectTagging": 1,
    }
    # With a full-object CRC it goes in 8 MiB parts: 13 GETs and UploadParts.
    crc = object_requests(100 * MiB, "STANDARD", stream, 1, True)
    assert crc["GetObject"] == crc["UploadPart"] == 13 and crc["HeadObject"] == 1
    # Above the limit (1 GiB > 682 MiB), without CRC: parts too.
    assert object_requests(GiB, "STANDARD", stream, 1, False)["UploadPart"] == 128


def test_memory_limit_default_is_the_lambdas() -> None:
    settings = PipelineSettings.from_context(json.loads((REPO / "cdk.json").read_text())["context"]["ferry"])
    assert Assumptions().memory_limit == settings.lambda_memory_limit


def test_no_line_counts_requests_that_are_never_sent() -> None:
    """A multipart copy that finishes in one pass sends no ListParts: no line says 0 of them."""
    result = estimate(Workload.uniform(1_000, 100 * MiB))
    assert "ListParts" not in result.requests
    assert all(x.quantity > 0 for x in result.lines if x.service == "S3 requests")


def test_a_batch_of_fewer_than_eight_heads_the_destination_instead_of_listing_it() -> None:
    assert model.DEST_LISTING_MIN_WINDOW == MIN_WINDOW
    # 1,021 objects of 1,000 bytes (items of 150 bytes): a batch of 1,016 (two LISTs of the
    # destination's 1,000-key pages) and one of 5 (a HEAD each), plus the Map's LIST.
    result = estimate(Workload.uniform(1_021, 1_000))
    assert result.items_per_batch == 1_016
    assert result.requests["ListObjectsV2"] == 2 + 2
    assert result.requests["HeadObject"] == 5


# -- batches as the Distributed Map makes them ---------------------------------------------------


# One item of the s3:listObjectsV2 reader as the Step Functions developer guide documents it
# (input-output-itemreader.html): `Etag` with its quotes, LastModified in epoch seconds.
def reader_item(key: str, size: int) -> dict[str, Any]:
    return {
        "Etag": '"0123456789abcdef0123456789abcdef"',
        "Key": key,
        "LastModified": 1668699881,
        "Size": size,
        "StorageClass": "STANDARD",
    }


def selected(item: dict[str, Any]) -> Any:
    """What CopyPrefix hands the ItemBatcher for one reader item: its ItemSelector evaluated
    against `$$.Map.Item.Value` (the item itself where the Map has no ItemSelector)."""
    selector = states("ferry.asl.json")["States"]["CopyPrefix"].get("ItemSelector")
    if selector is None:
        return item
    out = {}
    for name, path in selector.items():
        assert name.endswith(".$") and path.startswith("$$.Map.Item.Value."), (name, path)
        out[name[:-2]] = item[path.removeprefix("$$.Map.Item.Value.")]
    return out


def test_item_bytes_are_what_the_map_batches() -> None:
    from ferry.listed_items import LISTED_FIELDS

    selector = states("ferry.asl.json")["States"]["CopyPrefix"]["ItemSelector"]
    assert selector == {f"{short}.$": f"$$.Map.Item.Value.{name}" for short, name in LISTED_FIELDS.items()}
    for key in ("k" * 60, "in/" + "日" * 100):
        item = selected(reader_item(key, 500_000))
        size = len(json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode())
        assert workload.item_json_bytes(key, 500_000, "STANDARD") == size, key


def test_items_per_batch_is_what_the_item_batcher_makes() -> None:
    """The estimate's batch size equals the batches the ItemBatcher's rule cuts (the child's
    whole input `{"Items": [...], "BatchInput": ...}` within MaxInputBytesPerBatch, as
    item_reader.batches and the test harness count it), for the BatchInput the ASL builds."""
    from ferry.pipeline.item_reader import batches

    # A job id is the execution name (Prepare), a 36-character UUID unless one is given.
    batch_input = {"job": {"job_id": "0" * 36, "limits": {"large_object_concurrency": 2}}}
    template = states("ferry.asl.json")["States"]["CopyPrefix"]["ItemBatcher"]["BatchInput"]
    assert template == {
        "job": {
            "job_id.$": "$.job.job_id",
            "limits": {"large_object_concurrency.$": "$.job.limits.large_object_concurrency"},
        }
    }, "the BatchInput below is the ASL's"
    for cap in (150 * KiB, 20_000):
        shape = PipelineShape(max_input_bytes_per_batch=cap)
        items = [selected(reader_item(f"{n:060d}", 500_000)) for n in range(5_000)]
        first = next(batches(items, max_items=10_000, max_bytes=cap, batch_input=batch_input))
        result = estimate(Workload.uniform(5_000, 500_000, key_length=60), shape)
        assert result.items_per_batch == len(first), cap


def test_the_limit_that_binds_at_a_billion_objects_a_day_follows_the_jobs_shape() -> None:
    """One COPY per small object: one destination prefix takes 3,500 a second, under the
    11,574 a billion a day asks; the workers, bounded by max_concurrency, follow the measured
    CPU per object."""
    result = estimate(Workload.uniform(1_000_000, 500_000))
    limits = result.rate_limits
    assert limits is not None and limits.objects_per_second == pytest.approx(1e9 / 86_400)
    by_name = {x.what.split(" (")[0]: x for x in limits.limits}
    assert by_name["S3 writes to one destination prefix"].objects_per_second == pytest.approx(3_500)
    assert by_name["S3 writes to one destination prefix"].needs == "4 partitioned prefixes"
    assert limits.binding is by_name["S3 writes to one destination prefix"]
    per_worker = 1_000_000 / (_server_side_seconds(1_000_000, 500_000) + 998 * 0.5)
    assert by_name["Map Run children at once"].objects_per_second == pytest.approx(100 * per_worker)
    # The default quota of 1,000, less the tenth Prepare's cap leaves to RecordFailure, Finalize
    # and the account's other functions.
    assert by_name["Lambda concurrency"].objects_per_second == pytest.approx(900 * per_worker)
    # Fewer workers than the rate needs: the Map Run's concurrency binds instead.
    few = estimate(Workload.uniform(1_000_000, 500_000), PipelineShape(max_concurrency=10))
    assert few.rate_limits is not None and few.rate_limits.binding.what.startswith("Map Run children")
    # Streamed at the assumed 15-50 objects/s a worker: 100 workers bind before S3 does.
    streamed = estimate(Workload.uniform(1_000, 100 * KiB), a=Assumptions(mode="stream", preserve_tags=False))
    assert streamed.rate_limits is not None
    assert streamed.rate_limits.binding.what.startswith("Map Run children")
    assert streamed.rate_limits.binding.objects_per_second < 100 * math.sqrt(15 * 50)  # + 0.5 s a pass


def test_the_estimate_is_made_for_the_accounts_real_lambda_quota() -> None:
    """An account of 10 concurrent Lambdas (a new account's reduced quota): Prepare would run 8
    children at once, not the setting's 100, and so does the estimate, in its limits and its
    duration; it says where the quota came from and why fewer children run."""
    from ferry.costs.inputs import LambdaQuota
    from ferry.quotas.lambda_concurrency import AccountConcurrency

    work = Workload.uniform(1_000_000, 500_000)
    small = LambdaQuota(AccountConcurrency(10, 10), source="account", where="eu-west-1")
    result = estimate(work, lambda_quota=small)
    default = estimate(work)

    assert result.lambda_concurrency == {
        "concurrent_executions": 10,
        "unreserved_concurrent_executions": 10,
        "source": "account",
        "max_concurrency": 8,
        "asked": 100,
    }
    assert default.lambda_concurrency is not None and default.lambda_concurrency["max_concurrency"] == 100
    assert result.rate_limits is not None
    by_name = {x.what.split(" (")[0]: x for x in result.rate_limits.limits}
    per_worker = 1_000_000 / (_server_side_seconds(1_000_000, 500_000) + 998 * 0.5)
    assert by_name["Map Run children at once"].objects_per_second == pytest.approx(8 * per_worker)
    assert by_name["Lambda concurrency"].objects_per_second == pytest.approx(8 * per_worker)
    assert "10, the account's quota; 8 for the copies" in by_name["Lambda concurrency"].what
    # 8 workers, not 100 (each duration adds 30 s for Prepare, the Map's start and Finalize).
    assert result.duration_seconds[0] - 30 == pytest.approx((default.duration_seconds[0] - 30) * 100 / 8)
    assert any("account's quota in eu-west-1, 10 (10 unreserved)" in n for n in result.assumptions)
    assert any("max_concurrency 100 lowered to 8" in n for n in result.assumptions)
    assert any("default quota, 1,000, assumed" in n for n in default.assumptions)


def test_reservations_the_account_cannot_take_are_said_and_a_reservation_caps_the_children() -> None:
    from ferry.costs.inputs import LambdaQuota
    from ferry.quotas.lambda_concurrency import AccountConcurrency

    shape = PipelineShape(copy_reserved_concurrency=50, record_failure_reserved_concurrency=5)
    small = estimate(
        Workload.uniform(1_000, 500_000),
        shape,
        lambda_quota=LambdaQuota(AccountConcurrency(10, 10), source="account"),
    )
    assert any("cannot deploy in this account" in n and "at least 155" in n for n in small.assumptions)
    large = LambdaQuota(AccountConcurrency(1_000, 945), source="given")
    reserved = estimate(Workload.uniform(1_000, 500_000), shape, lambda_quota=large)
    assert reserved.lambda_concurrency is not None and reserved.lambda_concurrency["max_concurrency"] == 50
    assert not any("cannot deploy" in n for n in reserved.assumptions)


def test_large_objects_in_one_batch_run_fargate_max_concurrency_tasks_at_a_time() -> None:
    """A hundred objects of 5 TiB fit in one batch, and a batch runs at most
    fargate_max_concurrency of its large objects at once (CopyLargeObjects' MaxConcurrencyPath):
    two at a time by default, fifty rounds, not all hundred together (docs/limits.md)."""
    work = Workload.uniform(100, 5 * 1024 * GiB)
    server_side = Assumptions(mode="server-side")
    one = (5 * 1024 * 1024 / 400 + 60, 5 * 1024 * 1024 / 100 + 60)  # 400 and 100 MiB/s, its start-up
    two_at_a_time = estimate(work, a=server_side)
    assert two_at_a_time.batches == 1
    first = durations.PASS_OVERHEAD_SECONDS  # the batch's CopyBatch pass, before its large objects
    assert two_at_a_time.duration_seconds == pytest.approx(
        (first + 50 * one[0] + 30, first + 50 * one[1] + 30)
    )
    assert 7 * 86_400 < two_at_a_time.duration_seconds[0] < two_at_a_time.duration_seconds[1] < 31 * 86_400

    together = estimate(work, PipelineShape(fargate_max_concurrency=100), a=server_side)
    assert together.duration_seconds == pytest.approx((first + one[0] + 30, first + one[1] + 30))


def test_large_objects_spread_over_batches_run_in_each_of_them() -> None:
    """Forty batches each holding large objects run two of theirs at a time each: 80 at once."""
    shape = PipelineShape(max_items_per_batch=10)
    work = Workload.uniform(400, 20 * GiB)
    result = estimate(work, shape, a=Assumptions(mode="server-side"))
    assert result.batches == 40
    one = (20 * 1024 / 400 + 60, 20 * 1024 / 100 + 60)
    first = durations.PASS_OVERHEAD_SECONDS  # each batch's pass, 40 batches at once
    assert result.duration_seconds == pytest.approx(
        (first + 400 * one[0] / 80 + 30, first + 400 * one[1] / 80 + 30)
    )


def test_the_rate_limits_weigh_the_fargate_tasks_the_batches_may_run() -> None:
    """At a steady rate every batch the Map runs may run fargate_max_concurrency tasks: 100 x 2
    tasks, each copying one 20 GiB object in 102.4 s at the expected 200 MiB/s, after its 60 s
    start-up."""
    result = estimate(
        Workload.uniform(1_000, 20 * GiB), a=Assumptions(mode="server-side"), objects_per_day=86_400
    )
    assert result.rate_limits is not None
    (fargate,) = [x for x in result.rate_limits.limits if x.what.startswith("Fargate tasks at once")]
    assert fargate.what == "Fargate tasks at once (2 a batch, 200 in all)"
    assert fargate.objects_per_second == pytest.approx(200 / (102.4 + 60))
    assert fargate.needs == f"{math.ceil(102.4 + 60):,} Fargate tasks at once"  # one object a second
    small = estimate(Workload.uniform(1_000, 1 * MiB))
    assert small.rate_limits is not None
    assert not [x for x in small.rate_limits.limits if x.what.startswith("Fargate")]


def test_no_more_fargate_tasks_run_at_once_than_there_are_large_objects() -> None:
    """Three large objects over two batches of two: three tasks at once, not two batches x two."""
    result = estimate(
        Workload.uniform(3, 20 * GiB), PipelineShape(max_items_per_batch=2), a=Assumptions(mode="server-side")
    )
    assert result.batches == 2
    assert [n for n in result.assumptions if "Fargate task" in n][0].startswith("3 Fargate tasks at once")
    one = (20 * 1024 / 400 + 60, 20 * 1024 / 100 + 60)
    passes = 2 * durations.PASS_OVERHEAD_SECONDS / 2  # one pass a batch, two batches at once
    assert result.duration_seconds == pytest.approx((one[0] + passes + 30, one[1] + passes + 30))


def test_a_batch_copies_its_small_objects_before_its_large_ones_go_to_fargate() -> None:
    """In a batch the CopyBatch passes come first and CopyLargeObjects after (WhatIsLeft sends
    the large objects on once nothing else is left), so one batch's Lambda seconds and its
    Fargate rounds add up; they do not overlap."""
    work = Workload()
    work.add(200 * MiB, count=500)
    work.add(20 * GiB, count=4)
    result = estimate(work, a=Assumptions(mode="server-side"))
    assert result.batches == 1
    small = estimate(Workload.uniform(500, 200 * MiB), a=Assumptions(mode="server-side"))
    large = estimate(Workload.uniform(4, 20 * GiB), a=Assumptions(mode="server-side"))
    # Each alone: its own seconds and the job's 30 s edges; together: both, one pass fewer.
    for case in (0, 1):
        together = small.duration_seconds[case] + large.duration_seconds[case] - 30
        assert result.duration_seconds[case] == pytest.approx(
            together - durations.PASS_OVERHEAD_SECONDS, rel=1e-3
        )


def test_the_fargate_rate_limit_counts_the_tasks_the_batches_hold() -> None:
    """A batch whose large objects are fewer than fargate_max_concurrency runs only those: fifty
    large objects among 96 batches of 996 run 0.52 tasks a batch on average, not two."""
    work = Workload()
    work.add(1 * MiB, count=95_000)
    work.add(20 * GiB, count=50)
    result = estimate(work, a=Assumptions(mode="server-side"), objects_per_day=86_400)
    assert result.batches == 96
    assert result.rate_limits is not None
    (fargate,) = [x for x in result.rate_limits.limits if x.what.startswith("Fargate tasks at once")]
    assert fargate.what == "Fargate tasks at once (0.524 a batch, 52 in all)"


def test_a_checkpoint_save_writes_only_the_part_items_that_changed() -> None:
    """A 5 TiB object on Fargate checkpoints every 90 s: 291 saves at 200 MiB/s, each adding
    about 34 parts of 10,000. The ledger keeps a checkpoint in items of 1,000 parts and a save
    writes the items that changed (one, or two where it crosses an item's end), not the whole
    1.5 MB checkpoint (ledger/dynamodb_checkpoints.py)."""
    assert model.CHECKPOINT_PARTS_PER_ITEM == PARTS_PER_ITEM
    result = estimate(Workload.uniform(1, 5 * 1024 * GiB), a=Assumptions(mode="server-side"))
    saves = math.ceil(5 * 1024 * 1024 / 200 / 90) - 1
    assert saves == 291
    whole_item = math.ceil((100 + 150 * 1_000) / 1024)
    others = 20  # markers, the job, the tally: a handful of units for one object
    assert line(result, "DynamoDB", "write request units").quantity <= saves * 2 * whole_item + 1 + others


def test_a_checkpoint_is_saved_where_its_pass_ends_read_by_the_next_pass_and_deleted_by_its_size() -> None:
    """20 GiB on Fargate at the expected 200 MiB/s: 102.4 s of copying, a checkpoint at 90 s,
    2,250 of 2,560 parts done. The save writes the head (300 bytes) and three part items
    (1,000, 1,000 and 250 parts); the next pass reads them whole, strongly consistent (4 KB a
    unit); at the end the store lists them (the same read) and deletes each by its size."""
    result = estimate(Workload.uniform(1, 20 * GiB), a=Assumptions(mode="server-side"))
    items = [100 + 150 * 1_000, 100 + 150 * 1_000, 100 + 150 * 250]
    written = 1 + sum(math.ceil(b / 1024) for b in items)  # 1 + 147 + 147 + 37
    read = math.ceil((300 + sum(items)) / 4096)  # 83
    markers = 1 + 1 + 3  # the pass's, the task's; the job item and Finalize's
    assert line(result, "DynamoDB", "write request units").quantity == markers + written + written
    # the job (once a process), the first pass's empty load, the load after the save, the
    # delete's listing, the task's marker read, the hand-over's, the tally, the job and report
    assert line(result, "DynamoDB", "read request units").quantity == 1 + 1 + read + read + 1 + 1 + 1 + 2


def test_the_ledger_limit_counts_the_jobs_own_partition_not_the_checkpoints() -> None:
    """A checkpoint lives on its own partition key (CKPT#<copy>), so its writes do not count
    against the job's partition (JOB#<id>), which takes the markers only."""
    result = estimate(Workload.uniform(100, 5 * 1024 * GiB), a=Assumptions(mode="server-side"))
    assert result.rate_limits is not None
    (ledger,) = [x for x in result.rate_limits.limits if x.what.startswith("ledger writes")]
    assert ledger.objects_per_second > 100


def test_large_objects_one_to_a_batch_run_one_task_a_batch() -> None:
    """A thousand objects of 50 GiB among a million small ones, 999 batches: one batch holds two
    of them, every other one. A hundred batches at once run a hundred tasks, not two hundred,
    and the job lasts ten rounds of one task each."""
    work = Workload()
    work.add(500 * KiB, count=1_000_000)
    work.add(50 * GiB, count=1_000)
    result = estimate(work, a=Assumptions(mode="server-side"))
    assert result.batches == 999
    assert [n for n in result.assumptions if "Fargate task" in n][0].startswith("100 Fargate tasks at once")
    one = 50 * 1024 / 400 + 60  # the fast case: 400 MiB/s, and the task's start-up
    assert result.duration_seconds[0] > 1_000 * one / 101
