"""A model as a what-if's judge: asked whether the run as played again still meets some
criteria, given what it answered and did then and now. It answers PASS, or FAIL and why."""

from __future__ import annotations

import json
from dataclasses import dataclass

from durable_agents.activities.model import openai_clients
from durable_agents.activities.model_client import (
    CallMeta,
    ModelRefused,
    ModelRequest,
    ModelUnavailable,
)
from durable_agents.control.whatif_report import RunComparison
from durable_agents.runtime.settings import Settings, load_settings

JUDGE_SYSTEM = (
    "You judge a changed AI agent. You are given criteria, and what the agent answered and "
    "did on a real task before the change (THEN) and after it (NOW). Reply PASS when NOW "
    "meets the criteria; otherwise FAIL: followed by one sentence saying why."
)
# The label the judge's calls carry (the offline model plays its scripted judge on it).
JUDGE_LABEL = "judge"


@dataclass
class ModelJudge:
    """A grader: the model (the worker's, or `model`) judges each run against `criteria`."""

    criteria: str
    model: str | None = None
    name: str = "judge"
    settings: Settings | None = None

    async def __call__(self, comparison: RunComparison) -> bool | str:
        settings = self.settings or load_settings()
        client = openai_clients(settings, None)
        request = ModelRequest(
            model=self.model or settings.effective_model_name,
            system=JUDGE_SYSTEM,
            messages=[{"role": "user", "content": judge_prompt(self.criteria, comparison)}],
        )
        meta = CallMeta(
            run_id=comparison.shadow_id, seq=0, run_label=JUDGE_LABEL, timeout_seconds=120
        )
        try:
            reply = await client.complete(request, meta)
        except (ModelRefused, ModelUnavailable) as err:
            return f"the judge could not be asked: {err}"
        verdict = (reply.content or "").strip()
        if verdict.upper().startswith("PASS"):
            return True
        return verdict.removeprefix("FAIL").strip(" :") or "the judge said FAIL"


def judge_prompt(criteria: str, comparison: RunComparison) -> str:
    def side(label: str, answer: str | None, effects: list[dict[str, object]]) -> str:
        return f"{label}:\nanswer: {answer or '(none)'}\neffects: {json.dumps(effects)}"

    then = [e.model_dump(include={"tool", "arguments"}) for e in comparison.then.effects]
    now = [e.model_dump(include={"tool", "arguments"}) for e in comparison.now.effects]
    return "\n\n".join(
        [
            f"CRITERIA:\n{criteria}",
            side("THEN", comparison.then.final_answer, then),
            side("NOW", comparison.now.final_answer, now),
        ]
    )
