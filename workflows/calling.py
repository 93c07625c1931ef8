"""`run_agent`: your own workflow calls an agent and gets its answer, typed.

    @workflow.defn
    class Billing:
        @workflow.run
        async def run(self, dispute: str) -> str:
            decision = await run_agent(triage, dispute, output_type=TriageDecision)
            return "refund" if decision.refund else "close"

The agent runs as a child workflow (the same AgentWorkflow as any run): its approvals
wait in the console, its budget, cancellation, time travel and what-if work as on any
run, and its id is the parent's with a deterministic suffix, so `agentctl show` finds it.
Deterministic workflow code: it may only be called from inside a workflow.
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
from temporalio.exceptions import ApplicationError

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

# The failure types a calling workflow can tell apart (ApplicationError.type).
NO_ANSWER = "AgentGaveNoAnswer"
BAD_REQUEST = "AgentRequestInvalid"


@overload
async def run_agent(
    agent: Agent | str,
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
    agent: Agent | str,
    goal: str,
    *,
    output_type: None = None,
    run_id: str | None = None,
    task_queue: str | None = None,
    execution_timeout: timedelta | None = None,
    **options: Unpack[StartFields],
) -> RunResult: ...


async def run_agent(
    agent: Agent | str,
    goal: str,
    *,
    output_type: type[BaseModel] | None = None,
    run_id: str | None = None,
    task_queue: str | None = None,
    execution_timeout: timedelta | None = None,
    **options: Unpack[StartFields],
) -> Any:
    """Run `agent` on `goal` as a child of the calling workflow and wait for it.

    With `output_type` (a pydantic model, usually the agent's own `output_type`): the
    answer as that model, or an ApplicationError of type AgentGaveNoAnswer when the run
    ended without one (cancelled, or its agent declares no type) or with one that is not
    that model. Without: the run's RunResult. A run that fails (its answer never in
    shape, say) raises Temporal's ChildWorkflowError, as any child; an agent no worker of
    the caller's task queue serves is an AgentRequestInvalid error at once.
    `run_id`: the child's id (default: the caller's id and a deterministic suffix);
    `task_queue`: where its worker listens (default: the caller's); the options are those
    of `AgentClient.start` (durable_agents.StartOptions)."""
    # An Agent the caller's sandbox imported is another class than ours: read its name.
    name = agent if isinstance(agent, str) else agent.name
    if output_type is not None and not (
        isinstance(output_type, type) and issubclass(output_type, BaseModel)
    ):
        raise ApplicationError(
            f"output_type {output_type!r} is not a pydantic model class",
            type=BAD_REQUEST,
            non_retryable=True,
        )
    try:
        request = StartOptions.of(**options).request(name, goal)
    except StartOptionsError as err:
        raise ApplicationError(str(err), type=BAD_REQUEST, non_retryable=True) from None
    info = workflow.info()
    if task_queue in (None, info.task_queue) and name not in served(info.task_queue).agents:
        # Its run would wait for a worker with that agent, and the caller with it, silently.
        known = ", ".join(sorted(served(info.task_queue).agents)) or "none"
        raise ApplicationError(
            f"no agent named {name!r} on task queue {info.task_queue!r} (agents: {known})",
            type=BAD_REQUEST,
            non_retryable=True,
        )
    child_id = run_id or _child_id(info.workflow_id, name)
    if not re.fullmatch(RUN_ID_PATTERN, child_id):
        raise ApplicationError(
            f"bad run id {child_id!r}: use letters, digits and . _ : - (at most 200)",
            type=BAD_REQUEST,
            non_retryable=True,
        )
    result: RunResult = await workflow.execute_child_workflow(
        "AgentWorkflow",
        request,
        id=child_id,
        task_queue=task_queue or info.task_queue,
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
    if output_type is None:
        return result
    return answer_as(result, output_type, child_id)


def answer_as(result: RunResult, output_type: type[AnswerT], run_id: str) -> AnswerT:
    """The run's answer as `output_type`, or ApplicationError(AgentGaveNoAnswer)."""
    try:
        return answer_of(result, output_type, run_id)
    except NoAnswer as err:
        raise ApplicationError(str(err), type=NO_ANSWER, non_retryable=True) from None


def _child_id(parent_id: str, agent: str) -> str:
    """The parent's id, made a valid run id, and a suffix from the workflow's own
    deterministic random (the same on every replay)."""
    base = re.sub(r"[^A-Za-z0-9._:-]", "-", parent_id).lstrip("._:-")[:160] or "run"
    return f"{base}.{agent[:20]}-{workflow.uuid4().hex[:8]}"
