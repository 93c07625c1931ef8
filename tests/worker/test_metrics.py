"""The worker's Prometheus endpoint: the SDK's metrics and ours, scraped over HTTP."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from durable_agents.activities.crash_points import CrashPoints
from durable_agents.activities.model import ModelActivities
from durable_agents.activities.stores import Stores
from durable_agents.activities.tools import ToolActivities
from durable_agents.control import runs
from durable_agents.examples.providers import Providers
from durable_agents.infra.offline_model.embedded import free_port
from durable_agents.runtime import telemetry
from durable_agents.runtime.client import connect
from durable_agents.worker import run_metrics
from durable_agents.worker.main import build_worker
from durable_agents.workflows.activity_io import ChatMessage, ModelCallInput
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision
from tests.conftest import (
    EXAMPLE_AGENTS,
    eventually,
    pay_invoice_call,
    run_id,
    settings_for,
    start_dev_server,
    wait_for_approval,
)


def scrape(port: int) -> str:
    response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    response.raise_for_status()
    return response.text


def value(text: str, name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include `labels` (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"^{name}(?:{{(.*)}})? (\S+)$", line)
        if not match:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(match.group(2))
    return total


@pytest.fixture(scope="module")
async def own_server() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server for this module alone: the run gauges count the whole namespace, and
    their exact differences must not depend on what other tests left open."""
    env = await start_dev_server()
    yield env
    await env.shutdown()


async def test_the_metrics_endpoint_serves_sdk_and_agent_metrics(
    own_server, model_server, tmp_path
):
    port = free_port()
    settings = settings_for(own_server.client, tmp_path / "data", model_server.port)
    settings = settings.model_copy(
        update={"metrics_port": port, "price_input_per_mtok": 3.0, "price_output_per_mtok": 15.0}
    )
    runtime = telemetry.runtime_for(settings)
    assert runtime is not None
    client = await connect(settings, runtime=runtime)
    gauges = telemetry.RunGauges(runtime.metric_meter)
    rid = run_id("metered")

    async def gauge(name: str, **labels: str) -> float:
        await run_metrics.refresh(client, gauges)
        return value(scrape(port), name, **labels)

    async with build_worker(client, settings):
        waiting_before = await gauge("durable_agents_approvals_waiting")
        completed_before = await gauge("durable_agents_runs", status="completed")
        await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)
        await wait_for_approval(client, rid)

        async def approvals_seen():
            return await gauge("durable_agents_approvals_waiting") == waiting_before + 1

        await eventually(approvals_seen)
        text = scrape(port)
        assert value(text, "durable_agents_runs", status="awaiting_approval") == waiting_before + 1
        await runs.approve(client, rid, Decision(by="alice"))
        assert (await runs.wait_result(client, rid)).status == "completed"

        async def completed_counted():
            return await gauge("durable_agents_runs", status="completed") == completed_before + 1

        await eventually(completed_counted)
        assert await gauge("durable_agents_approvals_waiting") == waiting_before
        usage = (await runs.get_summary(client, rid)).usage

    text = scrape(port)
    # The SDK runtime's own metrics.
    assert value(text, "temporal_activity_execution_latency_count", activity_type="call_model") > 0
    assert value(text, "temporal_workflow_completed", workflow_type="AgentWorkflow") >= 1
    # Ours: the tokens and cost the run recorded, the one charge the provider made.
    assert value(text, "durable_agents_model_tokens", direction="input") == usage.input_tokens > 0
    assert value(text, "durable_agents_model_tokens", direction="output") == usage.output_tokens
    cost = value(text, "durable_agents_model_cost_microusd")
    assert cost > 0 and abs(cost - usage.cost_usd * 1_000_000) <= usage.model_calls
    providers = Providers.open(settings.data_dir)
    charges = [e for e in providers.payments.effects(rid) if e["operation"] == "charge"]
    assert value(text, "durable_agents_effects", tool="pay_invoice") == len(charges) == 1


async def test_a_refused_payment_is_not_counted_as_an_effect(dev_env, settings):
    """The provider refuses (the invoice was paid elsewhere): nothing happened, so the
    effects counter does not move for it; the effects that happened are counted."""
    port = free_port()
    settings = settings.model_copy(update={"metrics_port": port})
    runtime = telemetry.runtime_for(settings)
    assert runtime is not None
    client = await connect(settings, runtime=runtime)
    payments = Providers.open(settings.data_dir).payments
    with payments.transaction() as tx:
        tx.execute("UPDATE invoices SET status='paid' WHERE invoice_id='INV-1001'")
    rid = run_id("refused")
    async with build_worker(client, settings):
        await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)
        await wait_for_approval(client, rid)
        await runs.approve(client, rid, Decision(by="alice"))
        assert (await runs.wait_result(client, rid)).status == "completed"
        state = await runs.get_state(client, rid)
    [paid] = [r for r in state.results if r.tool == "pay_invoice"]
    assert not paid.ok and "already paid" in paid.summary
    text = scrape(port)
    assert value(text, "durable_agents_effects", tool="pay_invoice") == 0
    assert value(text, "durable_agents_effects", tool="draft_email") == 1


async def test_a_ledger_replay_and_a_memoized_answer_count_nothing(settings):
    """Through the activities themselves, on a real metrics endpoint: a second attempt
    of a tool call is answered by the ledger and is no new effect; a second attempt of a
    model call is answered by the memo and spends no tokens."""
    port = free_port()
    settings = settings.model_copy(update={"metrics_port": port})
    runtime = telemetry.runtime_for(settings)
    assert runtime is not None
    env = ActivityEnvironment()
    env.metric_meter = runtime.metric_meter
    stores = Stores.open(settings)

    tools = ToolActivities(
        stores, CrashPoints(None, settings.data_dir), EXAMPLE_AGENTS, settings.data_dir
    )
    pay = pay_invoice_call("metered@first")
    first, again = await env.run(tools.run_tool, pay), await env.run(tools.run_tool, pay)
    assert first.ok and not first.replayed_from_ledger and again.replayed_from_ledger
    assert value(scrape(port), "durable_agents_effects", tool="pay_invoice") == 1

    model = ModelActivities(settings, stores, EXAMPLE_AGENTS)
    plan = ModelCallInput(
        run_id="metered@first",
        append=[ChatMessage(seq=0, role="user", content="Goal: pay invoice INV-1001")],
        reply_seq=1,
        tools=["submit_plan"],
        force_tool="submit_plan",
        run_label="pay-invoice",
    )
    answered, memoized = (
        await env.run(model.call_model, plan),
        await env.run(model.call_model, plan),
    )
    assert not answered.memoized and memoized.memoized
    text = scrape(port)
    assert value(text, "durable_agents_model_tokens", direction="input") == (
        answered.usage.input_tokens
    )
    assert value(text, "durable_agents_model_tokens", direction="output") == (
        answered.usage.output_tokens
    )
