"""Payloads that cross the workflow boundary: start request, signals, activity I/O.

Activity payloads carry references (run id, sequence number) and short previews,
never the conversation: the conversation lives in the transcript store. That is
what keeps history per step constant (docs/architecture.md, invariant 3).
"""

from __future__ import annotations

import base64
import binascii
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

PREVIEW_CHARS = 200
# finish_reason values of a reply that stopped before the model was done.
CUT_SHORT_REASONS = ("length", "content_filter")
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$"


def preview(text: str | None, limit: int = PREVIEW_CHARS, *, single_line: bool = True) -> str:
    """A bounded preview that is safe to put in history (one line unless asked)."""
    if not text:
        return ""
    chunk = text[: limit * 4]  # a preview never needs more; a 10 MB text stays cheap
    flat = " ".join(chunk.split()) if single_line else chunk.strip()
    if len(flat) <= limit and len(chunk) == len(text):
        return flat
    return flat[: limit - 1] + "…"


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CompactModel(StrictModel):
    """An activity's input or result, written into every step's history: fields left at
    None are not written at all (reading them back gives None again)."""

    @model_serializer(mode="wrap")
    def _without_nones(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data


class RunLimits(StrictModel):
    """Guards and timeouts of one run; the defaults suit a hosted model."""

    max_turns_per_step: int = Field(default=8, ge=1, le=100)
    max_plan_attempts: int = Field(default=3, ge=1, le=10)
    model_timeout_seconds: float = Field(default=120.0, gt=0, le=3600)
    model_max_attempts: int = Field(default=10, ge=1, le=100)
    tool_timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    # Continue as new once the history has this many events (None: when Temporal suggests).
    continue_as_new_after_events: int | None = Field(default=None, ge=50)
    # What the model sees: the whole conversation, or the goal, a recap and the current
    # step's messages ("step": each call costs the same however long the run is).
    context: Literal["full", "step"] = "full"
    # How a step may end: with any answer that calls no tool, or only through complete_step
    # (an answer without it is sent back; the turn limit still applies).
    steps_end: Literal["answer", "complete_step"] = "answer"


NAME = Field(min_length=1, max_length=100)


class RunBudget(StrictModel):
    """What a run and the sub-agents it delegates to may spend together; None: no limit.
    Before a model or tool call that would pass it, the run waits for a person to raise
    it or stop the run (docs/your-own-agent.md, "Budgets")."""

    usd: float | None = Field(default=None, ge=0, le=1_000_000)
    tokens: int | None = Field(default=None, ge=0)
    tool_calls: int | None = Field(default=None, ge=0)
    seconds: float | None = Field(default=None, gt=0, le=365 * 24 * 3600.0)

    def is_empty(self) -> bool:
        return all(v is None for v in (self.usd, self.tokens, self.tool_calls, self.seconds))


class Spend(StrictModel):
    """What a run spent, its delegated sub-agents included."""

    usd: float = 0.0
    tokens: int = 0
    tool_calls: int = 0

    def plus(self, other: Spend) -> Spend:
        return Spend(
            usd=round(self.usd + other.usd, 6),
            tokens=self.tokens + other.tokens,
            tool_calls=self.tool_calls + other.tool_calls,
        )


class DelegatedBy(StrictModel):
    """The run that delegated this one: its workflow id, the step and the tool call."""

    run_id: str = Field(min_length=1, max_length=200)
    step: int = Field(ge=0)
    tool_call_id: str = Field(min_length=1, max_length=200)
    agent: str | None = Field(default=None, max_length=100)
    # The identities of the runs above this one, its parent's last: a change a person
    # signed for one of them (a budget, a pause) is forwarded down, and counts here too.
    identities: list[Annotated[str, Field(max_length=300)]] = Field(
        default_factory=list, max_length=20
    )
    # What the child's spend reports carry, so one sent by anyone else is dropped.
    report_token: str | None = Field(default=None, max_length=100)


class ChildSpend(StrictModel):
    """Signal payload from a delegated run to its parent: what it has spent so far."""

    child_id: str = Field(min_length=1, max_length=300)
    spent: Spend
    token: str | None = Field(default=None, max_length=100)


class BudgetRaise(StrictModel):
    """Update payload for `raise_budget` (and the signal a parent sends its child): the new
    budget, each limit given at least what is spent; limits left out stay as they were."""

    by: str = NAME
    usd: float | None = Field(default=None, ge=0, le=1_000_000, allow_inf_nan=False)
    tokens: int | None = Field(default=None, ge=0, le=10**12)
    tool_calls: int | None = Field(default=None, ge=0, le=10**9)
    seconds: float | None = Field(default=None, gt=0, le=365 * 24 * 3600.0, allow_inf_nan=False)
    comment: str = Field(default="", max_length=2000)
    signed: SignedDecision | None = None
    # Set by a parent passing a person's raise on to its sub-agent: the raise as signed,
    # which the sub-agent verifies (its own limits may not pass the signed ones).
    forwarded: BudgetRaise | None = None

    def limits(self) -> dict[str, Any]:
        return self.model_dump(
            include={"usd", "tokens", "tool_calls", "seconds"}, exclude_none=True
        )

    def what_it_says(self) -> dict[str, Any]:
        """What a signature over this raise covers."""
        return {"limits": self.limits(), "comment": self.comment}


DAY_SECONDS = 24 * 3600.0
StepTitle = Annotated[str, Field(min_length=1, max_length=300)]


class TrustedKey(StrictModel):
    """A public key whose signed decisions a run accepts (workflows/signing.py)."""

    # Ed25519, raw 32 bytes, base64.
    public_key: str = Field(min_length=40, max_length=60)
    # Whose decisions it may sign; empty: anyone's (a console signing for its users).
    signs_for: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        default_factory=list, max_length=1000
    )

    @field_validator("public_key")
    @classmethod
    def _is_ed25519(cls, value: str) -> str:
        try:
            raw = base64.b64decode(value, validate=True)
        except binascii.Error:
            raise ValueError("public_key must be base64") from None
        if len(raw) != 32:
            raise ValueError("public_key must be a raw Ed25519 key (32 bytes, base64)")
        return value


class RunPolicy(StrictModel):
    """What needs a human beyond each tool's declared risk, who may decide, how long to wait."""

    approve_all_side_effects: bool = False
    # Any tool that moves money needs approval above this amount (None: no such rule).
    approve_payments_above: Decimal | None = Field(default=None, ge=0)
    # Once the run has spent this many dollars on the model, every tool call needs approval.
    approve_everything_after_spend_usd: float | None = Field(default=None, ge=0)
    # Who may decide, per tool name; a tool not listed may be decided by anyone.
    approvers: dict[str, list[str]] = Field(default_factory=dict)
    # How long an approval or a question waits, and what happens then.
    decision_timeout_seconds: float = Field(default=DAY_SECONDS, gt=0, le=365 * DAY_SECONDS)
    on_timeout: Literal["reject", "escalate"] = "reject"
    # After escalation, only these may decide (empty: anyone); a second timeout rejects.
    escalate_to: list[str] = Field(default_factory=list)

    # Decisions (approve, reject, answer) count only when signed by one of these keys
    # (key id -> key): a name typed into a signal is not enough.
    require_signed_decisions: bool = False
    trusted_keys: dict[Annotated[str, Field(min_length=1, max_length=100)], TrustedKey] = Field(
        default_factory=dict, max_length=100
    )

    @model_validator(mode="after")
    def _keys_for_signatures(self) -> RunPolicy:
        if self.require_signed_decisions and not self.trusted_keys:
            raise ValueError("require_signed_decisions needs at least one of trusted_keys")
        return self

    def may_decide(self, tool: str, who: str, escalated: bool = False) -> bool:
        if escalated and self.escalate_to:
            return who in self.escalate_to
        allowed = self.approvers.get(tool)
        return allowed is None or who in allowed


class RunRequest(StrictModel):
    """What a caller sends to start a run. Validated before anything is started."""

    goal: str = Field(min_length=1, max_length=4000)
    # The agent to run (None: runs started before agents existed, workflows/agents.py).
    agent: str | None = Field(default=None, max_length=100)
    # A free label the model client forwards with each call (the offline model reads its
    # scenario from it); runs of earlier versions sent it as `scenario`.
    label: str | None = Field(
        default=None,
        max_length=500,
        validation_alias=AliasChoices("label", "scenario"),
    )
    # None: the agent's own defaults.
    policy: RunPolicy | None = None
    limits: RunLimits | None = None
    # None: the agent's own budget (if it has one).
    budget: RunBudget | None = None
    # Set by a parent run that delegated this one to a sub-agent (a child workflow).
    delegated_by: DelegatedBy | None = None
    fork: ForkSpec | None = None
    # Set only by the workflow itself when it continues as new: the state it carries,
    # packed (workflows/state.py: pack_state); plain JSON in runs of earlier versions.
    resume_state: dict[str, Any] | None = None
    resume_state_packed: str | None = None

    @field_validator("label")
    @classmethod
    def _label_is_header_text(cls, value: str | None) -> str | None:
        # It travels as an HTTP header (to the offline model), which carries nothing else.
        if value is not None and not all(" " <= ch <= "~" for ch in value):
            raise ValueError(
                "a run label is printable ASCII only (no accents, no control characters)"
            )
        return value

    @property
    def resumes(self) -> bool:
        return self.resume_state is not None or self.resume_state_packed is not None


class ForkSpec(StrictModel):
    """A run forked from another: the parent and its state at the chosen moment (a RunState
    as JSON, checked again by the workflow), and an optional edit."""

    parent_run_id: str = Field(min_length=1, max_length=200)
    state: dict[str, Any]
    edit: StatePatch | None = None
    # Who forks; signed (over the parent, the moment, the edit and the fork's own id) when
    # the parent's policy requires signed changes.
    by: str | None = Field(default=None, min_length=1, max_length=100)
    signed: SignedDecision | None = None

    def what_it_says(self, fork_id: str) -> dict[str, Any]:
        edit = self.edit.changes() if self.edit is not None else None
        moment = self.state.get("moment")
        return {"parent": self.parent_run_id, "moment": moment, "edit": edit, "fork": fork_id}


class ParentFacts(StrictModel):
    """What Temporal says of a fork's parent (the `fork_origin` activity asks the parent
    itself): the identity its data is under and its policy. A fork's carried state must
    say the same, or the fork is refused."""

    store_key: str
    policy: RunPolicy


class ChatMessage(CompactModel):
    """A small message the workflow itself writes into the transcript."""

    seq: int = Field(ge=0)
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_call_id: str | None = None


class ModelCallInput(CompactModel):
    run_id: str
    # Messages the workflow appends first (instructions, errors, in-workflow tool
    # results); the reply is stored at reply_seq.
    append: list[ChatMessage] = Field(default_factory=list)
    reply_seq: int = Field(ge=0)
    tools: list[str] = Field(default_factory=list)
    force_tool: str | None = None
    agent: str | None = None
    run_label: str | None = Field(
        default=None, validation_alias=AliasChoices("run_label", "scenario")
    )
    label: str = "model"
    preview_chars: int = Field(default=PREVIEW_CHARS, ge=1, le=8000)
    # When the reply calls no tool (a plain loop's answer), its preview may be this long.
    answer_chars: int | None = Field(default=None, ge=1, le=8000)
    # With a "step" context: the model sees the goal (seq 0) and messages from here on.
    context_from_seq: int | None = None
    # What is left of the run's budget: a call whose input alone would pass it is not made
    # (the turn comes back `over_budget`); otherwise its reply is capped to what is left.
    budget_usd: float | None = None
    budget_tokens: int | None = None


class ToolCall(CompactModel):
    id: str
    name: str
    arguments: str  # raw JSON text as the model wrote it; the workflow validates it
    oversized: int | None = None  # set (to their length) when arguments were too large to carry


class TokenUsage(StrictModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class ModelTurn(CompactModel):
    seq: int
    content_preview: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    model: str = ""
    usage: TokenUsage = Field(default_factory=TokenUsage)
    memoized: bool = False
    # Set when the call was not made: it would have passed the budget (why, with figures).
    over_budget: str | None = None


def idempotency_key(run_id: str, step: int, tool_call_id: str) -> str:
    """Stable across retries, crashes and replays: made only of durable identifiers."""
    return f"{run_id}/step-{step}/{tool_call_id}"


class ToolCallInput(CompactModel):
    run_id: str
    step: int
    tool_call_id: str
    name: str
    arguments: dict[str, Any]
    result_seq: int
    # A side effect's key: sent whole by earlier versions; now `side_effect` says the
    # activity derives it (the same formula), which keeps the key out of every step's
    # history a second time.
    idempotency_key: str | None = None
    side_effect: bool | None = None
    # An MCP tool: the run's agent, the server and the tool's name there.
    agent: str | None = None
    mcp: str | None = None
    mcp_name: str | None = None

    @property
    def key(self) -> str | None:
        if self.idempotency_key is not None:
            return self.idempotency_key
        if self.side_effect:
            return idempotency_key(self.run_id, self.step, self.tool_call_id)
        return None


class TranscriptCopy(StrictModel):
    """A fork starts with its parent's conversation up to where it restarts."""

    from_run_id: str
    to_run_id: str
    before_seq: int = Field(ge=0)


class ToolOutcome(CompactModel):
    ok: bool
    summary: str
    result_seq: int
    replayed_from_ledger: bool = False


class SignedDecision(StrictModel):
    """Who changed what, on which request (or under which nonce), when: signed with a key
    the run's policy trusts (workflows/signing.py). Verified in workflow code."""

    # 1: decisions and answers over their arguments; 2: every change (workflows/signing.py).
    v: int = Field(default=1, ge=1, le=2)
    key_id: str = Field(min_length=1, max_length=100)
    # The run's identity (workflow id @ first execution): a signature for one run, or for
    # an earlier run under a reused id, never counts in another.
    run: str = Field(min_length=1, max_length=300)
    by: str = NAME
    action: Literal[
        "approve", "reject", "answer", "raise_budget", "edit", "pause", "resume", "cancel",
        "fork", "rewind",
    ]  # fmt: skip
    # The request or question decided; for a change to the run itself, a fresh nonce.
    request_id: str = Field(min_length=1, max_length=200)
    # sha256 of what the change says (workflows/signing.py: the digests).
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    at: str = Field(min_length=1, max_length=40)
    signature: str = Field(min_length=1, max_length=200)


class Decision(StrictModel):
    """Signal payload for `approve` / `reject`. Every field is optional so a bare `{}`
    works when exactly one request waits."""

    request_id: str | None = Field(default=None, max_length=200)
    by: str = Field(default="anonymous", min_length=1, max_length=100)
    comment: str = Field(default="", max_length=2000)
    signed: SignedDecision | None = None


class DecideRequest(StrictModel):
    """Update payload for `decide`: the same decision, with an answer back."""

    request_id: str | None = Field(default=None, max_length=200)
    approve: bool
    by: str = NAME
    comment: str = Field(default="", max_length=2000)
    signed: SignedDecision | None = None

    def as_decision(self) -> Decision:
        return Decision(
            request_id=self.request_id, by=self.by, comment=self.comment, signed=self.signed
        )


class Answer(StrictModel):
    """Signal and update payload for `answer`: the reply to a question the model asked."""

    question_id: str | None = Field(default=None, max_length=200)
    answer: str = Field(min_length=1, max_length=4000)
    by: str = Field(default="anonymous", min_length=1, max_length=100)
    signed: SignedDecision | None = None


class Actor(StrictModel):
    """Signal payload for `pause`, `resume` and `cancel`: who acts, and why."""

    by: str = Field(default="anonymous", min_length=1, max_length=100)
    reason: str = Field(default="", max_length=2000)
    signed: SignedDecision | None = None


class RewindRequest(StrictModel):
    """Update payload for `authorize_rewind`: who rewinds the run to which moment. The run
    checks it (and its signature, when its policy asks) before `agentctl rewind` resets."""

    by: str = NAME
    moment: int = Field(ge=1)
    signed: SignedDecision | None = None


class StatePatch(StrictModel):
    """Update payload for `edit`. Only the fields given change; at least one must be."""

    by: str = NAME
    goal: str | None = Field(default=None, min_length=1, max_length=4000)
    # Replaces the steps not started yet; done and running steps stay as they are.
    pending_steps: list[StepTitle] | None = Field(default=None, max_length=5000)
    # Replaces the gathered context.
    context: list[Annotated[str, Field(max_length=2000)]] | None = Field(
        default=None, max_length=200
    )
    signed: SignedDecision | None = None

    def changes(self) -> dict[str, Any]:
        return self.model_dump(exclude={"by", "signed"}, exclude_none=True)


class EffectSummary(StrictModel):
    """One side effect as the effect ledger recorded it."""

    tool: str
    idempotency_key: str
    ok: bool


# How many effects a run's result lists (the most recent); `effects_total` counts them all.
EFFECTS_LISTED = 50


class EffectsReport(StrictModel):
    """The effects a run performed, as the ledger recorded them: beside the model's final
    answer, what the run really did."""

    total: int = 0
    recent: list[EffectSummary] = Field(default_factory=list)


class CallVerdict(StrictModel):
    """An approval rule's verdict on one tool call, as the workflow records it."""

    rule: str
    decision: Literal["approve", "deny", "ask"]
    reason: str = Field(max_length=2000)


class EvaluationInput(StrictModel):
    """The `evaluate_call` activity's input: which agent's rule, on which call."""

    agent: str
    rule: str
    call: dict[str, Any]


class RunResult(StrictModel):
    run_id: str
    status: str
    final_answer: str | None = None
    error: str | None = None
    effects: EffectsReport | None = None
    # What the run spent, its sub-agents included (None in results of earlier versions).
    spent: Spend | None = None


class PruneRequest(StrictModel):
    """Remove our stored data (transcripts, model memo, ledger rows) of runs closed longer
    ago than `older_than_seconds`. Open runs are never touched."""

    older_than_seconds: float = Field(ge=0)
    dry_run: bool = False


class PruneReport(StrictModel):
    pruned: list[str] = Field(default_factory=list)
    kept_open: int = 0
    kept_recent: int = 0
    rows_deleted: int = 0
    dry_run: bool = False


# Finish the models that name types defined after them now, while this module is whole:
# left to their first use, a worker sharing the agent workflow's module with its sandbox
# (AGENT_WORKFLOW_SANDBOX=shared) would finish them inside the sandbox, where this module's
# names are not the ones they were defined with, and fail to decode a run's input.
RunRequest.model_rebuild()
ForkSpec.model_rebuild()
BudgetRaise.model_rebuild()
