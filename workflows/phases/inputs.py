"""What people's signals, updates and queries carry, read defensively: a handler takes
whatever the wire carries (`*payload`) and validates it here, so a signal with no input, two
inputs or another encoding is dropped with a warning and an update refused, state unchanged,
instead of failing the workflow task for good (docs/architecture.md, invariant 8)."""

from __future__ import annotations

from typing import Any, TypeVar

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ValidationError

InputModel = TypeVar("InputModel", bound=BaseModel)


def parse_input(name: str, payload: tuple[Any, ...], model: type[InputModel]) -> InputModel:
    """The one input a handler takes, validated; ValueError says in one line what is wrong."""
    if len(payload) != 1:
        raise ValueError(f"{name} takes exactly one input, got {len(payload)}")
    value = payload[0]
    if isinstance(value, model):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"{name} takes a JSON object, got {type(value).__name__}")
    try:
        return model.model_validate(value)
    except ValidationError as err:
        raise ValueError(f"{name}: {describe(err)}") from None


def signal_input(name: str, payload: tuple[Any, ...], model: type[InputModel]) -> InputModel | None:
    try:
        return parse_input(name, payload, model)
    except ValueError as err:
        workflow.logger.warning("signal dropped: %s", err)
        return None


def update_input(name: str, payload: tuple[Any, ...], model: type[InputModel]) -> InputModel:
    try:
        return parse_input(name, payload, model)
    except ValueError as err:
        raise ApplicationError(str(err), type="InputRefused", non_retryable=True) from None


def refuse_if(error: str | None) -> None:
    if error is not None:
        raise ApplicationError(error, type="InputRefused", non_retryable=True)


def events_after(payload: tuple[Any, ...]) -> int:
    if not payload:
        return 0
    value = payload[0]
    after = value.get("after", 0) if isinstance(value, dict) and len(payload) == 1 else None
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise ValueError('events takes nothing or {"after": N}, N a whole number >= 0')
    return after


def describe(err: Exception) -> str:
    if isinstance(err, ValidationError):
        parts = []
        for e in err.errors(include_url=False):
            where = ".".join(str(p) for p in e["loc"]) or "arguments"
            parts.append(f"{where}: {e['msg']}")
        return "; ".join(parts)
    return str(err)
