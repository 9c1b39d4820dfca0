"""Test support: run Ferry's PARENT state machine (Prepare -> a Distributed Map per reader ->
Finalize) in moto 5.2.5's Step Functions interpreter, offline and in-process.

moto executes ASL with a port of LocalStack's interpreter
(`moto/stepfunctions/parser`), which cannot run a Distributed Map the way AWS does. This module
patches it (with pytest's `monkeypatch`, so every patch is undone after the test; nothing in
site-packages is edited) and routes every task to Ferry's real entry points in-process.
It calls private moto methods, which is why requirements.txt pins moto to exactly 5.2.5
(`install` refuses any other version).

What each piece does on AWS, and what it replaces in moto. AWS behaviour was checked against
the Step Functions developer guide (pages quoted from the docs as indexed on 2026-11-22):
input-output-itemreader.html, input-output-itembatcher.html, input-output-resultwriter.html,
state-map-distributed.html ("Setting failure thresholds"), and, for ECS, the error Step
Functions reports for a `.sync` task whose container exits non-zero.

1. ItemBatcher. AWS: each child execution gets `{"Items": [...], "BatchInput": <BatchInput
   evaluated against the Map state's input>}`, at most MaxItemsPerBatch(Path) items and at most
   MaxInputBytesPerBatch(Path) bytes, "up to 256 KiB"; "if you use batching and don't specify a
   maximum batch size, the interpreter processes as many items it can process up to 256 KiB"
   (input-output-itembatcher.html). moto: its grammar has no ItemBatcher token, so
   CreateStateMachine fails. Here: `AmazonStateLanguageParser.parse` is wrapped; ItemBatcher
   is taken out of each Map state before moto parses the definition and kept on that state's
   parsed objects; BatchInput is parsed by moto itself as a Pass state's Parameters (so `.$`
   paths, `$$` context paths and intrinsic functions evaluate as moto evaluates them
   elsewhere). Batch size is MEASURED as the UTF-8 length of the child's whole input, compact
   JSON (`{"Items":[...],"BatchInput":...}`, separators `,` `:`), which is what the child
   execution receives; the limit is min(MaxInputBytesPerBatch, 256 KiB). A single item larger
   than the limit still makes a batch of its own (AWS does not document that case).
2. ReaderConfig / getObject readers. AWS: InputType CSV, JSON, JSONL, MANIFEST (S3 Inventory
   manifest.json: its `files[]` are CSV(.gz) data files in the inventory's destination bucket,
   rows without a header; each row becomes an object keyed by the manifest's `fileSchema`
   column names, every value a string, e.g. {"Bucket": ..., "Key": ..., "Size": "3399671",
   "LastModifiedDate": ...}), GZIP input files (`myObject.jsonl.gz`), CSV rows with fewer
   fields than the header get "" for the missing ones, extra fields are dropped, MaxItems
   (input-output-itemreader.html). moto: only CSV and JSON (`InputType("JSONL")` raises
   ValueError at CreateStateMachine), no gzip. Here: ReaderConfig is taken out of the
   definition before moto parses it and `ItemReader._eval_body` is replaced by a reader that
   does the above. Inventory keys are left URL-encoded, as S3 Inventory writes them.
   `ManifestType: ATHENA_DATA` with `InputType: JSONL` (AWS: "Athena manifest", the
   `<query id>-manifest.csv` Athena writes beside an UNLOAD, naming the data files it wrote,
   one S3 URI a line; supported data formats CSV, JSONL, Parquet): every file the manifest
   names, in the manifest's order, each read as JSON Lines. Reader errors surface as
   `States.ItemReaderFailed`. Not supported (raise at CreateStateMachine, never silently):
   PARQUET, ManifestType S3_INVENTORY, an Athena manifest of CSV or Parquet files,
   Transformation LOAD_AND_FLATTEN, ItemsPointer.
3. s3:listObjectsV2 reader. AWS lists the whole prefix (every page) and gives each child
   `{"Etag": "\\"<md5>\\"", "Key": ..., "LastModified": 1668699881, "Size": 34910,
   "StorageClass": "STANDARD"}` -- `Etag` spelled so, quotes kept, LastModified in epoch
   SECONDS (input-output-itemreader.html, "Input passed to a child workflow execution"). moto:
   first page only, KeyError 'Contents' on an empty prefix, boto3's shape (`ETag`, datetime).
   Here: paginated with ContinuationToken; an empty prefix gives no items; AWS's shape.
4. ToleratedFailurePercentage(Path) / ToleratedFailureCount(Path). AWS: the Map Run fails with
   `States.ExceedToleratedFailureThreshold` when failed-or-timed-out ITEMS / all items exceeds
   the percentage, or failed items exceed the count (either one when both are given); with
   neither given, any failed child fails the Map Run; "Step Functions may continue to run child
   workflows ... after the threshold is exceeded, but before the Map Run fails"
   (state-map-distributed.html). With a batcher, a failed child fails all its items. moto:
   evaluates both, then ignores them (a failed child only yields null). Here: after each
   child the threshold is checked; once exceeded no further child starts, the running ones
   finish, the unstarted ones are PENDING, the ResultWriter files are still written, and the
   Map state fails with that error (its Catch / Retry then apply as on AWS).
5. ResultWriter (s3:putObject). AWS: writes under `<Prefix>/<MapRunId>/` a `manifest.json`
   (`{"DestinationBucket", "MapRunArn", "ResultFiles": {"FAILED": [{"Key", "Size"}],
   "PENDING": [...], "SUCCEEDED": [...]}}`) and `SUCCEEDED_n.json`, `FAILED_n.json` (failed,
   timed out and aborted children), `PENDING_n.json` (never started because the Map Run
   failed), each a JSON array of child records (`ExecutionArn`, `Input` and `Output` as JSON
   strings, `InputDetails`/`OutputDetails` {"Included": true}, `Name`, `StartDate`,
   `StopDate`, `StateMachineArn`, `Status`, `RedriveCount`, ...; `Error`/`Cause` for a failed
   one); the Map's result is `{"MapRunArn": ..., "ResultWriterDetails": {"Bucket": ...,
   "Key": "<Prefix>/<MapRunId>/manifest.json"}}` (input-output-resultwriter.html). Only files
   with at least one record are written and listed (as in manifests seen from AWS, where an
   empty status has `[]`). moto: evaluates `Prefix.$` against the Map's RESULTS instead of its
   input and writes a manifest with empty lists and no result files. Here:
   `ResultWriter._eval_body` is replaced. Records of PENDING children carry only Input and
   Status (AWS does not document them further); a failed child's RedriveStatus is assumed
   "REDRIVABLE".
6. Child executions. AWS: each child of a Distributed Map is its own execution, `$$.Execution`
   is the child's (Name a UUID, Id `arn:...:execution:<machine>/<label>:<name>`, Input the
   child's input) and `$$.StateMachine.Id` is `arn:...:stateMachine:<machine>/<label>`
   (input-output-resultwriter.html example records). moto runs children as threads that see
   the parent's `$$.Execution`. Here: `DistributedIterationComponent._map_run` is replaced by
   a pool of workers, MaxConcurrency(Path) of them (0 = one per child, as moto and AWS's
   "no limit"), each running one child at a time in its own frame with its own context object.
   Each child also has its own execution history, as on AWS ("each child workflow execution
   has its own, separate execution history from that of the parent workflow",
   state-map-distributed.html): ExecutionStarted, its states' events, ExecutionSucceeded (or
   Failed, Aborted, TimedOut). moto puts a Map Run's children's events in one throwaway list.
   GetExecutionHistory answers for a child's ARN with that history; a Distributed Map inside a
   child (a nested Map Run) runs the same way, its children with histories of their own.
7. Retry waits are real `time.sleep` calls in moto
   (`...common.retry.retrier_decl.time.sleep`). Here: replaced by a recorder that returns at
   once (`ParentHarness.retry_sleeps` lists the waits that AWS would have made).

8. DescribeMapRun. AWS: `executionCounts` counts child executions by status (API reference,
   MapRunExecutionCounts); `itemCounts` counts "items processed in ... child workflow
   executions" (MapRunItemCounts), which does not settle whether, with an ItemBatcher, an
   item is one listed object or one batch. moto: describes the Map Run from its own record,
   whose counters the replaced `_map_run` above never updates. Here: moto's description with
   both counts taken from the harness's `MapRun`; `itemCounts` counts objects, or batches when
   `ParentHarness.item_counts_count` is "batches", so a test can run under either reading.
9. State payload sizes. AWS: every state's input and output, and a task's result, is at most
   256 KiB of UTF-8 (aws-limits.md); moto checks each state's output against that after its
   OutputPath (`CommonStateField._verify_size_quota`; a Task state checks its result before
   ResultSelector too, with its own override). Here: those checks are wrapped to record, per
   state name, how many payloads there were and the largest one's compact UTF-8 size
   (`ParentHarness.state_outputs`), in the parent and in every child, and `LambdaRouter`
   records the largest response of each function (`LambdaRouter.largest_response`), so a test
   can assert the margin at a job's real size rather than only a failure past it.
10. Payload copies. moto copies a state's data with `copy.deepcopy` wherever it reads or
   hands it on (`States`, paths, a task's parameters): for a child whose batch holds
   thousands of items that is most of the interpreter's time, and a Map Run of a million
   items pays it for every item several times. Here: those modules' `copy.deepcopy` is
   `plain_copy`, which copies JSON data (dicts, lists, scalars) without deepcopy's memo and
   dispatch, and hands anything else to `copy.deepcopy`. The data is JSON on AWS, so the
   copies are the same values, each container new as before.

Speed only, no behaviour changed: moto parses a JSONPath again (PLY, about a millisecond)
at every evaluation, so each parsed path is kept (`moto...asl.utils.json_path.parse`); and a
child's frame starts with an empty stack (moto leaves the Map's whole input on it, which each
of the child's states then deep-copies: for a batch's thousand objects, a thousand copies of
the batch per state).

Tasks routed in-process:
- `arn:aws:states:::lambda:invoke` -> `LambdaRouter` replaces
  `moto.awslambda_simple.models.LambdaSimpleBackend.invoke` (moto's no-Docker Lambda) and runs
  the real handler; an exception becomes a function error (`x-amz-function-error: Unhandled`
  with errorType/errorMessage/stackTrace), which moto turns into a task failure named after
  the errorType, as AWS does. A name with no handler fails loudly, never returns null.
- `arn:aws:states:::ecs:runTask.sync` -> `FargateTasks` replaces
  `StateTaskServiceEcs._eval_service_task` / `_build_sync_resolver`: it runs
  `handlers.copy_large.main()` with the task definition's environment plus the
  ContainerOverrides environment (ECS applies overrides on top), one task at a time under a
  lock (os.environ is process-wide), with SIGTERM registration captured instead of installed
  (signals only work in the main thread). Exit 0 -> the task's description is the result;
  non-zero -> `States.TaskFailed` with the stopped task's description as the Cause, which is
  what Step Functions reports for runTask.sync when an essential container exits non-zero.
  The task's result is the resolver's alone: moto also listens for a task token on `.sync`
  tasks, and every attempt of one state shares that listener, which the first attempt's end
  interrupts for good, so a retried task that then succeeds is reported TaskTimedOut (a race
  with the resolver that moto almost always loses); AWS's runTask.sync waits for the task only.
  Each task gets its own clients and settings (a fresh process on AWS), unless the test asks
  for one set shared by every task (`FargateTasks(..., shared_services=True)`, for thousands
  of tasks: clients take milliseconds each to make).
"""

from __future__ import annotations

import copy
import csv
import datetime as dt
import functools
import gzip
import io
import json
import os
import signal
import threading
import traceback
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

MOTO_VERSION = "5.2.5"
MAX_BATCH_BYTES = 256 * 1024  # AWS: MaxInputBytesPerBatch "up to 256 KiB"
_PARSER = "moto.stepfunctions.parser.asl"
_CSV_DELIMITERS = {"COMMA": ",", "PIPE": "|", "SEMICOLON": ";", "SPACE": " ", "TAB": "\t"}
_UNSUPPORTED_READER = ("Transformation", "ItemsPointer")
_ATHENA_DATA = {"ManifestType": "ATHENA_DATA", "InputType": "JSONL"}  # the one manifest type reproduced


# -- what the definition pre-processing keeps for each Map state ---------------------------------


@dataclass
class MapExtras:
    """What moto cannot parse from one Map state, kept on that state's parsed objects."""

    state_name: str
    batcher: dict[str, Any] | None = None
    batch_input: Any = None  # moto's parsed Parargs for BatchInput
    reader_config: dict[str, Any] | None = None
    tolerance_fields: frozenset[str] = frozenset()
    result_writer: Any = None  # moto's ResultWriter component of the same state


def _strip_definition(document: Any, found: dict[str, dict[str, Any]]) -> None:
    """Take ItemBatcher and ReaderConfig out of every Map state, at every depth."""
    if isinstance(document, list):
        for value in document:
            _strip_definition(value, found)
        return
    if not isinstance(document, dict):
        return
    states = document.get("States")
    if isinstance(states, dict):
        for name, state in states.items():
            if isinstance(state, dict) and state.get("Type") == "Map":
                kept: dict[str, Any] = {
                    "tolerance": frozenset(k for k in state if k.startswith("ToleratedFailure"))
                }
                if "ItemBatcher" in state:
                    kept["ItemBatcher"] = state.pop("ItemBatcher")
                reader = state.get("ItemReader")
                if isinstance(reader, dict) and "ReaderConfig" in reader:
                    config = reader.pop("ReaderConfig")
                    bad = [k for k in _UNSUPPORTED_READER if k in config]
                    if "ManifestType" in config and {k: config.get(k) for k in _ATHENA_DATA} != _ATHENA_DATA:
                        bad.append("ManifestType")
                    if bad or config.get("InputType") not in (None, "CSV", "JSON", "JSONL", "MANIFEST"):
                        raise NotImplementedError(
                            f"parent_harness: ReaderConfig {config} of Map state {name!r} is not reproduced"
                        )
                    kept["ReaderConfig"] = config
                found[name] = kept
    for value in document.values():
        _strip_definition(value, found)


def _moto_objects(root: Any) -> list[Any]:
    """Every object of moto's parser reachable from a parsed program."""
    seen: set[int] = set()
    out: list[Any] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
        elif type(node).__module__.startswith("moto.stepfunctions.parser") and hasattr(node, "__dict__"):
            out.append(node)
            stack.extend(vars(node).values())
    return out


_SCALARS = (str, int, float, bool, type(None))


def plain_copy(value: Any, memo: Any = None) -> Any:
    """copy.deepcopy for JSON data, a few times faster: dicts and lists are copied, str, int,
    float, bool and None kept (immutable), anything else deep-copied as before (see 10 above)."""
    kind = type(value)
    if kind is dict:
        return {key: plain_copy(item) for key, item in value.items()}
    if kind is list:
        return [plain_copy(item) for item in value]
    if kind in _SCALARS:
        return value
    return copy.deepcopy(value, memo)


# Compact JSON as Step Functions measures a payload; one encoder (json.dumps with options makes
# a new one on every call, and the batcher measures every item of a Map Run).
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def payload_bytes(value: Any) -> int:
    """A state payload's size as Step Functions counts it: UTF-8 bytes of compact JSON."""
    text = value if isinstance(value, str) else _COMPACT.encode(value)
    return len(text.encode("utf-8"))


@dataclass
class StateOutputs:
    """The outputs one state (by name) produced during a run: how many, and the largest."""

    count: int = 0
    largest: int = 0

    def add(self, size: int) -> None:
        self.count += 1
        self.largest = max(self.largest, size)


# -- the harness ---------------------------------------------------------------------------------


class ParentHarness:
    """Installs every patch; `lambdas` and `fargate` decide what the tasks run."""

    def __init__(self, lambdas: LambdaRouter, fargate: FargateTasks) -> None:
        self.lambdas = lambdas
        self.fargate = fargate
        self.retry_sleeps: list[float] = []
        self.map_runs: list[MapRun] = []
        # What ResultWriter's `Prefix.$`-style paths are resolved against: the Map state's
        # "input" (this harness's reading) or its "results" (moto's and LocalStack's). AWS's
        # documentation does not settle it, so the state machine must work under both.
        self.result_writer_reads: str = "input"
        # What DescribeMapRun's `itemCounts` counts with an ItemBatcher: listed "items" (the API
        # reference's wording) or "batches" (one per child execution). Finalize must settle a
        # job the same way under both.
        self.item_counts_count: str = "items"
        # Every state's output, by state name (parent's and children's): see 9 above.
        self.state_outputs: dict[str, StateOutputs] = {}
        self._outputs_lock = threading.Lock()
        self._original_parse: Any = None
        self.children: dict[str, ChildRecord] = {}  # every child execution started, by its ARN

    def install(self, monkeypatch: Any) -> ParentHarness:
        import moto
        from moto.awslambda_simple.models import LambdaSimpleBackend
        from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
        from moto.stepfunctions.parser.asl.component.state.exec.state_map.item_reader.item_reader_decl import (
            ItemReader,
        )
        from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.distributed_iteration_component import (
            DistributedIterationComponent,
        )
        from moto.stepfunctions.parser.asl.component.state.exec.state_map.result_writer.result_writer_decl import (
            ResultWriter,
        )
        from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service import (
            StateTaskService,
        )
        from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_ecs import (
            StateTaskServiceEcs,
        )
        from moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task_lambda import (
            StateTaskLambda,
        )
        from moto.stepfunctions.parser.asl.component.state.state import CommonStateField
        from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
        from moto.stepfunctions.parser.asl.utils import json_path
        from moto.stepfunctions.parser.models import StepFunctionsParserBackend

        if moto.__version__ != MOTO_VERSION:
            raise RuntimeError(
                f"parent_harness patches private methods of moto {MOTO_VERSION}; found {moto.__version__}"
            )
        harness = self
        self._original_parse = AmazonStateLanguageParser.parse

        monkeypatch.setattr(AmazonStateLanguageParser, "parse", staticmethod(self._parse))
        monkeypatch.setattr(ItemReader, "_eval_body", lambda reader, env: _read_items(reader, env))
        monkeypatch.setattr(
            DistributedIterationComponent,
            "_map_run",
            lambda component, env, eval_input: _map_run(harness, component, env, eval_input),
        )
        original_writer = ResultWriter._eval_body
        monkeypatch.setattr(
            ResultWriter,
            "_eval_body",
            lambda writer, env: _write_results_state(writer, env, original_writer),
        )
        monkeypatch.setattr(
            StateTaskServiceEcs,
            "_eval_service_task",
            lambda task, env, resource_runtime_part, normalised_parameters, state_credentials: (
                harness.fargate.eval_service_task(task, env, resource_runtime_part, normalised_parameters)
            ),
        )
        monkeypatch.setattr(
            StateTaskServiceEcs,
            "_eval_sync",
            lambda task, env, sync_resolver, timeout_seconds, callback_endpoint, heartbeat_endpoint: (
                sync_resolver()
            ),
        )
        monkeypatch.setattr(
            StateTaskServiceEcs,
            "_build_sync_resolver",
            lambda task, env, resource_runtime_part, normalised_parameters, state_credentials: (
                harness.fargate.sync_resolver(task, env)
            ),
        )
        monkeypatch.setattr(
            LambdaSimpleBackend,
            "invoke",
            lambda backend, function_name, qualifier, body, headers, response_headers: harness.lambdas.invoke(
                function_name, body, response_headers
            ),
        )
        monkeypatch.setattr(retrier_decl, "time", SimpleNamespace(sleep=self.retry_sleeps.append))
        monkeypatch.setattr(json_path, "parse", functools.lru_cache(maxsize=None)(json_path.parse))
        original_history = StepFunctionsParserBackend.get_execution_history
        monkeypatch.setattr(
            StepFunctionsParserBackend,
            "get_execution_history",
            lambda backend, execution_arn: harness._execution_history(
                backend, execution_arn, original_history
            ),
        )
        from moto.stepfunctions.parser.asl.component.common.path import result_path
        from moto.stepfunctions.parser.asl.component.common.string import string_expression
        from moto.stepfunctions.parser.asl.component.state.exec import execute_state
        from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
            state_task_service,
        )
        from moto.stepfunctions.parser.asl.eval import states

        plain = SimpleNamespace(**{**vars(copy), "deepcopy": plain_copy})
        for module in (states, string_expression, result_path, execute_state, state_task_service):
            monkeypatch.setattr(module, "copy", plain)
        # Task states check their result (before ResultSelector) and their output with their
        # own override; every other state with CommonStateField's.
        for checks in (CommonStateField, StateTaskService, StateTaskLambda):
            monkeypatch.setattr(checks, "_verify_size_quota", harness._size_check(checks._verify_size_quota))
        original_describe = StepFunctionsParserBackend.describe_map_run
        monkeypatch.setattr(
            StepFunctionsParserBackend,
            "describe_map_run",
            lambda backend, map_run_arn: harness._describe_map_run(original_describe(backend, map_run_arn)),
        )
        return self

    def _execution_history(self, backend: Any, execution_arn: str, original: Callable[..., Any]) -> Any:
        """A child execution's own history; any other execution's as moto keeps it."""
        from moto.stepfunctions.parser.api import GetExecutionHistoryOutput

        child = self.children.get(execution_arn)
        if child is None:
            return original(backend, execution_arn)
        return GetExecutionHistoryOutput(events=child.history.get_event_history() if child.history else [])

    def _size_check(self, original: Callable[..., None]) -> Callable[..., None]:
        """moto's 256 KiB check of a state's payload, recording its size first (compact UTF-8
        JSON, as AWS measures a payload) under the state's name."""

        def check(state: Any, env: Any, value: Any) -> None:
            size = payload_bytes(value)
            with self._outputs_lock:
                self.state_outputs.setdefault(state.name, StateOutputs()).add(size)
            original(state, env, value)

        return check

    def _describe_map_run(self, described: dict[str, Any]) -> dict[str, Any]:
        run = next((r for r in self.map_runs if r.map_run_arn == described.get("mapRunArn")), None)
        if run is None:
            return described
        by_status = {"SUCCEEDED": 0, "FAILED": 0, "TIMED_OUT": 0, "ABORTED": 0, "PENDING": 0}
        children = dict(by_status)
        for child in run.children:
            by_status[child.status] = by_status.get(child.status, 0) + child.items
            children[child.status] = children.get(child.status, 0) + 1

        def counts(numbers: dict[str, int], total: int) -> dict[str, int]:
            return {
                "pending": numbers["PENDING"],
                "running": 0,
                "succeeded": numbers["SUCCEEDED"],
                "failed": numbers["FAILED"],
                "timedOut": numbers["TIMED_OUT"],
                "aborted": numbers["ABORTED"],
                "total": total,
                "resultsWritten": total if run.result_writer_output else 0,
                "failuresNotRedrivable": 0,
                "pendingRedrive": 0,
            }

        return {
            **described,
            "itemCounts": (
                counts(children, len(run.children))
                if self.item_counts_count == "batches"
                else counts(by_status, run.total_items)
            ),
            "executionCounts": counts(children, len(run.children)),
        }

    def _parse(self, definition: str) -> Any:
        document = json.loads(definition)
        found: dict[str, dict[str, Any]] = {}
        _strip_definition(document, found)
        program, tree = self._original_parse(json.dumps(document))
        if found:
            self._attach(program, found)
        return program, tree

    def _attach(self, program: Any, found: dict[str, dict[str, Any]]) -> None:
        from moto.stepfunctions.parser.asl.component.state.exec.state_map.state_map import StateMap

        for state in _moto_objects(program):
            if not isinstance(state, StateMap) or state.name not in found:
                continue
            kept = found[state.name]
            extras = MapExtras(
                state_name=state.name,
                batcher=kept.get("ItemBatcher"),
                reader_config=kept.get("ReaderConfig"),
                tolerance_fields=kept["tolerance"],
                result_writer=state.result_writer,
            )
            if extras.batcher and "BatchInput" in extras.batcher:
                extras.batch_input = self._parse_payload(extras.batcher["BatchInput"])
            state.iteration_component._ferry_extras = extras
            if state.item_reader is not None:
                state.item_reader._ferry_extras = extras

    def _parse_payload(self, template: Any) -> Any:
        """moto's own Parameters component for a payload template (a Pass state's Parameters)."""
        mini = {"StartAt": "P", "States": {"P": {"Type": "Pass", "Parameters": template, "End": True}}}
        program, _ = self._original_parse(json.dumps(mini))
        return program.states.states["P"].parameters


# -- 2, 3: the item reader -----------------------------------------------------------------------


def _failure(env: Any, error: str, cause: str, *, map_run: bool = False) -> Exception:
    from moto.stepfunctions.parser.api import (
        HistoryEventType,
        MapRunFailedEventDetails,
        TaskFailedEventDetails,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import (
        CustomErrorName,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
        StatesErrorName,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    name = StatesErrorName.from_name(error) if error.startswith("States.") else CustomErrorName(error)
    if map_run:
        details = EventDetails(mapRunFailedEventDetails=MapRunFailedEventDetails(error=error, cause=cause))
        event_type = HistoryEventType.MapRunFailed
    else:
        details = EventDetails(taskFailedEventDetails=TaskFailedEventDetails(error=error, cause=cause))
        event_type = HistoryEventType.TaskFailed
    return FailureEventException(
        FailureEvent(env=env, error_name=name, event_type=event_type, event_details=details)
    )


def _s3_client(component: Any, env: Any) -> Any:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.credentials import StateCredentials
    from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for

    component.resource.eval(env=env)
    runtime = env.stack.pop()
    credentials = StateCredentials(role_arn=env.aws_execution_details.role_arn)
    return boto_client_for(region=runtime.region, service="s3", state_credentials=credentials)


def _read_items(reader: Any, env: Any) -> None:
    from moto.stepfunctions.parser.asl.utils.json_path import extract_json

    extras: MapExtras | None = getattr(reader, "_ferry_extras", None)
    config = dict(extras.reader_config or {}) if extras else {}
    state_input = env.stack[-1]
    if reader.parargs:
        reader.parargs.eval(env=env)
        parameters = env.stack.pop()
    else:
        parameters = {}
    action = reader.resource.api_action
    try:
        s3 = _s3_client(reader.resource_eval, env)
        if action == "listObjectsV2":
            items = _list_objects(s3, parameters)
        elif action == "getObject":
            items = _get_object_items(s3, parameters, config)
        else:
            raise ValueError(f"ItemReader resource s3:{action} is not reproduced")
    except Exception as error:
        if type(error).__name__ == "FailureEventException":
            raise
        raise _failure(
            env, "States.ItemReaderFailed", f"{type(error).__name__}: {error}", map_run=True
        ) from error
    max_items = config.get("MaxItems")
    if "MaxItemsPath" in config:
        max_items = extract_json(config["MaxItemsPath"], state_input)
    if max_items:
        items = items[: int(max_items)]
    env.stack.append(items)


def _list_objects(s3: Any, parameters: Mapping[str, Any]) -> list[dict[str, Any]]:
    # AWS (input-output-itemreader.html, "A list of Amazon S3 objects"): each child receives
    # {"Etag": "\"05704fbdccb224cb01c59005bebbad28\"", "Key": "processData/images/n02085620_1073.jpg",
    #  "LastModified": 1668699881, "Size": 34910, "StorageClass": "STANDARD"}: `Etag` spelled so,
    # with its quotes, LastModified in epoch seconds. Every page of the listing is read.
    items: list[dict[str, Any]] = []
    request = dict(parameters)
    while True:
        page = s3.list_objects_v2(**request)
        for entry in page.get("Contents", []):
            items.append(
                {
                    "Etag": entry["ETag"],
                    "Key": entry["Key"],
                    "LastModified": int(entry["LastModified"].timestamp()),
                    "Size": entry["Size"],
                    "StorageClass": entry.get("StorageClass", "STANDARD"),
                }
            )
        if not page.get("IsTruncated"):
            return items
        request["ContinuationToken"] = page["NextContinuationToken"]


def _object_text(s3: Any, parameters: Mapping[str, Any]) -> str:
    data = s3.get_object(**parameters)["Body"].read()
    if str(parameters.get("Key", "")).endswith((".gz", ".gzip")):  # AWS: GZIP input files
        data = gzip.decompress(data)
    return data.decode("utf-8")


def _csv_rows(text: str, delimiter: str) -> list[list[str]]:
    return [row for row in csv.reader(io.StringIO(text), delimiter=delimiter) if row]


def _as_objects(header: list[str], rows: list[list[str]]) -> list[dict[str, str]]:
    # AWS: fewer fields than the header -> "" for the missing ones; more -> the extra are dropped.
    return [{name: (row[i] if i < len(row) else "") for i, name in enumerate(header)} for row in rows]


def _get_object_items(s3: Any, parameters: Mapping[str, Any], config: Mapping[str, Any]) -> list[Any]:
    input_type = config.get("InputType", "JSON")
    delimiter = _CSV_DELIMITERS[config.get("CSVDelimiter", "COMMA")]
    if config.get("ManifestType") == "ATHENA_DATA":
        return _athena_data_items(s3, parameters)
    if input_type == "MANIFEST":
        return _inventory_items(s3, parameters, delimiter)
    text = _object_text(s3, parameters)
    if input_type == "JSON":
        items = json.loads(text)
        if not isinstance(items, list):
            raise ValueError("the JSON dataset is not an array")
        return items
    if input_type == "JSONL":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    rows = _csv_rows(text, delimiter)
    if config.get("CSVHeaderLocation", "FIRST_ROW") == "GIVEN":
        header = list(config["CSVHeaders"])
    else:
        header, rows = (rows[0], rows[1:]) if rows else ([], [])
    if len(set(header)) < len(header):
        raise ValueError("CSV headers cannot contain duplicates")
    return _as_objects(header, rows)


def _athena_data_items(s3: Any, parameters: Mapping[str, Any]) -> list[Any]:
    # AWS (input-output-itemreader.html, "Athena manifest"): the manifest names the data files,
    # one S3 URI a line; each file's items, in the manifest's order (JSON Lines here).
    items: list[Any] = []
    for line in _object_text(s3, parameters).splitlines():
        if not line.strip():
            continue
        if not line.startswith("s3://"):
            raise ValueError(f"Athena manifest line {line!r} is not an S3 URI")
        bucket, _, key = line[len("s3://") :].partition("/")
        text = _object_text(s3, {"Bucket": bucket, "Key": key})
        items.extend(json.loads(row) for row in text.split("\n") if row.strip())
    return items


def _inventory_items(s3: Any, parameters: Mapping[str, Any], delimiter: str) -> list[dict[str, str]]:
    # AWS (input-output-itemreader.html, "Amazon S3 inventory"): the manifest's `files` are CSV
    # data files (gzipped) in the inventory's destination bucket; each row becomes an object keyed
    # by the `fileSchema` names ("Bucket, Key, Size, LastModifiedDate"), every value a string.
    manifest = json.loads(_object_text(s3, parameters))
    if manifest.get("fileFormat") != "CSV":
        raise ValueError(f"S3 Inventory format {manifest.get('fileFormat')!r}: Step Functions reads CSV only")
    columns = [name.strip() for name in manifest["fileSchema"].split(",")]
    destination = str(manifest.get("destinationBucket") or parameters["Bucket"])
    bucket = destination.rsplit(":", 1)[-1]
    items: list[dict[str, str]] = []
    for data_file in manifest.get("files", []):
        text = _object_text(s3, {"Bucket": bucket, "Key": data_file["key"]})
        items.extend(_as_objects(columns, _csv_rows(text, delimiter)))
    return items


# -- 1, 4, 6: the map run ------------------------------------------------------------------------


@dataclass
class ChildRecord:
    index: int
    input: Any
    items: int
    status: str = "PENDING"  # SUCCEEDED, FAILED, TIMED_OUT, ABORTED, PENDING
    name: str | None = None
    execution_arn: str | None = None
    output: Any = None
    error: str | None = None
    cause: str | None = None
    start: dt.datetime | None = None
    stop: dt.datetime | None = None
    history: Any = None  # the child's own moto EventManager


@dataclass
class MapRun:
    """One Map Run: its children's records, as the ResultWriter writes them and tests read them."""

    state_name: str
    map_run_arn: str
    state_machine_arn: str  # the children's: arn:...:stateMachine:<machine>/<label>
    children: list[ChildRecord]
    max_concurrency: int
    tolerated_count: int | None
    tolerated_percentage: float | None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    exceeded: bool = False
    result_writer_output: dict[str, Any] | None = None
    running: int = 0
    peak_running: int = 0  # the most children running at once (at most MaxConcurrency)

    @property
    def total_items(self) -> int:
        return sum(c.items for c in self.children)

    @property
    def failed_items(self) -> int:
        return sum(c.items for c in self.children if c.status in ("FAILED", "TIMED_OUT"))

    def check_tolerance(self) -> bool:
        failed, total = self.failed_items, self.total_items
        if self.tolerated_count is None and self.tolerated_percentage is None:
            return failed > 0
        over_count = self.tolerated_count is not None and failed > self.tolerated_count
        over_pct = (
            self.tolerated_percentage is not None
            and total > 0
            and failed * 100 / total > self.tolerated_percentage
        )
        return over_count or over_pct

    def threshold_cause(self) -> str:
        return (
            f"The specified tolerated failure threshold was exceeded: {self.failed_items} of "
            f"{self.total_items} items failed (ToleratedFailurePercentage {self.tolerated_percentage}, "
            f"ToleratedFailureCount {self.tolerated_count})"
        )


def _batches(harness: ParentHarness, extras: MapExtras, env: Any, items: list[Any]) -> list[tuple[Any, int]]:
    """AWS's ItemBatcher: (child input, number of items) for each child."""
    from moto.stepfunctions.parser.asl.utils.json_path import extract_json

    batcher = extras.batcher or {}
    state_input = env.stack[-1]
    max_items = batcher.get("MaxItemsPerBatch")
    if "MaxItemsPerBatchPath" in batcher:
        max_items = extract_json(batcher["MaxItemsPerBatchPath"], state_input)
    max_bytes = batcher.get("MaxInputBytesPerBatch")
    if "MaxInputBytesPerBatchPath" in batcher:
        max_bytes = extract_json(batcher["MaxInputBytesPerBatchPath"], state_input)
    limit = min(int(max_bytes), MAX_BATCH_BYTES) if max_bytes else MAX_BATCH_BYTES
    batch_input = None
    if extras.batch_input is not None:
        env.stack.append(state_input)
        extras.batch_input.eval(env=env)
        batch_input = env.stack.pop()
        env.stack.pop()

    def wrap(chunk: list[Any]) -> dict[str, Any]:
        child = {"Items": chunk}
        if extras.batch_input is not None:
            child["BatchInput"] = batch_input
        return child

    def size(chunk: list[Any]) -> int:
        return len(_COMPACT.encode(wrap(chunk)).encode())

    # Incremental size: the wrapper once, plus each item and its comma.
    base = size([])
    out: list[tuple[Any, int]] = []
    chunk: list[Any] = []
    used = base
    for item in items:
        item_bytes = len(_COMPACT.encode(item).encode())
        extra = item_bytes + (1 if chunk else 0)
        if chunk and (used + extra > limit or (max_items and len(chunk) >= int(max_items))):
            out.append((wrap(chunk), len(chunk)))
            chunk, used, extra = [], base, item_bytes
        chunk.append(item)
        used += extra
    if chunk:
        out.append((wrap(chunk), len(chunk)))
    return out


def _map_run(harness: ParentHarness, component: Any, env: Any, eval_input: Any) -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.max_concurrency import (
        DEFAULT_MAX_CONCURRENCY_VALUE,
    )

    items: list[Any] = env.stack.pop()
    extras: MapExtras = getattr(component, "_ferry_extras", None) or MapExtras(eval_input.state_name)
    if extras.batcher is not None:
        if eval_input.item_selector is not None:  # each item, then the batches (AWS's order)
            items = [_select_item(component, env, eval_input, i, item) for i, item in enumerate(items)]
        child_inputs = _batches(harness, extras, env, items)
    else:
        child_inputs = [(item, 1) for item in items]
    record = eval_input.map_run_record
    specified = extras.tolerance_fields
    run = MapRun(
        state_name=extras.state_name,
        map_run_arn=record.map_run_arn,
        state_machine_arn=record.map_state_machine_arn,
        children=[ChildRecord(i, data, n) for i, (data, n) in enumerate(child_inputs)],
        max_concurrency=record.max_concurrency,
        tolerated_count=(
            eval_input.tolerated_failure_count
            if {"ToleratedFailureCount", "ToleratedFailureCountPath"} & specified
            else None
        ),
        tolerated_percentage=(
            eval_input.tolerated_failure_percentage
            if {"ToleratedFailurePercentage", "ToleratedFailurePercentagePath"} & specified
            else None
        ),
    )
    harness.map_runs.append(run)
    env.heap["ferry_map_run"] = run
    env.heap["ferry_harness"] = harness
    program = component._get_iteration_program()
    pending = list(reversed(run.children))
    queue_lock = threading.Lock()

    def next_child() -> ChildRecord | None:
        with queue_lock:
            if run.exceeded or not pending:
                return None
            run.running += 1
            run.peak_running = max(run.peak_running, run.running)
            return pending.pop()

    def worker() -> None:
        while (child := next_child()) is not None:
            try:
                _run_child(harness, component, env, eval_input, run, program, child)
            finally:
                with queue_lock:
                    run.running -= 1

    workers = len(run.children)
    if run.max_concurrency != DEFAULT_MAX_CONCURRENCY_VALUE:
        workers = min(workers, run.max_concurrency)
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    if run.exceeded:
        # AWS still exports the results (unstarted children as PENDING), then fails the state.
        if extras.result_writer is not None:
            _write_results(extras.result_writer, env, run)
        raise _failure(env, "States.ExceedToleratedFailureThreshold", run.threshold_cause(), map_run=True)
    env.stack.append([c.output for c in run.children])


def _select_item(component: Any, env: Any, eval_input: Any, index: int, item: Any) -> Any:
    """The Map's ItemSelector for one item, `$$.Map.Item.Value` being that item: with an
    ItemBatcher, AWS selects each item and batches what the selector made (the ASL
    specification's "batch selected items"; Step Functions' emulators do the same)."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor.inline_item_processor_worker import (
        InlineItemProcessorWorker,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.job import JobPool
    from moto.stepfunctions.parser.asl.eval.states import ItemData, MapData

    frame = env.open_inner_frame()
    try:
        frame.states.context_object.context_object_data["Map"] = MapData(
            Item=ItemData(Index=index, Value=item)
        )
        worker = InlineItemProcessorWorker(
            work_name=eval_input.state_name,
            job_pool=JobPool(job_program=component._get_iteration_program(), job_inputs=[]),
            env=env,
            item_selector=eval_input.item_selector,
            parameters=None,
        )
        worker._eval_input(env_frame=frame)
        return frame.states.get_input()  # a copy already
    finally:
        env.delete_frame(frame)


def _run_child(
    harness: ParentHarness,
    component: Any,
    env: Any,
    eval_input: Any,
    run: MapRun,
    program: Any,
    child: ChildRecord,
) -> None:
    """One child execution, with its own $$.Execution and $$.StateMachine (as on AWS)."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor.inline_item_processor_worker import (
        InlineItemProcessorWorker,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.job import JobPool
    from moto.stepfunctions.parser.asl.eval.program_state import (
        ProgramEnded,
        ProgramError,
        ProgramStopped,
        ProgramTimedOut,
    )
    from moto.stepfunctions.parser.asl.eval.states import ItemData, MapData

    record = eval_input.map_run_record
    child.name = str(uuid.uuid4())
    arn_prefix = run.map_run_arn.replace(":mapRun:", ":execution:", 1).rsplit(":", 1)[0]
    child.execution_arn = f"{arn_prefix}:{child.name}"
    child.start = dt.datetime.now(dt.UTC)
    harness.children[child.execution_arn] = child
    record.execution_counter.total.count()
    record.execution_counter.running.count()
    record.item_counter.total.count(child.items)
    record.item_counter.running.count(child.items)
    frame = env.open_inner_frame()
    _own_history(frame, child, parent_role=env.aws_execution_details.role_arn)
    try:
        context = frame.states.context_object.context_object_data
        parent = context["Execution"]
        context["Execution"] = {
            "Id": child.execution_arn,
            "Input": child.input,
            "Name": child.name,
            "RoleArn": parent.get("RoleArn"),
            "StartTime": child.start.isoformat(),
        }
        context["StateMachine"] = {"Id": run.state_machine_arn, "Name": run.state_machine_arn.split(":")[-1]}
        context["Map"] = MapData(Item=ItemData(Index=child.index, Value=child.input))
        frame.states.reset(child.input)  # which copies it
        selector = InlineItemProcessorWorker(
            work_name=eval_input.state_name,
            job_pool=JobPool(job_program=program, job_inputs=[]),
            env=env,
            # With a batcher the items were selected one by one before batching (_select_item).
            item_selector=None
            if getattr(component, "_ferry_extras", None) and component._ferry_extras.batcher
            else eval_input.item_selector,
            parameters=eval_input.parameters,
        )
        selector._eval_input(env_frame=frame)
        # A new execution's stack is empty; moto leaves the Map's whole input on it, which each
        # state of the child would then deep-copy (a batch's, for each of its objects).
        frame.stack.clear()
        program.eval(frame)
        end = frame.program_state()
        if isinstance(end, ProgramError):
            child.status = "FAILED"
            child.error = (end.error or {}).get("error")
            child.cause = (end.error or {}).get("cause")
        elif isinstance(end, ProgramStopped):
            child.status = "ABORTED"
        elif isinstance(end, ProgramTimedOut):
            child.status = "TIMED_OUT"
        elif isinstance(end, ProgramEnded):
            child.status = "SUCCEEDED"
            child.output = frame.states.get_input()
        else:
            child.status = "FAILED"
            child.error, child.cause = "States.Runtime", f"child ended in state {type(end).__name__}"
    except Exception as error:  # a harness or interpreter fault: a failed child, never a silent one
        child.status, child.error = "FAILED", "States.Runtime"
        child.cause = f"{type(error).__name__}: {error}\n{traceback.format_exc()}"
    finally:
        env.delete_frame(frame)
        child.stop = dt.datetime.now(dt.UTC)
    _end_history(frame, child)
    counters = {
        "SUCCEEDED": "succeeded",
        "FAILED": "failed",
        "ABORTED": "aborted",
        "TIMED_OUT": "timed_out",
    }[child.status]
    getattr(record.execution_counter, counters).count()
    getattr(record.item_counter, counters).count(child.items)
    record.execution_counter.running.offset(-1)
    record.item_counter.running.offset(-1 * child.items)
    with run.lock:
        if run.check_tolerance():
            run.exceeded = True


def _own_history(frame: Any, child: ChildRecord, *, parent_role: str | None) -> None:
    """The child's own history, begun as AWS begins an execution's (ExecutionStarted)."""
    from moto.stepfunctions.parser.api import (
        ExecutionStartedEventDetails,
        HistoryEventExecutionDataDetails,
        HistoryEventType,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
    from moto.stepfunctions.parser.asl.eval.event.event_manager import EventHistoryContext, EventManager

    frame.event_manager = child.history = EventManager()
    frame.event_history_context = EventHistoryContext.of_program_start()
    child.history.add_event(
        context=frame.event_history_context,
        event_type=HistoryEventType.ExecutionStarted,
        event_details=EventDetails(
            executionStartedEventDetails=ExecutionStartedEventDetails(
                input=json.dumps(child.input, separators=(",", ":")),
                inputDetails=HistoryEventExecutionDataDetails(truncated=False),
                roleArn=parent_role or "",
            )
        ),
        update_source_event_id=False,
    )


def _end_history(frame: Any, child: ChildRecord) -> None:
    """The event that ends the child's history, by how it ended."""
    from moto.stepfunctions.parser.api import (
        ExecutionAbortedEventDetails,
        ExecutionFailedEventDetails,
        ExecutionSucceededEventDetails,
        ExecutionTimedOutEventDetails,
        HistoryEventType,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    if child.status == "SUCCEEDED":
        event_type = HistoryEventType.ExecutionSucceeded
        details = EventDetails(
            executionSucceededEventDetails=ExecutionSucceededEventDetails(
                output=json.dumps(child.output, separators=(",", ":"))
            )
        )
    elif child.status == "ABORTED":
        event_type = HistoryEventType.ExecutionAborted
        details = EventDetails(executionAbortedEventDetails=ExecutionAbortedEventDetails())
    elif child.status == "TIMED_OUT":
        event_type = HistoryEventType.ExecutionTimedOut
        details = EventDetails(executionTimedOutEventDetails=ExecutionTimedOutEventDetails())
    else:
        event_type = HistoryEventType.ExecutionFailed
        details = EventDetails(
            executionFailedEventDetails=ExecutionFailedEventDetails(
                error=child.error or "States.Runtime", cause=(child.cause or "")[:32_768]
            )
        )
    child.history.add_event(context=frame.event_history_context, event_type=event_type, event_details=details)


# -- 5: the result writer ------------------------------------------------------------------------


def _iso(moment: dt.datetime | None) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z" if moment else None


def _child_entry(run: MapRun, child: ChildRecord) -> dict[str, Any]:
    entry: dict[str, Any] = {"Input": json.dumps(child.input), "InputDetails": {"Included": True}}
    if child.status == "PENDING":
        return {**entry, "Status": "PENDING"}
    entry.update(
        ExecutionArn=child.execution_arn,
        Name=child.name,
        RedriveCount=0,
        StartDate=_iso(child.start),
        StateMachineArn=run.state_machine_arn,
        Status=child.status,
        StopDate=_iso(child.stop),
    )
    if child.status == "SUCCEEDED":
        entry.update(
            Output=json.dumps(child.output),
            OutputDetails={"Included": True},
            RedriveStatus="NOT_REDRIVABLE",
            RedriveStatusReason="Execution is SUCCEEDED and cannot be redriven",
        )
    else:
        entry.update(Error=child.error, Cause=child.cause, RedriveStatus="REDRIVABLE")
    return entry


def _write_results(writer: Any, env: Any, run: MapRun, *, on_results: bool = False) -> dict[str, Any]:
    """Evaluate the writer's Parameters against the Map state's INPUT (or, `on_results`, against
    the children's results, the other reading), write the files."""
    try:
        writer.parargs.eval(env=env)
    except Exception as error:
        if not on_results or type(error).__name__ == "FailureEventException":
            raise
        raise _failure(
            env, "States.Runtime", f"ResultWriter Parameters on the Map's results: {error}"
        ) from error
    parameters = env.stack.pop()
    try:
        s3 = _s3_client(writer.resource_eval, env)
        bucket, prefix = parameters["Bucket"], parameters.get("Prefix", "")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        run_id = run.map_run_arn.rsplit(":", 1)[-1]
        files: dict[str, list[dict[str, Any]]] = {"FAILED": [], "PENDING": [], "SUCCEEDED": []}
        groups = {
            "SUCCEEDED": [c for c in run.children if c.status == "SUCCEEDED"],
            "FAILED": [c for c in run.children if c.status in ("FAILED", "TIMED_OUT", "ABORTED")],
            "PENDING": [c for c in run.children if c.status == "PENDING"],
        }
        for status, children in groups.items():
            if not children:
                continue
            key = f"{prefix}{run_id}/{status}_0.json"
            body = json.dumps([_child_entry(run, c) for c in children]).encode()
            s3.put_object(Bucket=bucket, Key=key, Body=body)
            files[status].append({"Key": key, "Size": len(body)})
        manifest_key = f"{prefix}{run_id}/manifest.json"
        manifest = {"DestinationBucket": bucket, "MapRunArn": run.map_run_arn, "ResultFiles": files}
        s3.put_object(Bucket=bucket, Key=manifest_key, Body=json.dumps(manifest, indent=2).encode())
    except Exception as error:
        if type(error).__name__ == "FailureEventException":
            raise
        raise _failure(env, "States.ResultWriterFailed", f"{type(error).__name__}: {error}") from error
    run.result_writer_output = {
        "MapRunArn": run.map_run_arn,
        "ResultWriterDetails": {"Bucket": bucket, "Key": manifest_key},
    }
    return run.result_writer_output


def _write_results_state(writer: Any, env: Any, original: Callable[..., Any]) -> None:
    run: MapRun | None = env.heap.get("ferry_map_run")
    if run is None:
        return original(writer, env)
    harness: ParentHarness | None = env.heap.get("ferry_harness")
    if harness is not None and harness.result_writer_reads == "results":
        written = _write_results(writer, env, run, on_results=True)
        env.stack.pop()
    else:
        env.stack.pop()  # the children's outputs: AWS writes them to S3 instead of the state result
        written = _write_results(writer, env, run)
    env.stack.append(written)
    return None


# -- tasks: Lambda and Fargate, in-process -------------------------------------------------------


class LambdaRouter:
    """Runs the real handler for each Lambda invocation (by function name)."""

    def __init__(self, handlers: Mapping[str, Callable[[Any, Any], Any]], context: Callable[[str, int], Any]):
        self.handlers = dict(handlers)
        self.context = context  # (function name, call number) -> a Lambda context
        self.calls: list[tuple[str, Any]] = []
        self.largest_response: dict[str, int] = {}  # function name -> largest payload returned
        self._lock = threading.Lock()

    def invoke(self, function_name: str, body: Any, response_headers: dict[str, Any]) -> bytes:
        name = function_name.rsplit(":", 1)[-1]
        event = json.loads(body) if body else {}
        with self._lock:
            self.calls.append((name, event))
            number = len(self.calls)
        try:
            if name not in self.handlers:
                raise LookupError(f"parent_harness: no handler routed for Lambda function {name!r}")
            result = self.handlers[name](event, self.context(name, number))
            size = payload_bytes(result)
            with self._lock:
                self.largest_response[name] = max(self.largest_response.get(name, 0), size)
            return json.dumps(result).encode()
        except Exception as error:
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps(
                {
                    "errorType": type(error).__name__,
                    "errorMessage": str(error),
                    "stackTrace": traceback.format_exc().splitlines(),
                }
            ).encode()

    def called(self, name: str) -> list[Any]:
        return [event for n, event in self.calls if n == name]


class FargateTasks:
    """`ecs:runTask.sync` -> `handlers.copy_large.main()` in-process, one task at a time."""

    def __init__(
        self,
        environment: Mapping[str, str],
        main: Callable[[], int] | None = None,
        *,
        shared_services: bool = False,
    ) -> None:
        self.environment = dict(environment)  # the task definition's container environment
        self.main = main
        self.shared_services = shared_services
        self._services: dict[str, Callable[[], Any]] = {}  # by the settings' environment
        self.tasks: list[dict[str, Any]] = []
        self.sigterm_handlers: list[Any] = []
        self._lock = threading.Lock()

    def run(self, overrides: Mapping[str, str]) -> int:
        """Run one container with the task definition's environment plus the overrides."""
        from handlers import copy_large

        environment = {**self.environment, **overrides}
        with self._lock:
            saved = {name: os.environ.get(name) for name in environment}
            real_signal, real_services = copy_large.signal, copy_large.services
            os.environ.update(environment)
            copy_large.signal = SimpleNamespace(  # type: ignore[attr-defined]
                SIGTERM=signal.SIGTERM, signal=lambda _sig, handler: self.sigterm_handlers.append(handler)
            )
            copy_large.services = self._services_for(environment)  # type: ignore[attr-defined]
            try:
                code = (self.main or copy_large.main)()
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
            except Exception:  # the process would die with a traceback: a non-zero exit
                traceback.print_exc()
                code = 1
            finally:
                copy_large.signal, copy_large.services = real_signal, real_services  # type: ignore[attr-defined]
                for name, value in saved.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value
        return int(code)

    def _services_for(self, environment: Mapping[str, str]) -> Callable[[], Any]:
        """The task's clients and settings: its own, or (shared_services) those of every
        task run with the same settings (the object's own variables aside)."""
        if not self.shared_services:
            return _fargate_services(environment)
        per_task = ("FERRY_JOB_ID", "FERRY_BATCH_ID", "FERRY_ITEM")
        key = json.dumps({k: v for k, v in environment.items() if k not in per_task}, sort_keys=True)
        if key not in self._services:
            self._services[key] = _fargate_services(environment)
        return self._services[key]

    def eval_service_task(self, task: Any, env: Any, runtime: Any, parameters: dict[str, Any]) -> None:
        if task._get_boto_service_action() != "run_task":
            raise NotImplementedError(f"parent_harness: ecs:{task.resource.api_action} is not reproduced")
        overrides = _lower_keys(parameters).get("overrides", {})
        containers = overrides.get("containeroverrides", [])
        variables = {e["name"]: e["value"] for c in containers for e in c.get("environment", [])}
        container = containers[0].get("name", "container") if containers else "container"
        cluster = _lower_keys(parameters).get("cluster", "default")
        code = self.run(variables)
        description = {
            "ClusterArn": cluster,
            "TaskArn": f"arn:aws:ecs:{runtime.region}:{runtime.account}:task/{cluster.rsplit('/', 1)[-1]}/{uuid.uuid4().hex}",
            "TaskDefinitionArn": _lower_keys(parameters).get("taskdefinition"),
            "LastStatus": "STOPPED",
            "DesiredStatus": "STOPPED",
            "StopCode": "EssentialContainerExited",
            "StoppedReason": "Essential container in task exited",
            "StartedBy": parameters.get("StartedBy"),
            "Containers": [{"Name": container, "ExitCode": code, "LastStatus": "STOPPED"}],
            "Overrides": parameters.get("Overrides"),
        }
        with self._lock:
            self.tasks.append({"environment": variables, "exit_code": code, "description": description})
        env.stack.append({"Tasks": [description], "Failures": []})

    def sync_resolver(self, task: Any, env: Any) -> Callable[[], Any]:
        submitted = env.stack.pop()
        description = submitted["Tasks"][0]

        def resolve() -> Any:
            if any(c["ExitCode"] != 0 for c in description["Containers"]):
                # AWS: runTask.sync with an essential container exiting non-zero fails the task
                # with States.TaskFailed; the Cause is the stopped task's description.
                raise _failure(env, "States.TaskFailed", json.dumps(description))
            return description

        return resolve


def _lower_keys(data: Mapping[str, Any]) -> dict[str, Any]:
    def lower(node: Any) -> Any:
        if isinstance(node, Mapping):
            return {str(k).lower(): lower(v) for k, v in node.items()}
        if isinstance(node, list):
            return [lower(v) for v in node]
        return node

    return lower(data)


def _fargate_services(environment: Mapping[str, str]) -> Callable[[], Any]:
    """The container's own clients and settings (Fargate reads its environment, not the Lambda's)."""
    import boto3

    from ferry.pipeline.services import Services
    from ferry.pipeline.settings import WorkerSettings

    services = Services(
        s3=boto3.client("s3"),
        dynamodb=boto3.client("dynamodb"),
        settings=WorkerSettings.from_environ({**os.environ, **environment}),
    )
    return lambda: services
