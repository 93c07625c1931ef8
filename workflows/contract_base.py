"""What every payload crossing the workflow boundary shares: strict models (an unknown
field is an error), compact ones (fields left at None are not written into the history),
and the bounded preview that is all the history keeps of a text (invariant 3)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
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


NAME = Field(min_length=1, max_length=100)


StepTitle = Annotated[str, Field(min_length=1, max_length=300)]


def first_problem(err: ValidationError, top: str) -> str:
    """A validation error's first problem as one line, "where: what" (`top` names the
    input itself when the problem is not in one of its fields)."""
    first = err.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or top
    return f"{where}: {first['msg']}"


# The largest token and tool-call limits a budget takes: far past anything a run spends.
MAX_TOKENS = 10**12
MAX_TOOL_CALLS = 10**9


class BudgetLimits(StrictModel):
    """The budget's figures, each with its one set of bounds: what a run may spend
    (RunBudget), what a person raises it to (BudgetRaise), what the console's form takes.
    None: no limit (in a raise: as it was)."""

    usd: float | None = Field(default=None, ge=0, le=1_000_000, allow_inf_nan=False)
    tokens: int | None = Field(default=None, ge=0, le=MAX_TOKENS)
    tool_calls: int | None = Field(default=None, ge=0, le=MAX_TOOL_CALLS)
    seconds: float | None = Field(default=None, gt=0, le=365 * 24 * 3600.0, allow_inf_nan=False)

    def limits(self) -> dict[str, Any]:
        """The figures given, by name."""
        return self.model_dump(include=set(BudgetLimits.model_fields), exclude_none=True)
