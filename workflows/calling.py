"""`run_agent`: your own workflow calls an agent and gets its answer, typed.

    @workflow.defn
    class Billing:
        @workflow.run
        async def run(self, dispute: str) -> str:
            decision = await run_agent(triage, dispute)  # triage: Agent[TriageDecision]
            return "refund" if decision.refund else "close"

The agent runs as a child workflow (the same AgentWorkflow as any run): its approvals
wait in the console, its budget, cancellation, time travel and what-if work as on any
run, and its id is the parent's with a deterministic suffix, so `agentctl show` finds it.
Deterministic workflow code: it may only be called from inside a workflow. Its errors
(AgentRequestInvalid, AgentGaveNoAnswer) and RunResult are importable from workflow code:
`from durable_agents import AgentGaveNoAnswer, RunResult`.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any, TypeVar, Unpack, overload

from temporalio import workflow
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from durable_agents.workflows import search_attributes as sa
    from durable_agents.workflows.agents import Agent
    from durable_agents.workflows.contract_base import RUN_ID_PATTERN, preview
    from durable_agents.workflows.contracts import RunResult
    from durable_agents.workflows.output import NoAnswer, answer_of
    from durable_agents.workflows.records import RunStatus
    from durable_agents.workflows.registry import served
    from durable_agents.workflows.start_options import (
        StartFields,
        StartOptions,
        StartOptionsError,
    )

AnswerT = TypeVar("AnswerT", bound=BaseModel)

# The failure types a calling workflow can tell apart (ApplicationError.type): a client
# reading the caller's failure sees these names.
NO_ANSWER = "AgentGaveNoAnswer"
BAD_REQUEST = "AgentRequestInvalid"


class AgentRequestInvalid(ApplicationError):
    """`run_agent` refused the call before starting anything: an unknown agent, bad
    options, or an `output_type` that is not the agent's declared one. Non-retryable: the
    same call would be refused again."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type=BAD_REQUEST, non_retryable=True)


class AgentGaveNoAnswer(ApplicationError):
    """The agent's run ended without an answer of the type asked for (cancelled, say)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type=NO_ANSWER, non_retryable=True)


@overload
async def run_agent(
    agent: Agent[AnswerT],
    goal: str,
    *,
    output_type: type[AnswerT] | None = None,
    run_id: str | None = None,
    task_queue: str | None = None,
    execution_timeout: timedelta | None = None,
    **options: Unpack[StartFields],
) -> AnswerT: ...


@overload
async def run_agent(
    agent: str,
    goal: str,
    *,
    output_type: type[AnswerT],
    run_id: str | None = None,
    task_queue: str | None = None,
    execution_timeout: timedelta | None = None,
    **options: Unpack[StartFields],
) -> AnswerT: ...


@overload
async def run_agent(
    agent: str,
    goal: str,
    *,
    output_type: None = None,
    run_id: str | None = None,
    task_queue: str | None = None,
    execution_timeout: timedelta | None = None,
    **options: Unpack[StartFields],
) -> RunResult: ...


async def run_agent(
    agent: Agent[Any] | str,
    goal: str,
    *,
    output_type: type[BaseModel] | None = None,
    run_id: str | None = None,
    task_queue: str | None = None,
    execution_timeout: timedelta | None = None,
    **options: Unpack[StartFields],
) -> Any:
    """Run `agent` on `goal` as a child of the calling workflow and wait for it.

    An agent with an answer type (`Agent(output_type=RefundDecision)`, an
    `Agent[RefundDecision]`): its answer as that model, typed so for mypy; an agent named
    by its name: the run's RunResult, or its answer as `output_type`; an agent that
    declares no answer type: the RunResult. `output_type`, when given, must be the one the
    agent declares (mypy says so; so does this call, before starting anything). A run that
    ended without an answer raises AgentGaveNoAnswer; a run that fails (its answer never
    in shape, say) raises Temporal's ChildWorkflowError, as any child; a refused call (an
    agent no worker of the caller's task queue serves, bad options, a run id taken by a
    run started before) raises AgentRequestInvalid at once.
    `run_id`: the child's id (default: the caller's id and a deterministic suffix);
    `task_queue`: the caller's own, the only one allowed (an agent's worker refuses a run
    started from another queue, so the call is refused instead of its run); the options
    are those of `AgentClient.start` (durable_agents.StartOptions)."""
    # An Agent the caller's sandbox imported is another class than ours: read its name.
    name = agent if isinstance(agent, str) else agent.name
    if output_type is not None and not (
        isinstance(output_type, type) and issubclass(output_type, BaseModel)
    ):
        raise AgentRequestInvalid(f"output_type {output_type!r} is not a pydantic model class")
    try:
        request = StartOptions.of(**options).request(name, goal)
    except StartOptionsError as err:
        raise AgentRequestInvalid(str(err)) from None
    info = workflow.info()
    if task_queue not in (None, info.task_queue):
        # The agent's worker would refuse the run at its first model call (worker/callers.py:
        # a run started by a workflow on another queue is not of its deployment).
        raise AgentRequestInvalid(
            f"task_queue {task_queue!r} is not this workflow's ({info.task_queue!r}): an "
            "agent's worker refuses a run started from another task queue; run this "
            "workflow on the agent's task queue"
        )
    if name not in served(info.task_queue).agents:
        # Its run would wait for a worker with that agent, and the caller with it, silently.
        known = ", ".join(sorted(served(info.task_queue).agents)) or "none"
        raise AgentRequestInvalid(
            f"no agent named {name!r} on task queue {info.task_queue!r} (agents: {known})"
        )
    declared = _declared_type(agent, served(info.task_queue).agents[name])
    if output_type is not None:
        _check_same_type(name, output_type, declared)
    child_id = run_id or _child_id(info.workflow_id, name)
    if not re.fullmatch(RUN_ID_PATTERN, child_id):
        raise AgentRequestInvalid(
            f"bad run id {child_id!r}: use letters, digits and . _ : - (at most 200)"
        )
    try:
        result: RunResult = await workflow.execute_child_workflow(
            "AgentWorkflow",
            request,
            id=child_id,
            task_queue=info.task_queue,
            result_type=RunResult,
            execution_timeout=execution_timeout,
            # A closed run of this id is this call's: never a second run of it.
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            # The caller cancelled: the agent's run is asked to stop as a person's cancel would.
            parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
            static_summary=preview(f"agent {name}: {goal}", 120),
            # Findable by status from its first moment (agentctl list, the console's inbox).
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(sa.STATUS, RunStatus.PLANNING.value)]
            ),
        )
    except WorkflowAlreadyStartedError:
        # Refused at the start: nothing of the agent ran again, nothing was repeated.
        raise AgentRequestInvalid(
            f"run id {child_id!r} is taken: a run of that id was started already (running "
            "or closed), and run_agent never starts a second; give another run_id"
        ) from None
    if output_type is None and isinstance(agent, str):
        return result  # by name: the whole result, as the overload says
    wanted = output_type or declared
    if wanted is None:
        return result  # an agent of free text
    return answer_as(result, wanted, child_id)


def _declared_type(agent: Agent[Any] | str, served_agent: Agent[Any]) -> type[BaseModel] | None:
    """The answer type the agent declares (None: free text), from the Agent given (what
    mypy typed the call by), or the one this worker serves under its name."""
    source = served_agent if isinstance(agent, str) else agent
    return source.output_type


def _check_same_type(name: str, asked: type[BaseModel], declared: type[BaseModel] | None) -> None:
    """The type asked for is the agent's own, or the call is refused before its run
    starts: the answer of another would be validated only after the whole run, its
    effects included. A class of the same module and name is the same type (the caller's
    sandbox may have imported its own copy)."""
    if declared is None:
        raise AgentRequestInvalid(
            f"agent {name!r} declares no output_type, and the call asks for "
            f"{asked.__name__}: declare it (Agent(output_type={asked.__name__})) or leave "
            "output_type out"
        )
    if declared is asked or (declared.__module__, declared.__qualname__) == (
        asked.__module__,
        asked.__qualname__,
    ):
        return
    raise AgentRequestInvalid(
        f"agent {name!r} answers {declared.__name__}, not {asked.__name__}: ask for "
        f"output_type={declared.__name__}, or leave output_type out"
    )


def answer_as(result: RunResult, output_type: type[AnswerT], run_id: str) -> AnswerT:
    """The run's answer as `output_type`, or AgentGaveNoAnswer."""
    try:
        return answer_of(result, output_type, run_id)
    except NoAnswer as err:
        raise AgentGaveNoAnswer(str(err)) from None


def _child_id(parent_id: str, agent: str) -> str:
    """The parent's id, made a valid run id, and a suffix from the workflow's own
    deterministic random (the same on every replay)."""
    base = re.sub(r"[^A-Za-z0-9._:-]", "-", parent_id).lstrip("._:-")[:160] or "run"
    return f"{base}.{agent[:20]}-{workflow.uuid4().hex[:8]}"
