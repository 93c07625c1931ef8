"""What starts a run and what it answers: the request (goal, agent, label, policy, limits,
budget, where it was delegated from or forked from) and the result; the policy, limits and
budget models, the spend, and the effects a run reports.

The other payloads have a module each: what people send (people_inputs.py), what crosses
the activity boundary (activity_io.py); what they share is in contract_base.py.
"""

from __future__ import annotations

import base64
import binascii
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AliasChoices,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from durable_agents.workflows.contract_base import (
    MAX_TOKENS,
    MAX_TOOL_CALLS,
    BudgetLimits,
    StrictModel,
)
from durable_agents.workflows.people_inputs import SignedDecision, StatePatch
from durable_agents.workflows.whatif import ShadowSpec


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


class RunBudget(BudgetLimits):
    """What a run and the sub-agents it delegates to may spend together; None: no limit.
    Before a model or tool call that would pass it, the run waits for a person to raise
    it or stop the run (docs/your-own-agent.md, "Budgets")."""

    @model_validator(mode="before")
    @classmethod
    def _taken_before_the_bounds(cls, data: Any) -> Any:
        """A budget a run took before these figures had upper bounds reads at the bound
        (a limit that large is never reached): such runs replay, and go on as they were."""
        if not isinstance(data, dict):
            return data
        caps = {"tokens": MAX_TOKENS, "tool_calls": MAX_TOOL_CALLS}
        over = {
            name: cap
            for name, cap in caps.items()
            if isinstance(data.get(name), int) and data[name] > cap
        }
        return {**data, **over} if over else data

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
    # What the child's spend reports carry, from parents recorded before the child's
    # spend was read from its own run (patches.CHILD_SPEND_READ); None from the others.
    report_token: str | None = Field(default=None, max_length=100)


class ChildSpend(StrictModel):
    """Signal payload from a delegated run to its parent: it has spent more. A parent
    reads the spend from the child's own run then; `spent` and `token` count only for a
    parent recorded before that (patches.CHILD_SPEND_READ)."""

    child_id: str = Field(min_length=1, max_length=300)
    spent: Spend
    token: str | None = Field(default=None, max_length=100)


DAY_SECONDS = 24 * 3600.0


def _ed25519_key(value: str) -> str:
    try:
        raw = base64.b64decode(value, validate=True)
    except binascii.Error:
        raise ValueError("public_key must be base64") from None
    if len(raw) != 32:
        raise ValueError("public_key must be a raw Ed25519 key (32 bytes, base64)")
    return value


class SubjectKey(StrictModel):
    """A public key the deployment trusts to say who a run is about (AGENT_SUBJECT_KEYS):
    a run's memory namespace counts only when a grant signed by such a key names the run
    and its subject, and the namespace matches one of the key's patterns."""

    public_key: str = Field(min_length=40, max_length=60)
    # Namespace patterns (fnmatch: "customer/*"); a grant for any other is refused.
    namespaces: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        min_length=1, max_length=1000
    )

    _is_ed25519 = field_validator("public_key")(_ed25519_key)


class TrustedKey(StrictModel):
    """A public key whose signed decisions a run accepts (workflows/signing.py)."""

    # Ed25519, raw 32 bytes, base64.
    public_key: str = Field(min_length=40, max_length=60)
    # Whose decisions it may sign; empty: anyone's (a console signing for its users).
    signs_for: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        default_factory=list, max_length=1000
    )

    _is_ed25519 = field_validator("public_key")(_ed25519_key)


# Past any amount a tool moves: a threshold above it is no threshold (and infinity none).
MAX_AMOUNT = Decimal(10**12)


class RunPolicy(StrictModel):
    """What needs a human beyond each tool's declared risk, who may decide, how long to wait."""

    approve_all_side_effects: bool = False
    # Any tool that moves money needs approval above this amount (None: no such rule).
    approve_payments_above: Decimal | None = Field(
        default=None, ge=0, le=MAX_AMOUNT, allow_inf_nan=False
    )
    # Once the run has spent this many dollars on the model, every tool call needs approval.
    approve_everything_after_spend_usd: float | None = Field(
        default=None, ge=0, le=1_000_000, allow_inf_nan=False
    )
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
        """Who may decide a request for this tool: the one rule the workflow, the console
        and the CLI all ask (the workflow's answer is the one that counts)."""
        if escalated and self.escalate_to:
            return who in self.escalate_to
        allowed = self.approvers.get(tool)
        return allowed is None or who in allowed

    def take_tool_approvers(self, tool_approvers: dict[str, list[str]]) -> None:
        """A tool's declared approvers hold unless this policy names approvers for it."""
        self.approvers = tool_approvers | self.approvers


# What a run is about ({"customer": "jane"}): at most 10 parts, each a lower-case name and
# one plain value (workflows/memory.py makes a memory namespace from it).
Subject = dict[
    Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,49}$")],
    Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}$")],
]


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
    # A conversation: the run answers people's messages, a turn each, until it is closed
    # (workflows/phases/conversation.py); the goal is its title.
    conversation: bool = False
    # What the run is about ({"customer": "jane"}): an agent with memory keeps its
    # memories under a namespace made from it (workflows/memory.py).
    subject: Subject | None = Field(default=None, max_length=10)
    # Who says the run may be about that subject (workflows/subject_grants.py): needed
    # where the deployment sets AGENT_SUBJECT_KEYS.
    subject_grant: SignedDecision | None = None
    # Set only by a parent run whose agent shares its memory with its sub-agents: the
    # namespace the child's memory tools use (checked: it must come from that parent).
    memory_namespace: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,199}$"
    )
    # A what-if shadow of a recorded run (workflows/whatif.py): only on a what-if queue.
    shadow: ShadowSpec | None = None
    # Set only by the workflow itself when it continues as new: the state it carries,
    # packed (workflows/packing.py: pack_state); plain JSON in runs of earlier versions.
    resume_state: dict[str, Any] | None = None
    resume_state_packed: str | None = None

    # A start input the worker cannot read fails the run in one line, never its first
    # workflow task over and over (runtime/refused_payloads.py reads this).
    UNREADABLE_FAILS_THE_RUN: ClassVar[bool] = True
    # The key id the worker's codec opened this input with; None: it came in the clear.
    # Set only by the worker's payload converter (`take_seal`), never from the wire.
    _sealed_with: str | None = PrivateAttr(default=None)

    def take_seal(self, key_id: str | None) -> None:
        self._sealed_with = key_id

    @property
    def sealed(self) -> bool:
        """Whether the input carries the deployment's key: only a process holding one of
        its keys could have written it (workflows/admission.py, what only it may hand on)."""
        return self._sealed_with is not None

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

    @model_serializer(mode="wrap")
    def _newer_fields_only_when_set(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A run that is no conversation and has no subject is sent as before those
        existed: a worker of an earlier build (a rolling deploy) reads its start, strict
        as it is."""
        data = handler(self)
        if isinstance(data, dict):
            for name in ("conversation", "subject", "subject_grant", "memory_namespace", "shadow"):
                if not data.get(name):
                    data.pop(name, None)
        return data


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


class RunResult(StrictModel):
    # Written only by the deployment's own runs: a worker holding keys refuses one that
    # came in the clear (runtime/refused_payloads.py): a poller of our queue may answer a
    # query or complete a run, but cannot seal what it says.
    DEPLOYMENT_ONLY: ClassVar[bool] = True

    run_id: str
    status: str
    final_answer: str | None = None
    # The final answer as its declared type's JSON (Agent(output_type=...)); sent only when
    # set, so callers of earlier builds still read every other result.
    output: dict[str, Any] | None = None
    error: str | None = None
    effects: EffectsReport | None = None
    # What the run spent, its sub-agents included (None in results of earlier versions).
    spent: Spend | None = None

    @model_serializer(mode="wrap")
    def _output_only_when_set(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("output") is None:
            data.pop("output", None)
        return data


# Finish the models that name types defined after them now, while this module is whole:
# left to their first use, a worker sharing the agent workflow's module with its sandbox
# (AGENT_WORKFLOW_SANDBOX=shared) would finish them inside the sandbox, where this module's
# names are not the ones they were defined with, and fail to decode a run's input.
RunRequest.model_rebuild()
ForkSpec.model_rebuild()
