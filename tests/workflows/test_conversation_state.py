"""A conversation's state rules, without a server: what it keeps over weeks, the part of
an idempotency key that is its message's, and the edits it refuses; the run request of a
plain run is the same bytes as before conversations existed."""

from __future__ import annotations

from datetime import UTC, datetime

from durable_agents.starters.cli_chat import printable
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.conversation_records import QueuedMessage
from durable_agents.workflows.people_inputs import StatePatch
from durable_agents.workflows.records import ApprovalRequest, ApprovalStatus, PlanStep
from durable_agents.workflows.state import RunState, patch_error, trim_for_a_long_life
from tests.conftest import arrange

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def conversation() -> RunState:
    return RunState.start("chat-1", RunRequest(goal="chat", conversation=True), NOW)


def approval(i: int, status: ApprovalStatus) -> ApprovalRequest:
    return ApprovalRequest(
        request_id=f"r{i}", tool="refund", arguments={}, reason="", step=i,
        requested_at=NOW, status=status,
    )  # fmt: skip


def test_a_long_life_keeps_what_is_pending_and_the_latest_of_the_rest():
    state = conversation()
    arrange(state, approvals=[approval(i, ApprovalStatus.APPROVED) for i in range(10)])
    state.approvals.insert(3, approval(99, ApprovalStatus.PENDING))
    for i in range(10):
        state.audit_log.log(NOW, "jo", "edited", str(i))
    trim_for_a_long_life(state, kept=4)
    assert [a.request_id for a in state.approvals] == ["r99", "r6", "r7", "r8", "r9"]
    assert [e.detail for e in state.audit] == ["6", "7", "8", "9"]


def test_a_turns_calls_are_keyed_by_its_message_too():
    state = conversation()
    assert state.thread.call_key("call_1") == "call_1"  # between turns: nothing to add
    assert state.conversation is not None
    state.conversation.queue.append(
        QueuedMessage(message_id="msg-a", text="refund", by="jo", received_at=NOW)
    )
    state.steps.start_step(PlanStep(index=2, title="jo: refund"), NOW)
    assert state.thread.call_key("call_1") == "msg-a/call_1"
    plain = RunState.start("r1", RunRequest(goal="g"), NOW)
    plain.steps.start_step(PlanStep(index=2, title="step"), NOW)
    assert plain.thread.call_key("call_1") == "call_1"  # runs that are no conversation: unchanged


def test_a_conversations_steps_are_its_turns_not_an_edit():
    state = conversation()
    state.steps.start_step(PlanStep(index=1, title="jo: hi"), NOW)
    error = patch_error(state, StatePatch(by="ed", pending_steps=["do this"]))
    assert error is not None and "send a message instead" in error


def test_a_plain_runs_start_is_sent_as_before_conversations_existed():
    assert "conversation" not in RunRequest(goal="g").model_dump_json()
    assert '"conversation":true' in RunRequest(goal="g", conversation=True).model_dump_json()


def test_a_models_text_reaches_the_terminal_without_control_characters():
    assert printable("ok\x1b[2Jgone\x07\tand\nmore") == "ok\ufffd[2Jgone\ufffd\tand\nmore"


def test_a_memory_namespace_is_whole_parts_so_two_subjects_never_share_one():
    import pytest

    from durable_agents.workflows.memory import Memory, MemoryDeclarationError

    assert Memory("customer/{customer}").resolve({"customer": "jane"}) == "customer/jane"
    assert Memory("team/{team}/user/{user}").resolve({"team": "a", "user": "b"}) == (
        "team/a/user/b"
    )
    for template in ("t-{tenant}-u-{user}", "{customer}", "customer/{customer}x", "a//b"):
        with pytest.raises(MemoryDeclarationError):
            Memory(template)
    with pytest.raises(MemoryDeclarationError, match="kept per customer"):
        Memory("customer/{customer}").resolve({})
    assert Memory("customer/{customer}", optional=True).resolve({}) is None
