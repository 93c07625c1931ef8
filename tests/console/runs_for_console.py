"""Runs the console tests act on: the demo's pay-invoice run and a question."""

from __future__ import annotations

from temporalio.client import Client

from durable_agents.control import runs
from durable_agents.runtime.settings import Settings
from durable_agents.starters.demo import DEMO_GOAL
from durable_agents.workflows.contracts import RunPolicy, RunRequest
from durable_agents.workflows.state import RunState
from tests.conftest import run_id, wait_for_approval

ALICE_DECIDES = RunPolicy(approvers={"pay_invoice": ["alice"]})


async def waiting_payment(
    client: Client, settings: Settings, policy: RunPolicy = ALICE_DECIDES
) -> RunState:
    """A pay-invoice run waiting for its approval; its state then."""
    rid = run_id("pay")
    request = RunRequest(goal=DEMO_GOAL, agent="invoice", label="pay-invoice", policy=policy)
    await runs.start_run(client, settings, request, rid)
    await wait_for_approval(client, rid)
    return await runs.get_state(client, rid)


async def asking(client: Client, settings: Settings) -> str:
    rid = run_id("ask")
    request = RunRequest(goal="ask", agent="question", label="ask-human")
    await runs.start_run(client, settings, request, rid)
    return rid
