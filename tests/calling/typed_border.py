"""A team's workflow module that imports what it needs from `durable_agents` as plain
workflow code (outside a passed-through block; the team's agent module is passed
through, as the README's is): run_agent, its errors and RunResult load inside Temporal's
sandbox. The project's mypy run checks this file: the `type: ignore` on the mismatched
call is an error of its own (warn_unused_ignores) if mypy stops flagging it, and each
`assert_type` holds the answer's type to the agent's."""

from __future__ import annotations

from typing import assert_type

from pydantic import BaseModel
from temporalio import workflow

from durable_agents import AgentGaveNoAnswer, AgentRequestInvalid, RunResult, run_agent

with workflow.unsafe.imports_passed_through():  # the team's agent module, as the README's
    from tests.calling.billing import TriageDecision, triage
    from tests.calling.more_agents import notes


class Verdict(BaseModel):
    guilty: bool


@workflow.defn
class AsksTheAgentsOwnType:
    """The agent's answer, typed as its declared type with or without output_type."""

    @workflow.run
    async def run(self, goal: str) -> list[str]:
        decision = await run_agent(triage, goal)
        assert_type(decision, TriageDecision)
        again = await run_agent(triage, goal, output_type=TriageDecision)
        assert_type(again, TriageDecision)
        by_name = await run_agent("triage", goal)
        assert_type(by_name, RunResult)
        return [type(decision).__name__, decision.priority, again.priority, by_name.status]


@workflow.defn
class AsksForAnotherType:
    """An output_type that is not the agent's: a mypy error, and refused before start."""

    @workflow.run
    async def run(self, goal: str) -> str:
        try:
            verdict = await run_agent(triage, goal, output_type=Verdict)  # type: ignore[misc]
        except AgentRequestInvalid as err:
            return f"refused: {err.message}"
        except AgentGaveNoAnswer as err:  # what an unchecked call ended in, after the run
            return f"no answer: {err.message}"
        return str(verdict)


@workflow.defn
class AsksByNameForAnotherType:
    """By name: mypy cannot know the agent's type; the call is refused before start."""

    @workflow.run
    async def run(self, goal: str) -> str:
        try:
            verdict = await run_agent("triage", goal, output_type=Verdict)
        except AgentRequestInvalid as err:
            return f"refused: {err.message}"
        return str(verdict)


class Elsewhere(BaseModel):
    """A goal for the agent, served by a worker on another task queue."""

    goal: str
    task_queue: str


@workflow.defn
class AsksAnotherQueue:
    """An agent served on another task queue: its worker would refuse a run this workflow
    started (worker/callers.py), so the call is refused before start, typed or not."""

    @workflow.run
    async def run(self, call: Elsewhere) -> list[str]:
        said = []
        try:
            decision = await run_agent(triage, call.goal, task_queue=call.task_queue)
            assert_type(decision, TriageDecision)
            said.append(decision.priority)
        except AgentRequestInvalid as err:
            said.append(f"refused: {err.message}")
        try:
            verdict = await run_agent(  # type: ignore[misc]
                triage, call.goal, output_type=Verdict, task_queue=call.task_queue
            )
            said.append(str(verdict))
        except AgentRequestInvalid as err:
            said.append(f"refused: {err.message}")
        return said


@workflow.defn
class AsksFreeTextForAType:
    """An agent of free text asked for a model, by its Agent and by its name: refused."""

    @workflow.run
    async def run(self, goal: str) -> list[str]:
        said = []
        try:
            said.append(str(await run_agent(notes, goal, output_type=Verdict)))
        except AgentRequestInvalid as err:
            said.append(f"refused: {err.message}")
        try:
            said.append(str(await run_agent("notes", goal, output_type=Verdict)))
        except AgentRequestInvalid as err:
            said.append(f"refused: {err.message}")
        return said
