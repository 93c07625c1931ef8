"""What real models do: a reply cut short (finish_reason length or content_filter) is not
an answer and never ends a step; a run may require steps to end through complete_step;
the result lists the effects the run performed, from the ledger."""

from __future__ import annotations

import pytest

from durable_agents.activities.stores import Stores
from durable_agents.control import runs
from durable_agents.infra.offline_model.engine import CUT_REPLY
from durable_agents.workflows import prompts
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision
from tests.conftest import count_effects, eventually, key_of, run_id

pytestmark = pytest.mark.usefixtures("ts_worker")


async def approve_payment(client, rid) -> None:
    async def waiting():
        return (await runs.get_summary(client, rid)).pending_approvals

    await eventually(waiting)
    await runs.approve(client, rid, Decision(by="alice"))


@pytest.mark.parametrize("reason", ["length", "content_filter"])
async def test_a_cut_reply_at_the_payment_step_does_not_end_it(time_env, ts_settings, reason):
    """Step 3 is "Pay the invoice": cut short there, the old loop ended the step unpaid
    and the final answer still said paid."""
    client, rid = time_env.client, run_id("cut")
    request = RunRequest(goal="pay", label=f"pay-invoice?fault=step3:{reason}")
    await runs.start_run(client, ts_settings, request, rid)
    await approve_payment(client, rid)
    result = await runs.wait_result(client, rid)

    assert result.status == "completed"
    assert count_effects(ts_settings, rid, "charge") == 1
    assert result.effects is not None
    assert [e.tool for e in result.effects.recent] == ["draft_email", "pay_invoice", "send_email"]
    assert result.effects.total == 3 and all(e.ok for e in result.effects.recent)
    messages = Stores.open(ts_settings).transcript.read(await key_of(client, rid))
    assert any((m.get("content") or "").startswith(CUT_REPLY) for m in messages)
    told = prompts.CUT_SHORT.format(reason=reason)
    assert [m["content"] for m in messages if m["role"] == "user"].count(told) == 1


async def test_a_cut_final_answer_goes_on(time_env, ts_settings):
    client, rid = time_env.client, run_id("cut-final")
    request = RunRequest(goal="pay", label="pay-invoice?fault=final:length")
    await runs.start_run(client, ts_settings, request, rid)
    await approve_payment(client, rid)
    result = await runs.wait_result(client, rid)
    assert result.final_answer is not None
    assert result.final_answer.startswith(CUT_REPLY) and "is paid" in result.final_answer


async def test_steps_that_must_end_through_complete_step(time_env, ts_settings):
    client, rid = time_env.client, run_id("strict-steps")
    request = RunRequest.model_validate(
        {"goal": "pay", "scenario": "pay-invoice", "limits": {"steps_end": "complete_step"}}
    )
    await runs.start_run(client, ts_settings, request, rid)
    await approve_payment(client, rid)
    assert (await runs.wait_result(client, rid)).status == "completed"
    messages = Stores.open(ts_settings).transcript.read(await key_of(client, rid))
    asked = [
        m
        for m in messages
        if m["role"] == "user" and m["content"] == prompts.END_WITH_COMPLETE_STEP
    ]
    calls = [
        c["name"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []
    ]
    state = await runs.get_state(client, rid)
    assert len(asked) == calls.count("complete_step") == len(state.plan)
    assert count_effects(ts_settings, rid, "charge") == 1
