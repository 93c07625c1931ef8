"""Results and answers far above Temporal's 2 MB payload limit: kept whole in the
transcript store; the workflow and its history see references and previews."""

from __future__ import annotations

import json

import pytest

from durable_agents.activities.model import (
    INLINE_ARGUMENT_CHARS,
    MODEL_MESSAGE_CHARS,
    _turn,
    clip_for_model,
)
from durable_agents.activities.model_client import ModelReply, RawToolCall
from durable_agents.activities.stores import Stores
from durable_agents.control import runs
from durable_agents.workflows.activity_io import ModelCallInput
from durable_agents.workflows.contracts import RunRequest
from tests.conftest import approve_when_asked, key_of, run_id

pytestmark = pytest.mark.usefixtures("worker")
LARGEST_EVENT_BYTES = 64 * 1024


async def largest_event(client, rid):
    history = await client.get_workflow_handle(rid).fetch_history()
    return max(event.ByteSize() for event in history.events)


async def test_a_10_mb_tool_result(dev_env, settings):
    client, rid = dev_env.client, run_id("big")
    await runs.start_run(client, settings, RunRequest(goal="report", label="large-result"), rid)
    assert (await runs.wait_result(client, rid)).status == "completed"

    messages = Stores.open(settings).transcript.read(await key_of(client, rid))
    [report] = [m for m in messages if m["role"] == "tool" and "Q3-2026" in m["content"]]
    assert len(report["content"]) > 10_000_000  # the whole result, in the store
    state = await runs.get_state(client, rid)
    [record] = [r for r in state.results if r.tool == "fetch_report"]
    assert len(record.summary) <= 200 and record.seq == messages.index(report)
    assert await largest_event(client, rid) < LARGEST_EVENT_BYTES


async def test_a_3_mb_model_answer(dev_env, settings):
    client, rid = dev_env.client, run_id("long-answer")
    request = RunRequest(goal="talk", label="long?steps=2&reply_bytes=3000000")
    await runs.start_run(client, settings, request, rid)
    assert (await runs.wait_result(client, rid)).status == "completed"
    answers = [
        m
        for m in Stores.open(settings).transcript.read(await key_of(client, rid))
        if m["role"] == "assistant"
    ]
    assert max(len(m["content"] or "") for m in answers) == 3_000_000
    assert await largest_event(client, rid) < LARGEST_EVENT_BYTES


def test_the_model_gets_a_clipped_copy_with_a_note():
    message = {"role": "tool", "tool_call_id": "c", "content": "x" * (MODEL_MESSAGE_CHARS + 5)}
    clipped = clip_for_model(message)
    assert clipped["content"].startswith("x" * MODEL_MESSAGE_CHARS)
    assert "kept in the run's transcript store" in clipped["content"]
    assert message["content"] == "x" * (MODEL_MESSAGE_CHARS + 5)  # the original is untouched


def test_oversized_tool_arguments_are_not_carried_into_history():
    raw = RawToolCall(id="c1", name="send_email", arguments="x" * (INLINE_ARGUMENT_CHARS + 1))
    turn = _turn(
        ModelCallInput(run_id="r", reply_seq=1), ModelReply(tool_calls=[raw]), memoized=False
    )
    [call] = turn.tool_calls
    assert call.arguments == "" and call.oversized == INLINE_ARGUMENT_CHARS + 1


def test_a_plan_of_thousands_of_steps_is_carried():
    """The planning turn's arguments are carried up to PLAN_ARGUMENT_CHARS: a 2,000-step
    plan (35 KB) is a plan, not an oversized call (the benchmark's longest run)."""
    steps = json.dumps({"steps": [f"Step number {i} of the work" for i in range(2000)]})
    raw = RawToolCall(id="p1", name="submit_plan", arguments=steps)
    planning = ModelCallInput(run_id="r", reply_seq=1, force_tool="submit_plan")
    [call] = _turn(planning, ModelReply(tool_calls=[raw]), memoized=False).tool_calls
    assert len(steps) > INLINE_ARGUMENT_CHARS and call.arguments == steps
    [other] = _turn(
        ModelCallInput(run_id="r", reply_seq=2), ModelReply(tool_calls=[raw]), memoized=False
    ).tool_calls
    assert other.oversized == len(steps)


async def test_oversized_tool_arguments_from_the_model_stay_out_of_history(dev_env, settings):
    """Through the real path: the model activity itself drops arguments past the cap."""
    client, rid = dev_env.client, run_id("oversized-args")
    request = RunRequest(goal="pay", label="pay-invoice?fault=step1:oversized_args")
    await runs.start_run(client, settings, request, rid)
    await approve_when_asked(client, rid)
    assert (await runs.wait_result(client, rid)).status == "completed"

    messages = Stores.open(settings).transcript.read(await key_of(client, rid))
    [refusal] = [m for m in messages if m["role"] == "tool" and "is too long" in m["content"]]
    assert refusal["content"].startswith("error: invalid arguments for lookup_invoice")
    # The model's whole call is kept in the store; the history never carried it.
    [oversized] = [
        c
        for m in messages
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or []
        if len(c["arguments"]) > INLINE_ARGUMENT_CHARS
    ]
    assert oversized["name"] == "lookup_invoice"
    assert await largest_event(client, rid) < INLINE_ARGUMENT_CHARS
