"""Which scripted turn answers a request, read from the conversation itself.

The phase comes from the last user message (the goal, `Step K/N:`, or the final
instruction); the turn within the phase is the number of assistant replies since
then, not counting replies that were injected faults. So the engine is stateless,
and a retried request gets the same answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from durable_agents.infra.offline_model.scenarios import Fault, Reply, Scenario, ScriptedCall, Turn
from durable_agents.workflows.prompts import END_WITH_COMPLETE_STEP, FINAL_MESSAGE, STEP_PATTERN

FAULT_ID_PREFIX = "fault_"
# Faults in what the model says (a tool call the agent must refuse), not in how it answers.
CONTENT_FAULTS = (
    "malformed_args", "unknown_tool", "oversized_args", "length", "content_filter"
)  # fmt: skip
# A reply cut short (finish_reason length or content_filter), as real endpoints give: no
# tool call, half a sentence. Recognised in the conversation by its opening words.
CUT_REPLY = "(scripted, cut short) I am going to proceed with the"
CUT_FAULTS = ("length", "content_filter")
# Arguments of an oversized_args fault: well past what the agent carries into history.
OVERSIZED_ARGUMENT_CHARS = 100_000


@dataclass(frozen=True)
class Position:
    phase: str  # "plan", "stepN" or "final"
    turn: int
    faults_so_far: int


def position(messages: list[dict[str, Any]]) -> Position:
    """The phase is set by the last step or final instruction (notes a person added since,
    like an edit, do not move it); before any, the run is planning."""
    phase, start = "plan", -1
    for i, message in enumerate(messages):
        if message.get("role") != "user":
            continue
        text = str(message.get("content") or "")
        step = re.match(STEP_PATTERN, text)
        if step:
            phase, start = f"step{step.group(1)}", i
        elif text.startswith(FINAL_MESSAGE):
            phase, start = "final", i
        elif start < 0 and phase == "plan":
            start = i  # planning counts from the goal
    turn = faults = 0
    for message in messages[start + 1 :]:
        if message.get("role") != "assistant":
            continue
        ids = [c.get("id", "") for c in message.get("tool_calls") or []]
        cut = str(message.get("content") or "").startswith(CUT_REPLY)
        if cut or (ids and all(i.startswith(FAULT_ID_PREFIX) for i in ids)):
            faults += 1
        else:
            turn += 1
    return Position(phase=phase, turn=turn, faults_so_far=faults)


def tool_results(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m.get("content") or "") for m in messages if m.get("role") == "tool"]


def in_scenario(scenario: Scenario, where: Position) -> Position:
    """A plain loop's conversation has no plan: what reads as planning is the loop."""
    if scenario.loop is not None and where.phase == "plan":
        return Position(phase="loop", turn=where.turn, faults_so_far=where.faults_so_far)
    return where


def scripted_turn(scenario: Scenario, where: Position) -> Turn:
    if where.phase == "loop":
        turns = scenario.loop or []
        return turns[where.turn] if where.turn < len(turns) else Turn(content="(scripted) Done.")
    if where.phase == "plan":
        if where.turn == 0:
            return Turn(tool_calls=[_plan_call(scenario)])
        return Turn(content="(scripted) I have no other plan to offer.")
    if where.phase == "final":
        return scenario.final
    index = int(where.phase.removeprefix("step")) - 1
    turns = scenario.steps[index] if 0 <= index < len(scenario.steps) else []
    if where.turn < len(turns):
        return turns[where.turn]
    return Turn(content="(scripted) Step finished.")


def _plan_call(scenario: Scenario) -> ScriptedCall:
    return ScriptedCall(name="submit_plan", arguments={"steps": scenario.plan})


def content_fault(scenario: Scenario, where: Position) -> Fault | None:
    """A malformed-arguments or unknown-tool fault due at this position, if any."""
    for fault in scenario.faults:
        if fault.kind not in CONTENT_FAULTS:
            continue
        if (fault.phase, fault.turn) == (
            where.phase,
            where.turn,
        ) and where.faults_so_far < fault.times:
            return fault
    return None


def http_faults(scenario: Scenario, where: Position) -> list[Fault]:
    return [
        f
        for f in scenario.faults
        if f.kind in ("429", "500", "401", "delay")
        and (f.phase, f.turn) == (where.phase, where.turn)
    ]


def render_calls(reply: Reply, where: Position) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{where.phase}_t{where.turn}_{i}",
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for i, call in enumerate(reply.tool_calls)
    ]


def render_fault(fault: Fault, reply: Reply, where: Position, tools: list[str]) -> dict[str, Any]:
    """A tool call the agent must refuse: broken JSON, arguments too large to carry, or a
    tool that does not exist."""
    name = reply.tool_calls[0].name if reply.tool_calls else (tools[0] if tools else "none")
    if fault.kind == "oversized_args":
        arguments = json.dumps({"padding": "x" * OVERSIZED_ARGUMENT_CHARS})
    elif fault.kind == "malformed_args":
        arguments = json.dumps(reply.tool_calls[0].arguments if reply.tool_calls else {})[:-1]
        arguments = arguments + ', "broken": ' if arguments else '{"broken": '
    else:
        name, arguments = "launch_rockets", "{}"
    return {
        "id": f"{FAULT_ID_PREFIX}{where.phase}_t{where.turn}_{where.faults_so_far}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def told_to_complete_step(messages: list[dict[str, Any]]) -> Reply | None:
    """Asked to end the step only through complete_step (a run whose steps must), the
    scripted model does: it summarises what it last said."""
    if not messages or messages[-1].get("role") != "user":
        return None
    if str(messages[-1].get("content") or "") != END_WITH_COMPLETE_STEP:
        return None
    said = next(
        (
            str(m["content"])
            for m in reversed(messages)
            if m.get("role") == "assistant" and m.get("content")
        ),
        "done",
    )
    return Reply(tool_calls=[ScriptedCall(name="complete_step", arguments={"summary": said[:200]})])
