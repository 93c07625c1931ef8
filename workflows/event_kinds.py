"""Every kind of moment a run reaches: its timeline, its events (docs/events.md lists each
kind, a test holds the two together) and time travel all name moments by these."""

from __future__ import annotations

from enum import StrEnum


class EventKind(StrEnum):
    STARTED = "started"
    FORKED = "forked"
    MESSAGE = "message"  # a conversation's turn begins
    REPLIED = "replied"  # and ends
    CONVERSATION_CLOSED = "conversation closed"
    MODEL = "model"
    TOOL = "tool"
    TOOL_FAILED = "tool failed"
    APPROVAL_REQUESTED = "approval requested"
    APPROVAL_ESCALATED = "approval escalated"
    APPROVED = "approved"
    REJECTED = "rejected"
    QUESTION_ASKED = "question asked"
    ANSWERED = "answered"
    DEADLINE_PASSED = "deadline passed"
    DENIED_BY_RULE = "denied by rule"
    DECISION_REFUSED = "decision refused"
    PAUSE_REQUESTED = "pause requested"
    PAUSED = "paused"
    RESUMED = "resumed"
    EDITED = "edited"
    CANCEL_REQUESTED = "cancel requested"
    KEYS_REVOKED = "keys revoked"
    BUDGET_REACHED = "budget reached"
    BUDGET_RAISED = "budget raised"
    DELEGATED = "delegated"
    DELEGATE_ANSWERED = "delegate answered"
    DELEGATE_ANSWER_REUSED = "delegate answer reused"
    CONTINUED_AS_NEW = "continued as new"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


# The one rule for what a state transition publishes (the Web UI's current details and
# the search attributes `list`, the inbox and the Web UI filter on): the moments at which
# the status or what the run waits for may change. Publishing compares with what was
# published, so a moment that changed nothing costs nothing. Besides these, the run
# publishes where a change has no moment of its own: when it starts, when a step begins
# and when a wait for a person ends (`RunContext.publish()` there).
PUBLISHED_AT = frozenset(
    {
        EventKind.APPROVAL_REQUESTED, EventKind.APPROVAL_ESCALATED, EventKind.APPROVED,
        EventKind.REJECTED, EventKind.QUESTION_ASKED, EventKind.ANSWERED,
        EventKind.DEADLINE_PASSED, EventKind.PAUSED, EventKind.RESUMED, EventKind.EDITED,
        EventKind.BUDGET_REACHED, EventKind.BUDGET_RAISED,
        EventKind.COMPLETED, EventKind.FAILED, EventKind.CANCELLED,
    }
)  # fmt: skip
