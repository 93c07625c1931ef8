"""The engine's ceiling: a minimal workflow doing per step what our agent does (one model
activity, one tool activity), with trivial activities. Compared in bench/side_by_side.py."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow


@activity.defn(name="raw_model")
async def raw_model(step: int) -> str:
    return f"reply {step}"


@activity.defn(name="raw_tool")
async def raw_tool(step: int) -> str:
    return f"done {step}"


@workflow.defn(name="RawWorkflow")
class RawWorkflow:
    @workflow.run
    async def run(self, steps: int) -> int:
        timeout = timedelta(seconds=30)
        for step in range(steps):
            await workflow.execute_activity(raw_model, step, start_to_close_timeout=timeout)
            await workflow.execute_activity(raw_tool, step, start_to_close_timeout=timeout)
        return steps


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
