"""The run's state as its records see it: every field of RunState (workflows/
state_fields.py), by type alone. The records (state_records.py, state_lifecycle.py,
state_decisions.py, state_budget.py) are typed by this, not by RunState, which composes
them: so the state's modules import one another in one direction only (tests/
test_layering.py), and mypy checks RunState against it wherever a record is made."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from durable_agents.workflows.activity_io import ChatMessage
from durable_agents.workflows.agent_records import AgentRecord
from durable_agents.workflows.contracts import (
    DelegatedBy,
    EffectsReport,
    RunBudget,
    RunLimits,
    RunPolicy,
    Spend,
)
from durable_agents.workflows.conversation_records import ConversationFields
from durable_agents.workflows.people_inputs import SignedDecision
from durable_agents.workflows.records import (
    ApprovalRequest,
    ApprovalStatus,
    AuditEntry,
    Delegation,
    ForkOrigin,
    PlanStep,
    Question,
    QuestionStatus,
    RunEvent,
    RunStatus,
    SignedUse,
    ToolResultRecord,
    Usage,
)
from durable_agents.workflows.whatif import ShadowSpec


class StateShape(Protocol):
    run_id: str
    identity: str | None
    goal: str
    label: str | None
    agent: AgentRecord | None
    policy: RunPolicy
    limits: RunLimits
    status: RunStatus
    plan: list[PlanStep]
    current_step: int | None
    context: list[str]
    results: list[ToolResultRecord]
    results_total: int
    approvals: list[ApprovalRequest]
    questions: list[Question]
    pause_requested: bool
    cancel_requested_by: str | None
    audit: list[AuditEntry]
    usage: Usage
    errors: list[str]
    final_answer: str | None
    output: dict[str, Any] | None
    effects: EffectsReport
    next_seq: int
    outbox: list[ChatMessage]
    transcript_rows: int | None
    notes_for_model: list[str]
    moment: int
    events: list[RunEvent]
    phase_start_seq: int
    parent: ForkOrigin | None
    chain: int
    budget: RunBudget | None
    tool_calls: int
    last_call: Spend | None
    delegations: list[Delegation]
    delegated_by: DelegatedBy | None
    signature_version: int
    signed_nonces: list[SignedUse]
    people_checks: int
    revoked_keys: list[str]
    conversation: ConversationFields | None
    subject: dict[str, str] | None
    subject_grant: SignedDecision | None
    memory_namespace: str | None
    shadow: ShadowSpec | None
    created_at: datetime
    updated_at: datetime


def pending_approvals(state: StateShape) -> list[ApprovalRequest]:
    """The approvals still waiting for a decision (the requests' record and the lifecycle
    both ask)."""
    return [a for a in state.approvals if a.status is ApprovalStatus.PENDING]


def pending_questions(state: StateShape) -> list[Question]:
    """The questions still waiting for an answer."""
    return [q for q in state.questions if q.status is QuestionStatus.PENDING]
