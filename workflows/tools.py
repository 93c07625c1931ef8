"""Tools: a typed function becomes a tool the model may call (`@tool`).

Pure: the workflow validates the model's arguments against a tool's argument model and
decides approval from its declared risk, and the model activity sends the same JSON
schema to the model. Only the `run_tool` activity ever calls the function itself.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import typing
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, overload

from pydantic import BaseModel, ConfigDict, Field, create_model
from temporalio.common import RetryPolicy

TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"


class ToolRisk(StrEnum):
    """How dangerous a tool is; the run's policy turns this into 'needs a human' or not."""

    READ_ONLY = "read_only"
    SIDE_EFFECT = "side_effect"
    NEEDS_APPROVAL = "needs_approval"

    @property
    def has_effects(self) -> bool:
        """Whether a call changes something outside the run: it runs once per idempotency
        key, never for real in a what-if (every risk but read-only)."""
        return self is not ToolRisk.READ_ONLY


class ToolArgs(BaseModel):
    """Base of argument models: unknown fields are refused, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolDefinitionError(ValueError):
    """A tool or an agent declared in a way we cannot run; the message says how to fix it."""


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know about the call it serves (declare a parameter of this type).

    `idempotency_key` is set for tools with side effects: stable across retries, crashes
    and replays, so passing it to the provider makes the effect happen once.
    """

    run_id: str
    step: int
    tool_call_id: str
    attempt: int
    idempotency_key: str | None
    # A directory of the worker where tools may keep files of their own.
    data_dir: Path
    heartbeat: Callable[..., None] = field(repr=False, default=lambda *details: None)
    # The run's memory namespace, for the built-in memory tools (workflows/memory.py).
    memory: Any = field(repr=False, default=None)


@dataclass(frozen=True, eq=False)
class Tool:
    """A tool as declared with `@tool`; calling it calls the function."""

    name: str
    description: str
    risk: ToolRisk
    args_model: type[BaseModel]
    fn: Callable[..., Any] | None = field(repr=False, default=None)
    # The argument holding an amount of money, for the run policy's payment threshold.
    amount_field: str | None = None
    timeout: timedelta | None = None
    retry: RetryPolicy | None = None
    # Who may decide on this tool's calls when the run's policy names nobody for it.
    approvers: tuple[str, ...] = ()
    # Handled inside the workflow (plan bookkeeping, questions), never run as an activity.
    internal: bool = False
    # How the function takes what the model sent: the one model parameter, or fields.
    args_param: str | None = None
    context_param: str | None = None
    # A delegate (workflows.agents.delegate): the agent it hands tasks to, run as a child.
    delegate_to: str | None = None
    delegate_agent: Any = field(repr=False, default=None)
    # What a what-if shadow gets instead of a call the recorded run never made: a function
    # of the validated arguments (the tool's own model), never given a context.
    simulate: Callable[[BaseModel], Any] | None = field(repr=False, default=None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fn is None:
            raise TypeError(f"{self.name} is handled by the workflow, not called")
        return self.fn(*args, **kwargs)

    @cached_property
    def schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments (built once: every model call sends it)."""
        return self.args_model.model_json_schema()

    @cached_property
    def schema_digest(self) -> str:
        return digest_of(self.schema)

    def call_arguments(self, args: BaseModel, ctx: ToolContext) -> dict[str, Any]:
        """The keyword arguments the function is called with."""
        kwargs: dict[str, Any]
        if self.args_param is not None:
            kwargs = {self.args_param: args}
        else:
            kwargs = {name: getattr(args, name) for name in type(args).model_fields}
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        return kwargs

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)


def digest_of(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


ToolFunction = Callable[..., Any] | Callable[..., Awaitable[Any]]


@overload
def tool(fn: ToolFunction, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    risk: ToolRisk = ToolRisk.READ_ONLY,
    amount_field: str | None = None,
    timeout: timedelta | float | None = None,
    retry: RetryPolicy | None = None,
    approvers: Sequence[str] = (),
    description: str | None = None,
    simulate: Callable[[Any], Any] | None = None,
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    risk: ToolRisk = ToolRisk.READ_ONLY,
    amount_field: str | None = None,
    timeout: timedelta | float | None = None,
    retry: RetryPolicy | None = None,
    approvers: Sequence[str] = (),
    description: str | None = None,
    simulate: Callable[[Any], Any] | None = None,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Turn a sync or async function into a tool.

    The docstring is the description the model reads; the arguments come from one
    pydantic model parameter or from the typed parameters. A parameter typed
    `ToolContext` receives the call's context. Tools with `risk` SIDE_EFFECT or
    NEEDS_APPROVAL are run once per idempotency key by the effect ledger. `simulate`
    answers a what-if shadow's call that the recorded run never made (`agentctl whatif`):
    it takes the validated arguments, as one model, and must not act.
    """

    def declare(function: ToolFunction) -> Tool:
        return _declare(
            function,
            name=name or function.__name__,
            risk=ToolRisk(risk),
            amount_field=amount_field,
            timeout=timedelta(seconds=timeout) if isinstance(timeout, int | float) else timeout,
            retry=retry,
            approvers=tuple(approvers),
            description=description,
            simulate=simulate,
        )

    return declare(fn) if fn is not None else declare


def _declare(fn: ToolFunction, *, name: str, description: str | None, **options: Any) -> Tool:
    where = f"tool {name!r} ({getattr(fn, '__module__', '?')})"
    if not re.fullmatch(TOOL_NAME_PATTERN, name):
        raise ToolDefinitionError(f"{where}: a tool name is 1-64 letters, digits, _ or -")
    text = description or inspect.getdoc(fn)
    if not text:
        raise ToolDefinitionError(f"{where}: write a docstring; it is what the model reads")
    args_model, args_param, context_param = _arguments_of(fn, name, where)
    amount_field = options["amount_field"]
    if amount_field is not None and amount_field not in args_model.model_fields:
        raise ToolDefinitionError(f"{where}: amount_field {amount_field!r} is not an argument")
    timeout = options["timeout"]
    if timeout is not None and timeout.total_seconds() <= 0:
        raise ToolDefinitionError(f"{where}: timeout must be positive")
    if options["simulate"] is not None and not callable(options["simulate"]):
        raise ToolDefinitionError(f"{where}: simulate must be a function of the arguments")
    return Tool(
        name=name,
        description=text.strip(),
        args_model=args_model,
        fn=fn,
        args_param=args_param,
        context_param=context_param,
        **options,
    )


def _arguments_of(
    fn: ToolFunction, name: str, where: str
) -> tuple[type[BaseModel], str | None, str | None]:
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as err:
        raise ToolDefinitionError(f"{where}: cannot read its type hints: {err}") from err
    context_param: str | None = None
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ToolDefinitionError(f"{where}: parameter {param.name!r} must be named")
        if param.name not in hints:
            raise ToolDefinitionError(f"{where}: parameter {param.name!r} needs a type")
        hint = hints[param.name]
        if hint is ToolContext:
            context_param = param.name
            continue
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hint, default)
    if len(fields) == 1:
        [(param_name, (hint, _))] = fields.items()
        if isinstance(hint, type) and issubclass(hint, BaseModel):
            return hint, param_name, context_param
    model_name = "".join(part.title() for part in re.split(r"[_-]", name)) + "Args"
    model = create_model(model_name, __base__=ToolArgs, **fields)
    return model, None, context_param


# -- the tools every run has: handled by the workflow itself -----------------------------
class SubmitPlanArgs(ToolArgs):
    steps: list[Annotated[str, Field(min_length=1, max_length=300)]] = Field(
        min_length=1, max_length=5000
    )


class CompleteStepArgs(ToolArgs):
    summary: str = Field(min_length=1, max_length=1000)


class AskHumanArgs(ToolArgs):
    question: str = Field(min_length=1, max_length=2000)
    options: list[str] | None = Field(default=None, min_length=2, max_length=20)


SUBMIT_PLAN = "submit_plan"
COMPLETE_STEP = "complete_step"
ASK_HUMAN = "ask_human"

INTERNAL_TOOLS: dict[str, Tool] = {
    spec.name: spec
    for spec in (
        Tool(
            name=SUBMIT_PLAN,
            description="Submit the plan: an ordered list of short step titles.",
            risk=ToolRisk.READ_ONLY,
            args_model=SubmitPlanArgs,
            internal=True,
        ),
        Tool(
            name=COMPLETE_STEP,
            description="Mark the current plan step as done, with a one-line summary.",
            risk=ToolRisk.READ_ONLY,
            args_model=CompleteStepArgs,
            internal=True,
        ),
        Tool(
            name=ASK_HUMAN,
            description="Ask the human a question, optionally offering options; wait for "
            "the answer.",
            risk=ToolRisk.READ_ONLY,
            args_model=AskHumanArgs,
            internal=True,
        ),
    )
}
