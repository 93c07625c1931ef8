"""Typed answers: an agent may declare its answer's type (`Agent(output_type=Model)`), a
pydantic model. The final answer must then be one JSON object of that model; a reply that
is not is sent back to the model with the validation error, at most OUTPUT_ATTEMPTS
times, and a run that never answers in shape fails with the last error."""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from durable_agents.workflows.agent_records import OutputRecord
from durable_agents.workflows.contracts import RunResult
from durable_agents.workflows.tools import ToolDefinitionError, digest_of

# How many answers a run asks for, the first included, before it fails.
OUTPUT_ATTEMPTS = 3
# A schema longer than this would crowd the prompt and the history's one copy of it.
SCHEMA_CHARS = 8000
AnswerT = TypeVar("AnswerT", bound=BaseModel)
_FENCED = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def schema_text(output_type: type[BaseModel]) -> str:
    return json.dumps(output_type.model_json_schema(), sort_keys=True, separators=(",", ":"))


def check_output_type(where: str, output_type: object) -> None:
    if not (isinstance(output_type, type) and issubclass(output_type, BaseModel)):
        raise ToolDefinitionError(f"{where}: output_type is a pydantic model class")
    try:
        schema = schema_text(output_type)
    except Exception as err:  # pydantic's own, for a type with no JSON schema
        reason = " ".join(str(err).split())[:200]
        raise ToolDefinitionError(f"{where}: output_type has no JSON schema: {reason}") from None
    if len(schema) > SCHEMA_CHARS:
        raise ToolDefinitionError(
            f"{where}: output_type's JSON schema is over {SCHEMA_CHARS} characters"
        )


def output_record(output_type: type[BaseModel]) -> OutputRecord:
    return OutputRecord(
        name=output_type.__name__,
        schema_digest=digest_of(schema_text(output_type)),
        attempts=OUTPUT_ATTEMPTS,
    )


def parsed(
    output_type: type[BaseModel], answer: str, kept_chars: int
) -> tuple[dict[str, Any] | None, str]:
    """The answer as the declared type's JSON (and no error), or None and the validation
    error in one line, as the model will read it. A ```json fence around it is allowed.
    The run keeps `kept_chars` of an answer: a longer one cannot be read whole."""
    if len(answer) >= kept_chars:
        return None, f"the answer is over {kept_chars - 1} characters: make it shorter"
    text = answer.strip()
    fenced = _FENCED.match(text)
    if fenced is not None:
        text = fenced.group(1)
    try:
        value = output_type.model_validate_json(text)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(the answer)'}: {e['msg']}"
            for e in err.errors(include_url=False)[:5]
        )
        return None, problems
    return value.model_dump(mode="json"), ""


class NoAnswer(ValueError):
    """A run gave no answer of the type asked for; the message says why in one line."""


def answer_of(result: RunResult, output_type: type[AnswerT], run_id: str) -> AnswerT:
    """A run's answer as `output_type` (the client's, the workflow helper's and the testing
    kit's one reading), or NoAnswer saying why there is none."""
    if result.output is None:
        why = result.error or (
            "its agent declares no output_type"
            if result.status == "completed"
            else f"it ended {result.status}"
        )
        raise NoAnswer(f"run {run_id} gave no {output_type.__name__}: {why}")
    try:
        return output_type.model_validate(result.output)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        raise NoAnswer(
            f"run {run_id}'s answer is no {output_type.__name__}: {first['msg']}"
        ) from None
