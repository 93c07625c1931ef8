"""What a step writes into the history: its inputs and results leave out every field at
its default, and read back the same (workflows/contract_base.py StepPayload)."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from durable_agents.workflows.activity_io import (
    ChatMessage,
    ModelCallInput,
    ModelTurn,
    TokenUsage,
    ToolCall,
    ToolCallInput,
    ToolOutcome,
)
from durable_agents.workflows.contract_base import CUT_SHORT_REASONS, StepPayload

AT_DEFAULTS = [
    ModelCallInput(reply_seq=3),
    ModelTurn(seq=3),
    ToolCallInput(step=1, tool_call_id="c1", name="t", arguments={}, result_seq=4),
    ToolOutcome(ok=True, summary="done", result_seq=4),
    ChatMessage(seq=1, role="user", content="hi"),
    ToolCall(id="c1", name="t", arguments="{}"),
]
SET = [
    ModelCallInput(
        run_id="r@1", reply_seq=3, tools=["a"], preview_chars=80, label="step 2",
        append=[ChatMessage(seq=2, role="user", content="go")], stream=True, rows_written=2,
    ),
    ModelTurn(
        seq=3, content_preview="p", tool_calls=[ToolCall(id="c", name="t", arguments="{}")],
        finish_reason="length", usage=TokenUsage(input_tokens=2), memoized=True,
    ),
    ToolCallInput(
        run_id="r@1", step=1, tool_call_id="c1", name="t", arguments={"a": 1}, result_seq=4,
        side_effect=True,
    ),
    ToolOutcome(ok=False, summary="no", result_seq=4, replayed_from_ledger=True),
]  # fmt: skip


def test_every_step_payload_class_is_one():
    # The classes a step writes into the history twice: each leaves its defaults out.
    for payload in AT_DEFAULTS:
        assert isinstance(payload, StepPayload), type(payload).__name__


@pytest.mark.parametrize("payload", AT_DEFAULTS, ids=lambda p: type(p).__name__)
def test_a_payload_at_its_defaults_writes_only_what_it_must(payload):
    written = json.loads(payload.model_dump_json())
    required = {name for name, f in type(payload).model_fields.items() if f.is_required()}
    assert set(written) == required
    assert type(payload).model_validate(written) == payload


@pytest.mark.parametrize("payload", SET, ids=lambda p: type(p).__name__)
def test_a_payload_set_off_its_defaults_reads_back_the_same(payload):
    written = payload.model_dump(mode="json")
    assert type(payload).model_validate(written) == payload
    assert type(payload).model_validate_json(payload.model_dump_json()) == payload


def test_a_turn_writes_its_finish_reason_only_when_cut_short_and_never_its_model():
    for reason in ("stop", "tool_calls", *CUT_SHORT_REASONS):
        turn = ModelTurn(seq=1, finish_reason=reason, model="gpt-x")
        written = json.loads(turn.model_dump_json())
        assert "model" not in written
        assert written.get("finish_reason") == (reason if reason in CUT_SHORT_REASONS else None)
    # The activity's own span and metrics still see both, before it is written.
    assert ModelTurn(seq=1, finish_reason="stop", model="gpt-x").model == "gpt-x"


def test_a_history_recorded_with_every_field_still_reads():
    # Histories recorded before: every field written, `model` and `finish_reason` too.
    recorded = {
        "seq": 3, "content_preview": "", "tool_calls": [], "finish_reason": "stop",
        "model": "m", "usage": {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0},
        "memoized": False,
    }  # fmt: skip
    turn = ModelTurn.model_validate(recorded)
    assert (turn.seq, turn.finish_reason, turn.memoized) == (3, "stop", False)
    tool = ToolCallInput.model_validate(
        {"run_id": "r", "step": 1, "tool_call_id": "c", "name": "t", "arguments": {},
         "result_seq": 2, "idempotency_key": "r/step-1/c"}
    )  # fmt: skip
    assert tool.key == "r/step-1/c"


# Every step payload class's defaults as recorded histories hold them: a field left out of
# a history reads back as this, so changing one changes what every recorded step meant.
RECORDED_DEFAULTS: dict[str, dict[str, object]] = {
    "ChatMessage": {"tool_call_id": None, "speaker": None},
    "ModelCallInput": {
        "run_id": "", "append": [], "tools": [], "force_tool": None, "agent": None,
        "run_label": None, "label": "model", "preview_chars": 200, "answer_chars": None,
        "stream": None, "context_from_seq": None, "budget_usd": None, "budget_tokens": None,
        "shadow_of": None, "rows_written": None,
    },
    "ModelTurn": {
        "content_preview": "", "tool_calls": [], "finish_reason": None, "model": "",
        "usage": {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}, "memoized": False,
        "over_budget": None, "store_queue": None,
    },
    "ToolCall": {"oversized": None},
    "ToolCallInput": {
        "run_id": "", "idempotency_key": None, "side_effect": None, "namespace": None,
        "agent": None, "mcp": None, "mcp_name": None, "shadow": None, "shadow_of": None,
        "rows_written": None,
    },
    "ToolOutcome": {"replayed_from_ledger": False, "store_queue": None},
}  # fmt: skip


def _payload_classes(cls: type[StepPayload] = StepPayload) -> set[type[StepPayload]]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _payload_classes(sub)
    return found


def test_every_step_payloads_defaults_are_the_recorded_ones():
    defaults = {
        cls.__name__: {
            name: dumped.model_dump() if isinstance(dumped, BaseModel) else dumped
            for name, field in cls.model_fields.items()
            if not field.is_required()
            for dumped in [field.get_default(call_default_factory=True, validated_data={})]
        }
        for cls in _payload_classes()
    }
    assert defaults == RECORDED_DEFAULTS
