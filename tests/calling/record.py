"""Re-record the calling workflow's replay fixtures: the team's Billing workflow calling
the triage agent, whose refund waits for a person, then answers in shape. Both histories
(the caller's and the agent run's) go to tests/histories/calling/.

    python -m tests.calling.record
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from durable_agents.control import timeline
from durable_agents.testing import AgentTestbed, ScriptedModel, call, say
from tests.calling.billing import GOOD, Billing, Dispute, triage
from tests.conftest import start_time_skipping

HERE = Path(__file__).parent.parent / "histories" / "calling"
CALLER, CHILD = "billing-42", "billing-42.triage"


async def record() -> None:
    model = ScriptedModel([call("issue_refund", customer="42", amount=80.0), say(GOOD)])
    env = await start_time_skipping()
    try:
        async with AgentTestbed(triage, model=model, env=env, workflows=[Billing]) as bed:
            handle = await bed.temporal.start_workflow(
                Billing.run,
                Dispute(text="Customer 42 was charged twice", child_id=CHILD),
                id=CALLER,
                task_queue=bed.task_queue,
            )
            child = bed.client.run(CHILD)
            for _ in range(600):
                try:
                    request = await child.next_approval(within=0.1)
                    break
                except Exception:
                    await asyncio.sleep(0.05)
            await child.approve(request.request_id, by="finance")
            print(await handle.result())
            for name in (CALLER, CHILD):
                history = await bed.temporal.get_workflow_handle(name).fetch_history()
                timeline.export_history(history, HERE / f"{name}.json")
                print(f"  {name}: {len(history.events)} events")
    finally:
        await env.shutdown()


if __name__ == "__main__":
    asyncio.run(record())
