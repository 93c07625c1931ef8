"""The offline model speaks the OpenAI protocol (checked with the real openai client)
and says plainly that it is scripted."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from durable_agents.activities.model_client import ModelRequest, ToolSchema
from durable_agents.activities.openai_chat import wire_request
from durable_agents.infra.offline_model.scenarios import Fault, ScenarioError, ScenarioSpec, load
from tests.conftest import EXAMPLE_AGENTS


@pytest.fixture
def client(model_server):
    return openai.AsyncOpenAI(base_url=model_server.base_url, api_key="x", max_retries=0)


async def test_models_endpoint_says_it_is_scripted(client):
    models = await client.models.list()
    assert [m.id for m in models.data] == ["scripted-offline-model"]
    assert "not a language model" in models.data[0].owned_by


async def test_plays_the_plan_then_the_step_turns(client):
    schemas = [
        ToolSchema(name=t.name, description=t.description, parameters=t.schema)
        for t in EXAMPLE_AGENTS.tools.values()
    ]
    tools = wire_request(ModelRequest(model="m", system="s", messages=[], tools=schemas))["tools"]
    headers = {"X-Scenario": "pay-invoice", "X-Agent-Run": "proto-1"}
    messages = [{"role": "user", "content": "Goal: pay\nMake a plan."}]
    plan = await client.chat.completions.create(
        model="m", messages=messages, tools=tools, extra_headers=headers
    )
    call = plan.choices[0].message.tool_calls[0]
    assert call.function.name == "submit_plan"
    assert len(json.loads(call.function.arguments)["steps"]) == 4
    assert plan.usage.total_tokens > 0

    messages += [
        plan.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "Plan accepted."},
        {"role": "user", "content": "Step 3/4: Pay the invoice"},
    ]
    step = await client.chat.completions.create(
        model="m", messages=messages, tools=tools, extra_headers=headers
    )
    assert step.choices[0].finish_reason == "tool_calls"
    assert step.choices[0].message.tool_calls[0].function.name == "pay_invoice"


async def test_unknown_scenario_is_a_clear_400(client):
    with pytest.raises(openai.BadRequestError, match="unknown scenario 'nope'"):
        await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Scenario": "nope"},
        )


async def test_without_a_scenario_it_answers_that_it_is_scripted(client):
    messages = [
        {"role": "user", "content": "All steps are done. Write the final answer for the user."}
    ]
    reply = await client.chat.completions.create(model="m", messages=messages)
    assert "scripted offline model" in reply.choices[0].message.content


def test_long_scenario_has_the_asked_size():
    scenario = load(ScenarioSpec.parse("long?steps=7&reply_bytes=333"))
    assert len(scenario.plan) == 7
    assert all(len(turns[0].content or "") == 333 for turns in scenario.steps)


def test_the_long_scenario_is_made_once_and_a_requests_faults_stay_its_own():
    # Made once per size (remaking 100 replies per request cost the offline model more
    # than answering); a request's faults never reach the kept scenario or another request.
    faulty = load(ScenarioSpec.parse("long?steps=7&reply_bytes=333&fault=plan:429*2"))
    plain = load(ScenarioSpec.parse("long?steps=7&reply_bytes=333"))
    assert len(faulty.faults) == 1 and plain.faults == []
    assert plain.steps is faulty.steps  # the same replies, not made again
    assert load(ScenarioSpec.parse("long?steps=7&reply_bytes=333")).faults == []


@pytest.mark.parametrize(
    "text", ["plan:418", "step:429", "nowhere:500", "plan:delay=x", "plan:429*"]
)
def test_bad_fault_specs_are_refused(text):
    with pytest.raises(ScenarioError, match="bad fault"):
        Fault.parse(text)


@pytest.mark.parametrize("spec", ["Bad Name", "long?steps=0", "long?steps=many", "long?colour=red"])
def test_bad_scenario_specs_are_refused(spec):
    with pytest.raises(ScenarioError):
        load(ScenarioSpec.parse(spec))


def test_spec_round_trips():
    spec = ScenarioSpec.parse("long?steps=3&fault=step2.1:429*2&fault=plan:delay=2.5")
    assert ScenarioSpec.parse(spec.render()) == spec


async def test_loop_scenario_plays_a_tool_loop_from_the_conversation(client):
    """The benchmark's peers run one plain tool loop: the turn comes from the tool results
    in the conversation they send, so every peer sees the same steps."""
    headers = {"X-Scenario": "loop?steps=2&reply_bytes=64"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Record every work item."}]
    for step in (1, 2):
        reply = await client.chat.completions.create(
            model="m", messages=messages, extra_headers=headers
        )
        message = reply.choices[0].message
        assert len(message.content) == 64
        (call,) = message.tool_calls
        assert (call.function.name, json.loads(call.function.arguments)["step"]) == (
            "record_progress",
            step,
        )
        messages += [
            message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": f"recorded {step}"},
        ]
    final = await client.chat.completions.create(
        model="m", messages=messages, extra_headers=headers
    )
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == "Done: 2 work items recorded."


async def test_loop_scenario_refuses_what_it_cannot_play(client):
    with pytest.raises(openai.BadRequestError, match="loop takes steps and reply_bytes only"):
        await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Scenario": "loop?steps=2&fault=step1:429"},
        )
