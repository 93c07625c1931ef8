"""How the run calls an activity: one helper owns its name, its options (the table in
workflows/activity_options.py), the summary the Web UI shows, the typed result, and the
rule for what a cancellation means.

The rule: an activity that stopped because the run was cancelled did not fail; the run
was cancelled. That reaches the caller as `asyncio.CancelledError` (the run's end,
AgentWorkflow._end_of_story, says what it means), never as an `ActivityError`. So an
`ActivityError` a caller catches is always a failure for good (retries spent, or not
retryable): the model hears it (a tool), a person decides (an evaluator), or the run
fails; no caller has to tell the two apart.

One failure never reaches a caller either: a worker whose store does not hold the run's
records refused the activity (STORE_MISSING, activities/store_holds.py). That is no
answer at all: the run waits, with the worker's reason as the wait's summary, and calls
the activity again, until a worker whose store holds the run takes it (docs/
architecture.md, "Replicas and the stores").

Where replicas keep stores of their own, the run does not wait for luck: the first
store-bound activity's result names the queue of the worker whose store holds the run
(activities/store_queue.py), the run records it (RunState.store_queue), and its later
store-bound activities are scheduled there, so no other replica is ever handed them.
Histories recorded before carry no such result, so they replay as they ran, unpatched;
with one shared store no worker stamps one and nothing changes.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar, overload

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows.activity_io import STORE_MISSING, STORE_QUEUE_FIELD
    from durable_agents.workflows.activity_options import FIXED, STORE_BOUND, STORE_WAITS, Options
    from durable_agents.workflows.contract_base import preview
    from durable_agents.workflows.state import RunState

Result = TypeVar("Result")


@overload
async def call_activity(
    name: str,
    arg: Any,
    *,
    summary: str,
    result: type[Result],
    options: Options | None = None,
    local: bool = False,
    cancellation_fails: bool = False,
) -> Result: ...


@overload
async def call_activity(
    name: str,
    arg: Any,
    *,
    summary: str,
    result: None = None,
    options: Options | None = None,
    local: bool = False,
    cancellation_fails: bool = False,
) -> None: ...


async def call_activity(
    name: str,
    arg: Any,
    *,
    summary: str,
    result: type[Any] | None = None,
    options: Options | None = None,
    local: bool = False,
    cancellation_fails: bool = False,
) -> Any:
    """Call the activity registered as `name` with its options (those of FIXED unless the
    run's own are given); `local`: as a local activity (its result in the history too).
    `cancellation_fails`: the one exception to the rule, for a check made as the run
    starts whose runs recorded a cancellation as its failure (workflows/beginnings/)."""
    given: dict[str, Any] = (options or FIXED[name]).kwargs()
    store_bound = name in STORE_BOUND and not local
    if store_bound and (queue := store_queue()) is not None:
        given["task_queue"] = queue
    waits = 0
    while True:
        try:
            if local:
                return await workflow.execute_local_activity(
                    name, arg, result_type=result, summary=summary, **given
                )
            answer = await workflow.execute_activity(
                name, arg, result_type=result, summary=summary, **given
            )
            if store_bound:
                learn_store_queue(answer)
            return answer
        except ActivityError as err:
            if is_cancellation(err) and not cancellation_fails:
                raise asyncio.CancelledError() from err
            refused = store_refusal(err)
            if refused is None:
                raise
        # Only runs whose activity was refused for its store come here: no history
        # recorded before the check takes this path, so it needs no patch.
        wait = STORE_WAITS[min(waits, len(STORE_WAITS) - 1)]
        waits += 1
        await workflow.sleep(wait, summary=preview(f"store: {refused}", 600))


def run_state() -> RunState | None:
    """The run's state, as the agent workflow holds it (AgentWorkflow.state): the one
    place that knows where its store is, whichever part calls. None in a workflow of
    another kind (a test's own running a part alone)."""
    state = getattr(workflow.instance(), "state", None)
    return state if isinstance(state, RunState) else None


def store_queue() -> str | None:
    """The queue of the worker whose store holds the run, once learned (else None: the
    activity goes to the run's own queue, as every activity of a shared store does)."""
    state = run_state()
    return state.store_queue if state is not None else None


def learn_store_queue(answer: Any) -> None:
    """Record the queue a store-bound activity's result names: a worker with a store of
    its own stamps it there when the call reached it through the main queue."""
    queue = getattr(answer, STORE_QUEUE_FIELD, None)
    state = run_state()
    if state is None or not isinstance(queue, str) or queue == state.store_queue:
        return
    # Only a store's queue (`<queue>@<store id>`); which queue the run runs on is not
    # asked: a replay's is not the run's. With keys the result is sealed (the worker's).
    if "@" in queue:
        state.transcript.held_at(queue)


def store_refusal(err: ActivityError) -> str | None:
    """Why a worker's store refused the activity (StoreMissingRecords), or None."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.type == STORE_MISSING:
        return cause.message or STORE_MISSING
    return None


def is_cancellation(err: BaseException) -> bool:
    """Whether an error is the run's cancellation (asked of what a story ends with)."""
    if isinstance(err, asyncio.CancelledError):
        return True
    return isinstance(err, ActivityError) and isinstance(err.cause, CancelledError)
