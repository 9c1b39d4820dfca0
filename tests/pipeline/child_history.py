"""The most history events an execution of a state machine can write, read from its ASL.

Step Functions keeps at most 25,000 events in a STANDARD execution's history; the execution
fails when it would write more (a redrive cannot save it). What each state writes, as
Step Functions' history shows it (event types of the GetExecutionHistory API reference):

- the execution: ExecutionStarted and ExecutionSucceeded (or Failed, Aborted, TimedOut): 2;
- a Pass, Choice, Succeed or Fail state: <Type>StateEntered and <Type>StateExited: 2;
- a Task state: TaskStateEntered and TaskStateExited, and per attempt TaskScheduled,
  TaskStarted, TaskSubmitted (a `.sync` integration's) and TaskSucceeded (or TaskFailed,
  TaskTimedOut): 2 + 4 per attempt, counted for every task (a request-response Lambda writes
  no TaskSubmitted: the count is then one too high per attempt, never too low). Attempts are
  the first plus each Retrier's MaxAttempts (3 when not given, the ASL default): each Retrier
  counts its own, so the worst case is their sum;
- a Map state: MapStateEntered, MapStateStarted, MapStateSucceeded (or Failed), MapStateExited;
  a DISTRIBUTED one adds MapRunStarted and MapRunSucceeded (or Failed) and nothing per item
  (each item is a child execution with its own history); an INLINE one adds
  MapIterationStarted and MapIterationSucceeded (or Failed) per item, and each item's states.

The worst path goes round a loop as often as allowed: the pass loop of the child enters its
StartAt (CopyBatch) once per pass, at most max_passes times; no other state may be entered
twice (a second loop would have no bound, and is refused here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

HISTORY_LIMIT = 25_000
EXECUTION_EVENTS = 2
STATE_EVENTS = 2
ATTEMPT_EVENTS = 4
MAP_EVENTS = 4
MAP_RUN_EVENTS = 2
ITERATION_EVENTS = 2
DEFAULT_MAX_ATTEMPTS = 3


def attempts(state: Mapping[str, Any]) -> int:
    """A task's attempts at most: the first, then every Retrier's own MaxAttempts."""
    return 1 + sum(int(r.get("MaxAttempts", DEFAULT_MAX_ATTEMPTS)) for r in state.get("Retry", []))


def state_events(state: Mapping[str, Any], items: int) -> int:
    """The events one entry into `state` writes at most; an INLINE Map over `items` items."""
    if state["Type"] == "Task":
        return STATE_EVENTS + ATTEMPT_EVENTS * attempts(state)
    if state["Type"] == "Map":
        if is_distributed(state):
            return MAP_EVENTS + MAP_RUN_EVENTS
        per_item = ITERATION_EVENTS + longest_path(state["ItemProcessor"], passes=1, items=items)
        return MAP_EVENTS + items * per_item
    if state["Type"] == "Parallel":
        raise NotImplementedError("a Parallel state's history is not modelled")
    return STATE_EVENTS


def is_distributed(state: Mapping[str, Any]) -> bool:
    processor = state.get("ItemProcessor") or {}
    return (processor.get("ProcessorConfig") or {}).get("Mode") == "DISTRIBUTED"


def successors(state: Mapping[str, Any]) -> list[str]:
    """Every state `state` may hand over to: Next, a Choice's branches and Default, a Catch."""
    names = [state["Next"]] if "Next" in state else []
    names += [choice["Next"] for choice in state.get("Choices", [])]
    names += [state["Default"]] if "Default" in state else []
    names += [catcher["Next"] for catcher in state.get("Catch", [])]
    return names


def ends(state: Mapping[str, Any]) -> bool:
    """Whether an execution may end at `state` (End, Succeed, Fail, or a Task whose error no
    Catch matches: an uncaught failure ends it too)."""
    if state["Type"] in ("Succeed", "Fail") or state.get("End"):
        return True
    caught = {e for c in state.get("Catch", []) for e in c["ErrorEquals"]}
    return state["Type"] in ("Task", "Map") and "States.ALL" not in caught


def longest_path(machine: Mapping[str, Any], *, passes: int, items: int) -> int:
    """The most events the states of one execution of `machine` write, its StartAt entered at
    most `passes` times (the pass loop), INLINE Maps over `items` items. Worked out one pass
    at a time: each layer holds the most from entering each state with one more entry into
    StartAt allowed than the layer before."""
    again: int | None = None  # entering StartAt once more: not allowed in the first layer
    for _ in range(passes):
        again = _layer(machine, items, again).get(machine["StartAt"])
    if again is None:
        raise ValueError(f"no end is reachable from {machine['StartAt']}")
    return again


def _layer(machine: Mapping[str, Any], items: int, again: int | None) -> dict[str, int | None]:
    """For each state reached from StartAt: the most events from entering it to an end (None
    when no end is reachable), where entering StartAt again costs `again` (None: not allowed)."""
    states: Mapping[str, Mapping[str, Any]] = machine["States"]
    start = machine["StartAt"]
    layer: dict[str, int | None] = {}
    on_path: set[str] = set()

    def most(name: str) -> int | None:
        if name in layer:
            return layer[name]
        if name in on_path:
            raise ValueError(f"{name} is on a loop that does not go through {start}: no bound")
        on_path.add(name)
        state = states[name]
        tails = [0] if ends(state) else []
        for following in successors(state):
            tail = again if following == start else most(following)
            if tail is not None:
                tails.append(tail)
        on_path.discard(name)
        layer[name] = state_events(state, items) + max(tails) if tails else None
        return layer[name]

    most(start)
    return layer


def execution_events(machine: Mapping[str, Any], *, passes: int, items: int) -> int:
    """The most history events one execution of `machine` writes."""
    return EXECUTION_EVENTS + longest_path(machine, passes=passes, items=items)


def nested_machines(machine: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Each DISTRIBUTED Map's item processor, at any depth, by the Map's name: each runs as
    its own child executions, with their own histories."""
    found: dict[str, Mapping[str, Any]] = {}
    for name, state in machine["States"].items():
        processor = state.get("ItemProcessor")
        if not isinstance(processor, Mapping):
            continue
        if is_distributed(state):
            found[name] = processor
        found.update(nested_machines(processor))
    return found
