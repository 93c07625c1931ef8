"""Scenario files, their spec strings, and injected faults.

A scenario spec names a scenario and may carry parameters and faults, the way the
X-Scenario header carries it: `long?steps=100&reply_bytes=1024&fault=step2:429*1`.
"""

from __future__ import annotations

import json
import re
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SCENARIO_DIR = Path(__file__).parent / "scenarios"
FAULT_KINDS = ("429", "500", "401", "delay", "malformed_args", "unknown_tool", "oversized_args")
HTTP_FAULTS = ("429", "500", "401", "delay")
_FAULT_RE = re.compile(
    r"^(?P<phase>plan|loop|final|step\d+)(?:\.(?P<turn>\d+))?:"
    r"(?P<kind>429|500|401|malformed_args|unknown_tool|oversized_args|length|content_filter|delay(?:=(?P<delay>\d+(?:\.\d+)?))?)"
    r"(?:\*(?P<times>\d+))?$"
)


class ScenarioError(ValueError):
    """A scenario spec or file that cannot be played."""


class Fault(BaseModel):
    model_config = ConfigDict(frozen=True)

    phase: str
    turn: int = 0
    kind: Literal[
        "429",
        "500",
        "401",
        "delay",
        "malformed_args",
        "unknown_tool",
        "oversized_args",
        "length",
        "content_filter",
    ]
    times: int = 1
    delay_seconds: float = 30.0
    retry_after_seconds: float = 1.0

    @classmethod
    def parse(cls, text: str) -> Fault:
        match = _FAULT_RE.match(text.strip())
        if match is None:
            raise ScenarioError(
                f"bad fault {text!r}: expected PHASE[.TURN]:KIND[*TIMES], PHASE one of plan, "
                f"loop, stepN, final; KIND one of {', '.join(FAULT_KINDS)} (delay=SECONDS)"
            )
        kind = match["kind"].split("=")[0]
        times = int(match["times"]) if match["times"] else (1_000_000 if kind == "401" else 1)
        fields: dict[str, Any] = {
            "phase": match["phase"],
            "turn": int(match["turn"] or 0),
            "kind": kind,
            "times": times,
        }
        if match["delay"]:
            fields["delay_seconds"] = float(match["delay"])
        return cls(**fields)


class ScriptedCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str | None = None
    tool_calls: list[ScriptedCall] = Field(default_factory=list)
    if_any_result_contains: str | None = None
    # Chosen when the agent's instructions (the system message) say this: a script that
    # follows an instruction, for a what-if of changed instructions.
    if_instructions_contain: str | None = None


class Turn(BaseModel):
    """One model turn: a reply, or variants chosen by what the tools returned so far."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = None
    tool_calls: list[ScriptedCall] = Field(default_factory=list)
    variants: list[Reply] = Field(default_factory=list)

    def choose(self, tool_results: list[str], instructions: str = "") -> Reply:
        for variant in self.variants:
            told = variant.if_instructions_contain
            if told is not None and told not in instructions:
                continue
            needle = variant.if_any_result_contains
            if needle is None or any(needle in text for text in tool_results):
                return variant
        return Reply(content=self.content, tool_calls=self.tool_calls)


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    plan: list[str] = Field(default_factory=list)
    steps: list[list[Turn]] = Field(default_factory=list)
    final: Turn = Field(default_factory=Turn)
    # A plain tool loop's turns (an agent that does not plan): then plan and steps are unused.
    loop: list[Turn] | None = None
    faults: list[Fault] = Field(default_factory=list)
    # Scripts for the other agents of a run's tree (sub-agents), by agent name.
    agents: dict[str, Scenario] = Field(default_factory=dict)

    def for_agent(self, agent: str | None) -> Scenario:
        """The script of this agent of the run (the scenario's own for the first one)."""
        return self.agents.get(agent or "", self)


class ScenarioSpec(BaseModel):
    name: str
    params: dict[str, str] = Field(default_factory=dict)
    faults: list[Fault] = Field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> ScenarioSpec:
        name, _, query = text.strip().partition("?")
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,63}", name):
            raise ScenarioError(f"bad scenario name {name!r}")
        params: dict[str, str] = {}
        faults: list[Fault] = []
        for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)):
            if key == "fault":
                faults.append(Fault.parse(value))
            else:
                params[key] = value
        return cls(name=name, params=params, faults=faults)

    def render(self) -> str:
        return self.name + _query(self.params, self.faults)


def _query(params: dict[str, str], faults: list[Fault]) -> str:
    parts = [f"{k}={v}" for k, v in params.items()]
    parts += [f"fault={_fault_text(f)}" for f in faults]
    return "?" + "&".join(parts) if parts else ""


def _fault_text(fault: Fault) -> str:
    kind = f"delay={fault.delay_seconds:g}" if fault.kind == "delay" else fault.kind
    return f"{fault.phase}.{fault.turn}:{kind}*{fault.times}"


def available() -> list[str]:
    return sorted([p.stem for p in SCENARIO_DIR.glob("*.json")] + ["long", "generic"])


@cache
def _load_file(name: str) -> Scenario:
    path = SCENARIO_DIR / f"{name}.json"
    if not path.exists():
        raise ScenarioError(f"unknown scenario {name!r}; available: {', '.join(available())}")
    try:
        return Scenario.model_validate(json.loads(path.read_text()))
    except (ValidationError, json.JSONDecodeError) as err:
        raise ScenarioError(f"scenario file {path} is invalid: {err}") from err


def load(spec: ScenarioSpec, goal: str = "") -> Scenario:
    """The scenario a spec names, with the spec's faults added."""
    if spec.name == "long":
        scenario = long_scenario(**_long_params(spec.params))
    elif spec.name == "generic":
        scenario = generic_scenario(goal)
    else:
        scenario = _load_file(spec.name)
    return scenario.model_copy(update={"faults": [*scenario.faults, *spec.faults]})


def _long_params(params: dict[str, str]) -> dict[str, int]:
    unknown = set(params) - {"steps", "reply_bytes"}
    if unknown:
        raise ScenarioError(f"long takes steps and reply_bytes, not {', '.join(sorted(unknown))}")
    try:
        steps = int(params.get("steps", "10"))
        reply_bytes = int(params.get("reply_bytes", "1024"))
    except ValueError as err:
        raise ScenarioError(f"long: steps and reply_bytes must be whole numbers ({err})") from err
    if not (1 <= steps <= 100_000 and 0 <= reply_bytes <= 10_000_000):
        raise ScenarioError("long: steps must be 1..100000 and reply_bytes 0..10000000")
    return {"steps": steps, "reply_bytes": reply_bytes}


def filler(size: int, seed: int) -> str:
    """Deterministic prose-like text of exactly `size` characters."""
    words = ("durable", "agent", "history", "replay", "step", "ledger", "signal", "worker")
    out: list[str] = []
    length = 0
    i = seed
    while length < size:
        word = words[i % len(words)]
        out.append(word)
        length += len(word) + 1
        i += 3
    return " ".join(out)[:size]


@lru_cache(maxsize=8)
def long_scenario(steps: int, reply_bytes: int) -> Scenario:
    """N steps, each one model turn that records progress and completes the step. Kept
    (read-only, as every scenario is): made anew for each request, its N replies of
    filler cost the offline model more than answering, and on a benchmark's shared cores
    that was charged to whoever runs beside it."""
    turns = [
        [
            Turn(
                content=filler(reply_bytes, i),
                tool_calls=[
                    ScriptedCall(name="record_progress", arguments={"step": i, "note": f"n{i}"}),
                    ScriptedCall(name="complete_step", arguments={"summary": f"step {i} done"}),
                ],
            )
        ]
        for i in range(1, steps + 1)
    ]
    return Scenario(
        name="long",
        description=f"{steps} steps with {reply_bytes}-byte replies, for benchmarks",
        plan=[f"Work item {i}" for i in range(1, steps + 1)],
        steps=turns,
        final=Turn(content=f"Done: {steps} work items recorded."),
    )


def generic_scenario(goal: str) -> Scenario:
    return Scenario(
        name="generic",
        description="What the offline model says to any goal it has no script for.",
        plan=["Answer the goal"],
        steps=[[Turn(content="(scripted offline model) No script for this goal; nothing done.")]],
        final=Turn(
            content=(
                "This answer comes from the scripted offline model, not a language model. "
                f"Goal received: {goal[:200]!r}. Configure OPENAI_API_KEY or OPENAI_BASE_URL "
                "for real answers, or pick a scenario with --label."
            )
        ),
    )
