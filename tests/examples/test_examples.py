"""The bundled agents, each tested the way a user tests theirs: durable_agents.testing's
scripted model and time-skipping testbed, a real worker, the simulated providers."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from durable_agents.client import RunError
from durable_agents.examples.invoice import invoice_agent
from durable_agents.examples.large_result import large_result_agent
from durable_agents.examples.providers import providers_at
from durable_agents.examples.question import question_agent
from durable_agents.examples.refund import refund_agent
from durable_agents.examples.triage import triage_agent
from durable_agents.testing import AgentTestbed, ScriptedModel, call, plan, say
from durable_agents.workflows.contracts import RunPolicy

EMAIL = {"to": "billing@acme.example", "subject": "Paid", "body": "INV-1001 is paid."}


async def test_the_invoice_agent_pays_once_after_a_person_approves(time_env):
    model = ScriptedModel(
        [
            plan("Look it up", "Pay it", "Confirm"),
            call("lookup_invoice", invoice_id="INV-1001"),
            say("Found: 1250.00 EUR."),
            call("pay_invoice", invoice_id="INV-1001", amount="1250.00", currency="EUR"),
            say("Paid."),
            call("send_email", **EMAIL),
            say("Confirmed."),
            say("INV-1001 is paid and ACME was told."),
        ]
    )
    async with AgentTestbed(invoice_agent, model=model, env=time_env) as bed:
        run = await bed.start("invoice", "Pay INV-1001")
        request = await run.next_approval()
        assert request.tool == "pay_invoice" and "needing approval" in request.rule
        await run.approve(request.request_id, by="alice")
        result = await run.result()
        charges = providers_at(bed.data_dir).payments.effects(run.run_id)
    assert result.status == "completed", result
    assert result.final_answer == "INV-1001 is paid and ACME was told."
    assert [c["operation"] for c in charges] == ["charge"]
    assert result.effects is not None
    assert [e.tool for e in result.effects.recent] == ["pay_invoice", "send_email"]


async def test_a_rejected_payment_is_never_made(time_env):
    model = ScriptedModel(
        [
            plan("Pay it"),
            call("pay_invoice", invoice_id="INV-1001", amount="1250.00", currency="EUR"),
            say("Not paid: rejected."),
            say("The payment was rejected."),
        ]
    )
    async with AgentTestbed(invoice_agent, model=model, env=time_env) as bed:
        run = await bed.start(invoice_agent, "Pay INV-1001")
        await run.reject((await run.next_approval()).request_id, by="bob", comment="no")
        result = await run.result()
        assert providers_at(bed.data_dir).payments.effects(run.run_id) == []
    assert result.status == "completed" and result.effects is not None
    assert result.effects.total == 0
    tool_message = model.requests[2].messages[-1]
    assert tool_message["content"].startswith("rejected by bob: no")


async def test_the_refund_agent_a_plain_loop_asks_above_its_threshold(time_env):
    refund = {"customer_email": "c@shop.example", "amount": "80.00", "reason": "late"}
    model = ScriptedModel([call("issue_refund", **refund), say("Refunded 80.00.")])
    async with AgentTestbed(refund_agent, model=model, env=time_env) as bed:
        run = await bed.start("refund", "Refund 80")  # the agent's own policy: above 50
        request = await run.next_approval()
        assert "above the run's approval threshold 50" in request.rule
        await run.approve(request.request_id, by="cfo")
        result = await run.result()
        [refunded] = providers_at(bed.data_dir).payments.effects(run.run_id)
    assert result.status == "completed" and result.final_answer == "Refunded 80.00."
    assert refunded["detail"]["amount"] == "80.00"
    assert model.requests[0].messages[0]["content"] == "Goal: Refund 80"  # no plan asked


async def test_a_run_policy_may_tighten_the_agents_own_and_never_loosen_it(time_env):
    """The refund agent asks a person above 50: a run may ask above 10 (a refund of 20
    then waits), never above nothing (refused in one line; nothing starts)."""
    refund = {"customer_email": "c@shop.example", "amount": "20.00", "reason": "late"}
    model = ScriptedModel([call("issue_refund", **refund), say("Refunded.")])
    async with AgentTestbed(refund_agent, model=model, env=time_env) as bed:
        with pytest.raises(RunError, match="approve_payments_above must be 50 or less"):
            await bed.start("refund", "Refund 20", policy=RunPolicy())
        tighter = RunPolicy(approve_payments_above=Decimal("10"))
        run = await bed.start("refund", "Refund 20", policy=tighter)
        asked = await run.next_approval()
        await run.approve(asked.request_id, by="lead")
        result = await run.result()
    assert result.status == "completed" and asked.tool == "issue_refund"


async def test_the_question_agent_waits_for_a_person(time_env):
    model = ScriptedModel(
        [
            plan("Ask", "Look up"),
            call("ask_human", question="Which invoice?", options=["INV-1001", "INV-1002"]),
            say("The human chose INV-1002."),
            call("lookup_invoice", invoice_id="INV-1002"),
            say("Globex, 89.90 EUR."),
            say("INV-1002: Globex Cloud, 89.90 EUR."),
        ]
    )
    async with AgentTestbed(question_agent, model=model, env=time_env) as bed:
        run = await bed.start("question", "Handle an invoice")
        question = await run.next_question()
        await run.answer("INV-1002", by="carol", question_id=question.question_id)
        result = await run.result()
    assert result.status == "completed"
    looked_up = model.requests[4].messages[-1]["content"]
    assert "Globex Cloud" in looked_up


async def test_the_large_result_agent_keeps_megabytes_out_of_history(time_env):
    model = ScriptedModel(
        [
            plan("Fetch"),
            call("fetch_report", report_id="Q3", size_bytes=3_000_000),
            say("Fetched."),
            say("Summary."),
        ]
    )
    async with AgentTestbed(large_result_agent, model=model, env=time_env) as bed:
        run = await bed.start("large-result", "Summarise Q3")
        assert (await run.result()).status == "completed"
        history = await bed.client.temporal.get_workflow_handle(run.run_id).fetch_history()
    assert len(history.to_json()) < 200_000
    # The model got the report clipped, the note saying the whole is kept.
    assert "kept in the run's transcript store" in model.requests[2].messages[-1]["content"]


async def test_the_triage_agent_delegates_research_over_mcp_under_its_budget(
    time_env, tmp_path, monkeypatch
):
    monkeypatch.setenv("KB_DIR", str(tmp_path / "kb"))
    model = ScriptedModel(
        [call("ask_research", task="What is our refund policy?"), say("Dear customer: 30 days.")],
        agents={
            "research": [
                call("search_notes", query="refund"),
                call("add_note", title="asked today", text="refund policy"),
                say("Refunds within 30 days are approved by support."),
            ]
        },
    )
    async with AgentTestbed(triage_agent, model=model, env=time_env) as bed:
        run = await bed.start("triage", "Ticket 4: can I get a refund?")
        result = await run.result()
        state = await run.state()
        child = await bed.client.run(state.delegations[0].child_id).state()
    assert result.status == "completed" and result.final_answer == "Dear customer: 30 days."
    assert state.budget == triage_agent.budget
    assert state.delegations[0].answer == "Refunds within 30 days are approved by support."
    assert child.results[0].summary.startswith("refund policy: Refunds")
    notes = json.loads((tmp_path / "kb" / "notes.json").read_text())
    assert notes["notes"]["asked today"] == "refund policy"
    assert state.spent.tool_calls == 3  # the delegation and the research agent's two calls
