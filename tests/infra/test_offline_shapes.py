"""The offline model answers in the shape a run asks for: the smallest valid object of
the declared type, its text saying it is scripted."""

from __future__ import annotations

import json
from enum import StrEnum

from pydantic import BaseModel, Field

from durable_agents.infra.offline_model.shapes import in_shape
from durable_agents.workflows import prompts
from durable_agents.workflows.output import parsed, schema_text


class Priority(StrEnum):
    LOW = "low"
    HIGH = "high"


class Line(BaseModel):
    sku: str
    quantity: int = Field(ge=1)


class Decision(BaseModel):
    refund: bool
    priority: Priority
    amount: float | None
    lines: list[Line] = Field(min_length=1)
    note: str = "none"


def asked(model: type[BaseModel]) -> list[dict[str, str]]:
    shape = prompts.answer_shape(model.__name__, schema_text(model))
    return [{"role": "user", "content": prompts.FINAL_MESSAGE + shape}]


def test_a_plain_answer_becomes_a_valid_object_of_the_asked_type():
    content = in_shape("The customer is refunded.", asked(Decision))
    value, error = parsed(Decision, content or "", 4000)
    assert error == "" and value is not None
    assert value["lines"] == [{"sku": "(scripted)", "quantity": 1}]
    assert value["priority"] == "low" and value["note"] == "none"


def test_json_already_and_runs_that_ask_nothing_are_left_as_they_are():
    given = json.dumps({"refund": False})
    assert in_shape(given, asked(Decision)) == given
    assert in_shape("plain", [{"role": "user", "content": "Goal: x"}]) == "plain"
