"""call_model against the offline model over real HTTP through the openai client."""

from __future__ import annotations

import dataclasses
import json
import urllib.request

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.model import ModelActivities
from durable_agents.activities.stores import Stores
from durable_agents.control.live import shown
from durable_agents.runtime.settings import Settings
from durable_agents.testing import ScriptedModel, say
from durable_agents.workflows.activity_io import ChatMessage, ModelCallInput
from tests.conftest import EXAMPLE_AGENTS


@pytest.fixture
def activities(model_server, tmp_path):
    settings = Settings(data_dir=tmp_path, offline_model_port=model_server.port)
    return ModelActivities(settings, Stores.open(settings), EXAMPLE_AGENTS)


def completions(model_server, run):
    with urllib.request.urlopen(f"{model_server.base_url}/scripted/stats") as response:
        return json.loads(response.read())["completions_by_run"].get(run, 0)


def plan_call(run, run_label="pay-invoice", goal="Goal: pay\nMake a plan."):
    return ModelCallInput(
        run_id=run,
        append=[ChatMessage(seq=0, role="user", content=goal)],
        reply_seq=1,
        tools=["submit_plan"],
        run_label=run_label,
    )


async def test_a_repeated_call_returns_the_stored_answer_without_calling_the_model(
    activities, model_server
):
    env = ActivityEnvironment()
    first = await env.run(activities.call_model, plan_call("memo-1"))
    second = await env.run(activities.call_model, plan_call("memo-1"))

    assert first.tool_calls[0].name == "submit_plan"
    assert second.tool_calls == first.tool_calls
    assert (first.memoized, second.memoized) == (False, True)
    assert second.usage.input_tokens == 0  # no tokens spent again
    assert completions(model_server, "memo-1") == 1


async def test_a_changed_request_is_a_new_call(activities, model_server):
    env = ActivityEnvironment()
    await env.run(activities.call_model, plan_call("memo-2"))
    edited = await env.run(activities.call_model, plan_call("memo-2", goal="Goal: other\nPlan."))
    assert edited.memoized is False
    assert completions(model_server, "memo-2") == 2


async def test_429_is_retryable_and_honours_retry_after(activities):
    call = plan_call("rl-1", run_label="pay-invoice?fault=plan:429*1")
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(activities.call_model, call)
    assert raised.value.non_retryable is False
    assert raised.value.next_retry_delay is not None
    assert raised.value.next_retry_delay.total_seconds() == 1.0
    assert "HTTP 429" in raised.value.message
    # The next attempt succeeds.
    turn = await ActivityEnvironment().run(activities.call_model, call)
    assert turn.tool_calls[0].name == "submit_plan"


async def test_500_is_retryable(activities):
    call = plan_call("err-500", run_label="pay-invoice?fault=plan:500*1")
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(activities.call_model, call)
    assert raised.value.non_retryable is False and "HTTP 500" in raised.value.message


async def test_401_is_not_retryable_and_says_why(activities):
    call = plan_call("auth-1", run_label="pay-invoice?fault=plan:401")
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(activities.call_model, call)
    assert raised.value.non_retryable is True
    assert raised.value.type == "ModelRequestRejected"
    assert "refused the request (HTTP 401)" in raised.value.message


async def test_unreachable_endpoint_is_retryable(tmp_path):
    settings = Settings(data_dir=tmp_path, offline_model_port=1)
    model = ModelActivities(settings, Stores.open(settings), EXAMPLE_AGENTS)
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(model.call_model, plan_call("down-1"))
    assert raised.value.non_retryable is False and "unreachable" in raised.value.message


def budget_activities(model_server, tmp_path) -> ModelActivities:
    settings = Settings(
        data_dir=tmp_path,
        offline_model_port=model_server.port,
        price_input_per_mtok=1000.0,
        price_output_per_mtok=10_000.0,  # a cent a token out: the reply is what binds
    )
    return ModelActivities(settings, Stores.open(settings), EXAMPLE_AGENTS)


async def test_a_budget_caps_the_reply_or_keeps_the_call_from_being_made(model_server, tmp_path):
    activities, env = budget_activities(model_server, tmp_path), ActivityEnvironment()
    plenty = await env.run(
        activities.call_model, plan_call("cap-0").model_copy(update={"budget_usd": 100.0})
    )
    assert plenty.tool_calls and plenty.finish_reason != "length"

    # room for the input and about 20 tokens out: the plan (longer) is cut at the cap
    capped = await env.run(
        activities.call_model, plan_call("cap-1").model_copy(update={"budget_usd": 0.3})
    )
    assert capped.finish_reason == "length" and not capped.tool_calls
    assert capped.usage.output_tokens <= 30 and capped.usage.cost_usd <= 0.3

    # the input alone costs more than is left: no call at all
    none = await env.run(
        activities.call_model, plan_call("cap-2").model_copy(update={"budget_usd": 0.001})
    )
    assert none.over_budget is not None and "input alone" in none.over_budget
    assert completions(model_server, "cap-2") == 0
    tokens = await env.run(
        activities.call_model, plan_call("cap-3").model_copy(update={"budget_tokens": 10})
    )
    assert tokens.over_budget is not None and "no room for a reply" in tokens.over_budget


async def test_a_retry_after_the_reply_was_stored_shows_it_whole_once_more(tmp_path):
    model = ScriptedModel([say("Your refund is on its way.")])
    settings = Settings(data_dir=tmp_path)
    stores = Stores.open(settings)
    activities = ModelActivities(settings, stores, EXAMPLE_AGENTS, lambda s, m: model)
    turn = ModelCallInput(
        run_id="chat-r@1",
        append=[ChatMessage(seq=0, role="user", content="Where is my refund?")],
        reply_seq=1,
        stream=True,
    )
    env = ActivityEnvironment()
    run = env.info.workflow_id or ""  # the live log is the workflow's
    # Attempt 1 got the reply, stored it and streamed part of it, then its worker died:
    # the reply is in the memo, its segment still open.
    await env.run(activities.call_model, turn.model_copy(update={"stream": None}))
    cut = stores.live.open_segment(run, 1, 1)
    stores.live.append(run, cut, 1, "Your ref")
    assert not stores.live.finished(run, 1)
    # Attempt 2: no model call; readers see the reply whole, the cut segment dropped.
    env.info = dataclasses.replace(env.info, attempt=2)
    again = await env.run(activities.call_model, turn)
    assert again.memoized and again.content_preview == "Your refund is on its way."
    assert len(model.requests) == 1
    entries = stores.live.read(run)
    assert [e.kind for e in entries if e.segment == cut] == ["open", "delta", "abandoned"]
    assert list(shown(entries).values()) == ["Your refund is on its way."]
    assert stores.live.finished(run, 1)
