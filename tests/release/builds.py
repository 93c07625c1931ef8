"""Two builds of the agent workflow, as a deploy meets them: the same change (a short wait
before the run begins) made without and with `workflow.patched`."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import RunRequest, RunResult

PATCH = "settle-before-start"
WAIT = timedelta(milliseconds=10)


@workflow.defn(name="AgentWorkflow", sandboxed=False)
class UnpatchedStart(AgentWorkflow):
    """A timer before the first command, with no patch: every recorded run diverges."""

    @workflow.run
    async def run(self, request: RunRequest) -> RunResult:
        await workflow.sleep(WAIT)
        return await super().run(request)


@workflow.defn(name="AgentWorkflow", sandboxed=False)
class PatchedStart(AgentWorkflow):
    """The same change behind a patch: recorded runs keep their path."""

    @workflow.run
    async def run(self, request: RunRequest) -> RunResult:
        if workflow.patched(PATCH):
            await workflow.sleep(WAIT)
        return await super().run(request)
