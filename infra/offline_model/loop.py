"""The `loop` scenario: a plain tool loop for the peer frameworks in the benchmark.

Peers run one agent loop (model, tool, model, ...) with no plan or steps of ours, so the
turn is read from the conversation they send: the number of tool results in it. Each
turn answers with `reply_bytes` of text and one `record_progress` call; after `steps`
turns, a final answer. Stateless, like the rest of the offline model.
"""

from __future__ import annotations

from typing import Any

from durable_agents.infra.offline_model.scenarios import (
    Reply,
    ScenarioError,
    ScenarioSpec,
    ScriptedCall,
    filler,
)

LOOP_TOOL = "record_progress"


def loop_reply(spec: ScenarioSpec, messages: list[dict[str, Any]]) -> Reply:
    steps, reply_bytes = _params(spec)
    done = sum(1 for m in messages if m.get("role") == "tool")
    if done >= steps:
        return Reply(content=f"Done: {steps} work items recorded.")
    step = done + 1
    return Reply(
        content=filler(reply_bytes, step),
        tool_calls=[ScriptedCall(name=LOOP_TOOL, arguments={"step": step, "note": f"n{step}"})],
    )


def _params(spec: ScenarioSpec) -> tuple[int, int]:
    unknown = set(spec.params) - {"steps", "reply_bytes"}
    if unknown or spec.faults:
        raise ScenarioError("loop takes steps and reply_bytes only (no faults)")
    try:
        steps = int(spec.params.get("steps", "10"))
        reply_bytes = int(spec.params.get("reply_bytes", "1024"))
    except ValueError as err:
        raise ScenarioError(f"loop: steps and reply_bytes must be whole numbers ({err})") from err
    if not (1 <= steps <= 100_000 and 0 <= reply_bytes <= 10_000_000):
        raise ScenarioError("loop: steps must be 1..100000 and reply_bytes 0..10000000")
    return steps, reply_bytes
