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


# A run id, whole by itself however `re` applies it: \A and \Z, as `$` also matches
# before a trailing newline ("run-1\n" passed `re.match`). Not a pydantic Field pattern
# (Rust's regex has no \Z): check it with re.fullmatch.
RUN_ID_PATTERN = r"\A[A-Za-z0-9][A-Za-z0-9._:-]{0,199}\Z"


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
            return {key: value for key, value in data.items() if not self._left_out(key, value)}
        return data

    def _left_out(self, name: str, value: Any) -> bool:
        return value is None


class StepPayload(CompactModel):
    """What a step's activities take and give, written twice in every step's history: a
    field at its default is not written either (`false`, `[]`, a default number), since
    reading it back gives the default again. So a default here is part of what every
    recorded history means: never change one; add a field instead."""

    def _left_out(self, name: str, value: Any) -> bool:
        if value is None:
            return True
        defaults = _DEFAULTS.get(type(self))
        if defaults is None:
            defaults = _DEFAULTS[type(self)] = _defaults_of(type(self))
        return name in defaults and bool(getattr(self, name) == defaults[name])


# Each step payload class's defaults, made once (a factory's too): compared, never handed
# out, so one shared list or model is safe.
_DEFAULTS: dict[type[BaseModel], dict[str, Any]] = {}


def _defaults_of(cls: type[BaseModel]) -> dict[str, Any]:
    return {
        name: field.get_default(call_default_factory=True, validated_data={})
        for name, field in cls.model_fields.items()
        if not field.is_required()
    }


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
