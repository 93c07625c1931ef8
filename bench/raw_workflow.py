"""The engine's floor: a minimal workflow doing per step what our agent does (one model
activity, one tool activity) and what any agent must: its model activity makes the same
HTTP request to the same offline model through the same client library (the openai
client's own POST, the reply read as JSON), and its tool activity does the tool's work.
What is left between this and ours is our own overhead. Compared in bench/side_by_side.py.
The model activity lives in bench/systems/raw.py (the workflow's sandbox keeps the openai
client out of this module).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow


@dataclass
class RawStep:
    step: int
    scenario: str  # the offline model's `loop` scenario, as the peers send it


@dataclass
class RawRun:
    steps: int
    scenario: str


@workflow.defn(name="RawWorkflow")
class RawWorkflow:
    @workflow.run
    async def run(self, run: RawRun) -> int:
        timeout = timedelta(seconds=30)
        for step in range(1, run.steps + 1):
            await workflow.execute_activity(
                "raw_model", RawStep(step, run.scenario), start_to_close_timeout=timeout
            )
            await workflow.execute_activity("raw_tool", step, start_to_close_timeout=timeout)
        return run.steps


@workflow.defn(name="RawWaitingWorkflow")
class RawWaitingWorkflow:
    """The least a run waiting for a person can be: one flag, one signal, one query."""

    def __init__(self) -> None:
        self.approved = False

    @workflow.run
    async def run(self) -> bool:
        await workflow.wait_condition(lambda: self.approved)
        return self.approved

    @workflow.signal
    def approve(self) -> None:
        self.approved = True

    @workflow.query
    def waiting(self) -> bool:
        return not self.approved
