"""A team's workflow that calls the same agent twice at once: two agent runs of one
caller wait for people together (tests/control/test_callers.py)."""

from __future__ import annotations

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agents import run_agent


@workflow.defn
class TwoTriages:
    @workflow.run
    async def run(self, dispute: str) -> list[str]:
        results = await asyncio.gather(run_agent("triage", dispute), run_agent("triage", dispute))
        return [result.status for result in results]
