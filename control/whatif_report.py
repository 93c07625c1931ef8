"""What a what-if found: for each recorded run, then and now side by side (the final
answer, the effects, approvals, questions, a conversation's replies, tokens and cost), the
effects that would be added, removed or made with other arguments, the lines that differ,
and what the graders said; and the same in aggregate. JSON for machines; the terminal's
table is starters/whatif_play.py's, the console's page console/whatif.py's."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from durable_agents.activities.shadow import RecordedCall, ShadowCall
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.state import RunState
from durable_agents.workflows.whatif import same_call_key


class Effect(BaseModel):
    tool: str
    arguments: dict[str, Any]
    ok: bool = True
    # now: where its result came from (recorded, simulated, simulated by the tool)
    source: str | None = None
    run_id: str = ""  # the run of the tree that made it (a sub-agent's own id)


class EffectChange(BaseModel):
    change: Literal["added", "removed", "changed"]
    tool: str
    then: dict[str, Any] | None = None
    now: dict[str, Any] | None = None

    def line(self) -> str:
        if self.change == "added":
            return f"effect added: {self.tool} {_args(self.now)}"
        if self.change == "removed":
            return f"effect removed: {self.tool} {_args(self.then)}"
        changed = sorted(
            key
            for key in set(self.then or {}) | set(self.now or {})
            if (self.then or {}).get(key) != (self.now or {}).get(key)
        )
        parts = [
            f"{k} {(self.then or {}).get(k)!r} -> {(self.now or {}).get(k)!r}" for k in changed
        ]
        return f"effect changed: {self.tool}: {', '.join(parts)}"


class Approval(BaseModel):
    tool: str
    arguments: dict[str, Any]
    status: str
    by: str | None = None


class Side(BaseModel):
    """One run as it went (then) or as its shadow went (now)."""

    run_id: str
    status: str
    final_answer: str | None = None
    error: str | None = None
    effects: list[Effect] = Field(default_factory=list)
    approvals: list[Approval] = Field(default_factory=list)
    questions: list[str] = Field(default_factory=list)
    replies: list[str] = Field(default_factory=list)  # a conversation's, turn by turn
    model_calls: int = 0
    memoized_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


class Grade(BaseModel):
    grader: str
    passed: bool
    reason: str = ""


class RunComparison(BaseModel):
    """One recorded run against its shadow: what a grader reads."""

    run_id: str
    shadow_id: str
    agent: str | None
    then: Side
    now: Side
    effect_changes: list[EffectChange] = Field(default_factory=list)
    differences: list[str] = Field(default_factory=list)
    grades: list[Grade] = Field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(grade.passed for grade in self.grades)

    def effects_now(self, tool: str) -> list[Effect]:
        """The effects the shadow would have had with this tool (a grader's usual read)."""
        return [effect for effect in self.now.effects if effect.tool == tool]


class Totals(BaseModel):
    runs: int = 0
    runs_with_differences: int = 0
    effects_added: int = 0
    effects_removed: int = 0
    effects_changed: int = 0
    tokens_then: int = 0
    tokens_now: int = 0
    cost_then_usd: float = 0.0
    cost_now_usd: float = 0.0
    failed_grades: int = 0


class WhatIfReport(BaseModel):
    id: str
    created_at: datetime
    variant: str
    read_only: str
    unmatched: str
    runs: list[RunComparison]
    totals: Totals

    @property
    def passed(self) -> bool:
        return all(run.passed for run in self.runs)

    def failing(self) -> list[RunComparison]:
        return [run for run in self.runs if not run.passed]


# A grader: a function of one comparison. True or None passes; False or a text (why)
# fails, as does an AssertionError (its message says why). Async ones are awaited.
Grader = Callable[[RunComparison], Any]


def side(state: RunState, calls: Sequence[tuple[str, RecordedCall]], error: str | None) -> Side:
    """A run as it went (the recorded calls) or as its shadow went (the shadow's calls,
    which say where each result came from): the calls that acted are its effects."""
    effects = [
        Effect(
            tool=c.tool,
            arguments=c.arguments,
            ok=c.ok,
            source=c.source if isinstance(c, ShadowCall) else None,
            run_id=run,
        )
        for run, c in calls
        if c.side_effect and c.ok
    ]
    return _side(state, effects, error)


def _side(state: RunState, effects: list[Effect], error: str | None) -> Side:
    replies = []
    if state.conversation is not None:
        replies = [turn.reply for turn in state.conversation.turns]
    return Side(
        run_id=state.run_id,
        status=state.status.value,
        final_answer=state.final_answer or (replies[-1] if replies else None),
        error=error or (state.errors[-1] if state.errors else None),
        effects=effects,
        approvals=[
            Approval(tool=a.tool, arguments=a.arguments, status=a.status.value, by=a.decided_by)
            for a in state.approvals
            if not a.is_budget
        ],
        questions=[q.question for q in state.questions],
        replies=replies,
        model_calls=state.usage.model_calls,
        memoized_calls=state.usage.memoized_calls,
        tokens=state.usage.input_tokens + state.usage.output_tokens,
        cost_usd=state.usage.cost_usd,
    )


def effect_changes(then: Sequence[Effect], now: Sequence[Effect]) -> list[EffectChange]:
    """The same call (tool and arguments) on both sides is no change; left over, a call of
    the same tool on both sides changed its arguments; the rest were added or removed."""
    left_then, left_now = list(then), list(now)
    for effect in list(left_now):
        key = same_call_key(effect.tool, effect.arguments)
        match = next((t for t in left_then if same_call_key(t.tool, t.arguments) == key), None)
        if match is not None:
            left_then.remove(match)
            left_now.remove(effect)
    changes: list[EffectChange] = []
    for effect in list(left_now):
        match = next((t for t in left_then if t.tool == effect.tool), None)
        if match is not None:
            left_then.remove(match)
            left_now.remove(effect)
            changes.append(
                EffectChange(
                    change="changed", tool=effect.tool, then=match.arguments, now=effect.arguments
                )
            )
    changes += [EffectChange(change="removed", tool=t.tool, then=t.arguments) for t in left_then]
    changes += [EffectChange(change="added", tool=n.tool, now=n.arguments) for n in left_now]
    return changes


def differences(then: Side, now: Side, changes: Sequence[EffectChange]) -> list[str]:
    """What changed, a line each; tokens and cost are figures, not differences."""
    lines: list[str] = []
    if then.status != now.status:
        lines.append(f"status: {then.status} -> {now.status}")
    if then.final_answer != now.final_answer:
        lines.append(
            f"final answer: {preview(then.final_answer, 80)!r} -> {preview(now.final_answer, 80)!r}"
        )
    lines += [change.line() for change in changes]
    asked_then = [same_call_key(a.tool, a.arguments) + a.status for a in then.approvals]
    asked_now = [same_call_key(a.tool, a.arguments) + a.status for a in now.approvals]
    for approval in now.approvals:
        key = same_call_key(approval.tool, approval.arguments) + approval.status
        if key in asked_then:
            asked_then.remove(key)
        else:
            lines.append(
                f"approval asked: {approval.tool} {_args(approval.arguments)} ({approval.status})"
            )
    for approval in then.approvals:
        key = same_call_key(approval.tool, approval.arguments) + approval.status
        if key in asked_now:
            asked_now.remove(key)
        else:
            lines.append(f"approval no longer asked: {approval.tool} {_args(approval.arguments)}")
    if then.questions != now.questions:
        lines.append(f"questions: {len(then.questions)} -> {len(now.questions)}")
    for turn, (before, after) in enumerate(zip(then.replies, now.replies, strict=False), 1):
        if before != after:
            lines.append(f"reply {turn}: {preview(before, 60)!r} -> {preview(after, 60)!r}")
    if len(then.replies) != len(now.replies):
        lines.append(f"replies: {len(then.replies)} -> {len(now.replies)}")
    return lines


async def grade(comparison: RunComparison, graders: Sequence[Grader]) -> list[Grade]:
    grades = []
    for grader in graders:
        name = getattr(grader, "name", None) or getattr(grader, "__name__", type(grader).__name__)
        try:
            verdict = grader(comparison)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except AssertionError as err:
            # Its message's first line: the why (pytest's rewriting adds the expression).
            reason = (str(err).splitlines() or ["assertion failed"])[0]
            grades.append(Grade(grader=name, passed=False, reason=preview(reason, 300)))
            continue
        except Exception as err:
            reason = f"the grader raised {type(err).__name__}: {err}"
            grades.append(Grade(grader=name, passed=False, reason=preview(reason, 300)))
            continue
        if verdict is None or verdict is True:
            grades.append(Grade(grader=name, passed=True))
        elif isinstance(verdict, str):
            grades.append(Grade(grader=name, passed=False, reason=preview(verdict, 300)))
        else:
            grades.append(Grade(grader=name, passed=bool(verdict)))
    return grades


def totals(runs: Sequence[RunComparison]) -> Totals:
    found = Totals(runs=len(runs))
    for run in runs:
        found.runs_with_differences += bool(run.differences)
        for change in run.effect_changes:
            if change.change == "added":
                found.effects_added += 1
            elif change.change == "removed":
                found.effects_removed += 1
            else:
                found.effects_changed += 1
        found.tokens_then += run.then.tokens
        found.tokens_now += run.now.tokens
        found.cost_then_usd = round(found.cost_then_usd + run.then.cost_usd, 6)
        found.cost_now_usd = round(found.cost_now_usd + run.now.cost_usd, 6)
        found.failed_grades += sum(not g.passed for g in run.grades)
    return found


def _args(arguments: dict[str, Any] | None) -> str:
    return preview(", ".join(f"{k}={v!r}" for k, v in sorted((arguments or {}).items())), 120)
