"""The what-if worker's tools, called as Temporal calls them: a recorded call answers from
the record once per recorded call, a side effect the record lacks is simulated (by the
tool's own `simulate` when it declares one) and its function never runs, a read-only tool
answers from the record or runs for real, and a retried attempt takes nothing twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.crash_points import CrashPoints
from durable_agents.activities.mcp import MCPActivities
from durable_agents.activities.model import ModelActivities
from durable_agents.activities.shadow import (
    RecordedCall,
    Recordings,
    ShadowModelActivities,
    ShadowToolActivities,
)
from durable_agents.activities.stores import Stores
from durable_agents.activities.tools import ToolActivities
from durable_agents.control.whatif import effect_tools
from durable_agents.runtime.settings import Settings
from durable_agents.testing import ScriptedModel, say
from durable_agents.workflows.activity_io import ChatMessage, ModelCallInput, ToolCallInput
from durable_agents.workflows.agents import Agent
from durable_agents.workflows.registry import AgentRegistry
from durable_agents.workflows.tools import ToolRisk, tool
from tests.conftest import EXAMPLE_AGENTS

called: list[str] = []


@tool(risk=ToolRisk.SIDE_EFFECT, simulate=lambda args: {"ok": True, "ticket": f"SIM-{args.title}"})
def open_ticket(title: str) -> dict[str, Any]:
    """Open a ticket."""
    called.append(f"open_ticket {title}")
    return {"ok": True, "ticket": "T-1"}


@tool(risk=ToolRisk.SIDE_EFFECT)
def send_sms(text: str) -> dict[str, Any]:
    """Send a text message."""
    called.append(f"send_sms {text}")
    return {"ok": True}


@tool
def weather(city: str) -> str:
    """Today's weather."""
    called.append(f"weather {city}")
    return f"sunny in {city}"


AGENT = Agent(name="shadowed", instructions="x", tools=[open_ticket, send_sms, weather])
RECORDED = "orig@1"


def shadow_tools(settings: Settings, read_only: str = "recorded") -> ShadowToolActivities:
    registry = AgentRegistry().add(AGENT)
    stores = Stores.open(settings)
    tools = ToolActivities(
        stores, CrashPoints(None, settings.data_dir), registry, settings.data_dir
    )
    recordings = Recordings(
        calls={
            RECORDED: [
                RecordedCall("send_sms", {"text": "hi"}, '{"ok": true, "id": "sms-1"}', True, True),
                RecordedCall("weather", {"city": "Oslo"}, "snow in Oslo", True, False),
            ]
        },
        read_only=read_only,  # type: ignore[arg-type]
    )
    return ShadowToolActivities(tools, MCPActivities(settings, stores, registry), recordings)


def call(name: str, seq: int, **arguments: Any) -> ToolCallInput:
    effect = name != "weather"
    return ToolCallInput(
        run_id="shadow@1", step=1, tool_call_id=f"c{seq}", name=name, arguments=arguments,
        result_seq=seq, side_effect=effect or None, shadow=True, shadow_of=RECORDED,
    )  # fmt: skip


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    called.clear()
    return Settings(data_dir=tmp_path)


async def test_recorded_then_simulated_and_never_called(settings: Settings) -> None:
    shadow = shadow_tools(settings)
    env = ActivityEnvironment()
    first = await env.run(shadow.run_tool, call("send_sms", 1, text="hi"))
    again = await env.run(shadow.run_tool, call("send_sms", 1, text="hi"))  # a retry
    second = await env.run(shadow.run_tool, call("send_sms", 2, text="hi"))
    ticket = await env.run(shadow.run_tool, call("open_ticket", 3, title="late"))
    made = shadow.recordings.made["shadow@1"]
    assert [(m.tool, m.source) for m in made] == [
        ("send_sms", "recorded"),
        ("send_sms", "simulated"),
        ("open_ticket", "simulated by the tool"),
    ]
    assert first.summary == again.summary == '{"ok": true, "id": "sms-1"}'
    assert "was not called" in second.summary and '"SIM-late"' in ticket.summary
    assert called == []  # no function with effects ran
    stored = Stores.open(settings).transcript.read_one("shadow@1", 3)
    assert stored is not None and "SIM-late" in stored["content"]  # what the model reads


async def test_read_only_tools_from_the_record_or_for_real(settings: Settings) -> None:
    recorded = shadow_tools(settings)
    found = await ActivityEnvironment().run(recorded.run_tool, call("weather", 1, city="Oslo"))
    assert found.summary == "snow in Oslo" and called == []
    live = shadow_tools(settings, read_only="live")
    found = await ActivityEnvironment().run(live.run_tool, call("weather", 1, city="Oslo"))
    assert found.summary == "sunny in Oslo" and called == ["weather Oslo"]


async def test_a_plain_call_is_refused_by_the_what_if_worker(settings: Settings) -> None:
    shadow = shadow_tools(settings)
    plain = call("send_sms", 1, text="hi").model_copy(update={"shadow": None})
    with pytest.raises(ApplicationError) as refused:
        await ActivityEnvironment().run(shadow.run_tool, plain)
    assert refused.value.type == "ShadowRefused" and called == []


async def test_a_tool_the_code_here_says_acts_never_runs_even_declared_read_only(
    settings: Settings,
) -> None:
    """A variant that declares `send_sms` read-only (no key is sent) still never sends."""
    shadow = shadow_tools(settings)
    unkeyed = call("send_sms", 1, text="new text").model_copy(update={"side_effect": None})
    answered = await ActivityEnvironment().run(shadow.run_tool, unkeyed)
    assert "was not called" in answered.summary and called == []
    [made] = shadow.recordings.made["shadow@1"]
    assert (made.source, made.side_effect) == ("simulated", True)


async def test_a_shadow_reuses_the_memo_of_a_recorded_run_only(tmp_path):
    model = ScriptedModel(
        [],
        runs={
            "recorded": [say("the recorded answer")],
            "private": [say("another customer's secret")],
            "shadow-a": [say("asked live (a)")],
            "shadow-b": [say("asked live (b)")],
        },
    )
    settings = Settings(data_dir=tmp_path)
    stores = Stores.open(settings)
    production = ModelActivities(settings, stores, EXAMPLE_AGENTS, lambda s, m: model)
    env = ActivityEnvironment()

    def asking(run: str, shadow_of: str | None = None) -> ModelCallInput:
        return ModelCallInput(
            run_id=run,
            append=[ChatMessage(seq=0, role="user", content="What is my balance?")],
            reply_seq=1,
            shadow_of=shadow_of,
        )

    for run in ("recorded@1", "private@1"):  # both runs asked the very same request
        assert not (await env.run(production.call_model, asking(run))).memoized
    shadows = ShadowModelActivities(production, recorded={"recorded@1"})
    reused = await env.run(shadows.call_model, asking("shadow-a@1", "recorded@1"))
    assert reused.memoized and reused.content_preview == "the recorded answer"
    # A start request naming a run the what-if did not record gets no answer from its memo.
    pointed = await env.run(shadows.call_model, asking("shadow-b@1", "private@1"))
    assert not pointed.memoized and pointed.content_preview == "asked live (b)"
    assert len(model.requests) == 3


def test_every_tool_production_declares_with_effects_counts_as_one_in_a_what_if() -> None:
    """Whatever a variant declares: a what-if's Recordings simulate these (its read-only
    tools alone may answer live)."""
    production = AgentRegistry().add(AGENT)
    assert effect_tools(production) == {"open_ticket", "send_sms"}
    recordings = Recordings(calls={}, effect_tools=effect_tools(production))
    assert recordings.effect_tools == {"open_ticket", "send_sms"}
