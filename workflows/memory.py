"""Memory across runs, as an agent declares it: `Agent(memory=Memory("customer/{customer}"))`
gives its runs three built-in tools — `remember`, `recall`, `forget` — on a namespace made
from the template and the run's `subject` (its metadata: `{"customer": "jane"}`).

The model never chooses the namespace: the workflow resolves it when the run starts and
sends it with each memory tool's call, so a run reads and writes only its subject's
memories. `remember` and `forget` are side effects (once per idempotency key); `recall`
is a read whose result the history keeps, so a replay or time travel never reads again.
The store is activities/memory.py; here, pure declarations.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field

from durable_agents.workflows.agent_records import MemoryDeclaration
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.tools import Tool, ToolArgs, ToolContext, ToolRisk, tool

REMEMBER, RECALL, FORGET = "remember", "recall", "forget"
MEMORY_TOOLS = (REMEMBER, RECALL, FORGET)
NAMESPACE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,199}$"
# A subject's values end up in a namespace: the same characters, one path part each.
SUBJECT_VALUE = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}$"


class MemoryDeclarationError(ValueError):
    """A memory declaration or a run's subject that cannot make a namespace."""


@dataclass(frozen=True)
class Memory:
    """Where an agent's memories live and how much of them a model call may see.

    `namespace`: a template over the run's subject, e.g. "customer/{customer}" (or a
    fixed name). `recall_limit` and `recall_bytes` bound what one recall returns. With
    `shared_with_sub_agents`, the sub-agents this agent delegates to use its namespace
    (when they declare memory of their own)."""

    namespace: str
    recall_limit: int = 5
    recall_bytes: int = 4000
    shared_with_sub_agents: bool = False
    # How recall searches: by the words (full text), or by meaning ("embeddings": each
    # memory's vector from the endpoint's embeddings, compared with the query's).
    search: Literal["words", "embeddings"] = "words"
    # A run whose subject does not name what the namespace needs: refused (False), or run
    # without memory, its memory tools not offered to the model (True).
    optional: bool = False

    def __post_init__(self) -> None:
        check_template(self.namespace)
        if not (1 <= self.recall_limit <= 50 and 100 <= self.recall_bytes <= 100_000):
            raise MemoryDeclarationError("recall_limit is 1..50 and recall_bytes 100..100000")

    @property
    def placeholders(self) -> list[str]:
        return placeholders(self.namespace)

    def resolve(self, subject: dict[str, str]) -> str | None:
        """The namespace of a run with this subject; None when it names too little and
        memory is optional (MemoryDeclarationError when it is not: what is missing)."""
        return resolve_namespace(self.namespace, self.optional, subject)

    def declared(self) -> MemoryDeclaration:
        """What a run records of it when it starts."""
        return MemoryDeclaration(
            namespace=self.namespace,
            optional=self.optional,
            shared_with_sub_agents=self.shared_with_sub_agents,
        )


def placeholders(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def template_pattern(template: str) -> re.Pattern[str]:
    """The namespaces a template makes: each placeholder part one whole value."""
    parts = ("[^/]+" if placeholders(part) else re.escape(part) for part in template.split("/"))
    return re.compile("/".join(parts))


def check_template(template: str) -> None:
    """A namespace template is `/`-separated parts, the first a fixed name and each other
    either fixed or one whole placeholder ("customer/{customer}"): subject values carry no
    `/`, so two different subjects never make the same namespace."""
    parts = template.split("/")
    fixed = [p for p in parts if "{" not in p and "}" not in p]
    whole = [p for p in parts if re.fullmatch(r"\{[a-z][a-z0-9_]{0,49}\}", p)]
    if (
        len(fixed) + len(whole) != len(parts)
        or "{" in parts[0]
        or not all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,49}", p) for p in fixed)
    ):
        raise MemoryDeclarationError(
            f"memory namespace {template!r}: parts split by /, the first a fixed name "
            "(letters, digits, . _ : @ -), each other fixed or one whole {placeholder}"
        )


def resolve_namespace(template: str, optional: bool, subject: dict[str, str]) -> str | None:
    """The namespace of a run with this subject (see Memory.resolve)."""
    missing = [name for name in placeholders(template) if name not in subject]
    if missing and optional:
        return None
    if missing:
        raise MemoryDeclarationError(
            f"the agent's memory is kept per {', '.join(missing)}: start the run with "
            f"a subject naming {' and '.join(missing)}"
        )
    resolved = template.format(**subject)
    # Each value one whole part, never empty nor "..": two subjects never share a namespace.
    values_ok = all(re.fullmatch(SUBJECT_VALUE, subject[n]) for n in placeholders(template))
    if not values_ok or not re.fullmatch(NAMESPACE_PATTERN, resolved) or ".." in resolved:
        raise MemoryDeclarationError(
            f"the run's subject makes no namespace ({preview(resolved, 60)}): values are "
            "letters, digits and . _ : @ - (at most 100), the whole at most 200"
        )
    return resolved


class RememberArgs(ToolArgs):
    text: str = Field(min_length=1, max_length=2000, description="What to remember, in a sentence.")
    fields: dict[Annotated[str, Field(max_length=50)], Annotated[str, Field(max_length=200)]] = (
        Field(default_factory=dict, max_length=10, description="Small facts, by name.")
    )


class RecallArgs(ToolArgs):
    query: str = Field(max_length=500, description="Words to look for; empty: the latest.")


class ForgetArgs(ToolArgs):
    memory_id: str = Field(min_length=1, max_length=100, pattern=r"^mem-[0-9a-f]{16}$")


@tool(name=REMEMBER, risk=ToolRisk.SIDE_EFFECT)
def remember(ctx: ToolContext, args: RememberArgs) -> dict[str, Any]:
    """Remember something about this conversation's subject for later runs (a preference,
    a fact): one sentence, and small named fields if useful."""
    return _memory(ctx).remember(args.text, dict(args.fields))


@tool(name=RECALL)
def recall(ctx: ToolContext, args: RecallArgs) -> dict[str, Any]:
    """Look up what earlier runs remembered about this subject, by words."""
    return _memory(ctx).recall(args.query)


@tool(name=FORGET, risk=ToolRisk.SIDE_EFFECT)
def forget(ctx: ToolContext, args: ForgetArgs) -> dict[str, Any]:
    """Forget one memory of this subject (by the id a recall gave)."""
    return _memory(ctx).forget(args.memory_id)


def memory_tools() -> tuple[Tool, ...]:
    return (remember, recall, forget)


class MemoryAccess(Protocol):
    """What the worker puts in a memory tool's context: the store, on the run's namespace
    (activities/memory.py)."""

    def remember(self, text: str, fields: dict[str, str]) -> dict[str, Any]: ...

    def recall(self, query: str) -> dict[str, Any]: ...

    def forget(self, memory_id: str) -> dict[str, Any]: ...


def _memory(ctx: ToolContext) -> MemoryAccess:
    if ctx.memory is None:
        raise RuntimeError("this call has no memory namespace (the run's agent declares none)")
    access: MemoryAccess = ctx.memory
    return access
