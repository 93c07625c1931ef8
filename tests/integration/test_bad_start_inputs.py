"""A start input the run cannot read, or that is out of range, fails the run at once in one
line naming the field; it never leaves the run "running" with its first workflow task
failing over and over (runtime/refused_payloads.py, RunRequest.UNREADABLE_FAILS_THE_RUN).

The table is RunRequest's own: every numeric field it reaches (budget, limits, policy and
whatever is added to them) x negative, NaN, infinite, past its bound, a string, a list;
and every top-level field x a value of the wrong type. Sent as raw JSON through a plain
Temporal client (NaN and 1e400 are JSON a client library would not write), and a few
through the `temporal` CLI as an operator would.
"""

from __future__ import annotations

import asyncio
import json
import types
import typing
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import annotated_types
from pydantic import BaseModel
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import RawValue

from durable_agents.workflows.contracts import RunRequest
from tests.conftest import run_id
from tests.temporal_cli import temporal

GOOD = {"goal": "pay", "label": "pay-invoice"}
NUMBERS = (int, float, Decimal)


@dataclass(frozen=True)
class Case:
    path: tuple[str, ...]
    what: str
    raw: str  # the value as JSON text

    @property
    def field(self) -> str:
        return ".".join(self.path)

    def start_input(self) -> str:
        """The good start with this one value put at `path`, as JSON text."""
        marker = "__BAD__"
        document: dict[str, Any] = json.loads(json.dumps(GOOD))
        here = document
        for name in self.path[:-1]:
            here = here.setdefault(name, {})
        here[self.path[-1]] = marker
        return json.dumps(document).replace(f'"{marker}"', self.raw)


def _unwrapped(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return inner[0] if len(inner) == 1 else annotation
    return annotation


def _defaults_only(model: type[BaseModel]) -> bool:
    return all(not field.is_required() for field in model.model_fields.values())


def numeric_fields(
    model: type[BaseModel], path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], Any]]:
    """Every numeric field reachable from `model` through models whose fields all have
    defaults (a run's budget, limits and policy), with its pydantic field info."""
    found = []
    for name, field in model.model_fields.items():
        kind = _unwrapped(field.annotation)
        if isinstance(kind, type) and issubclass(kind, BaseModel) and _defaults_only(kind):
            found += numeric_fields(kind, (*path, name))
        elif kind in NUMBERS:
            found.append(((*path, name), field))
    return found


def bad_values(field: Any) -> list[tuple[str, str]]:
    values = [
        ("NaN", "NaN"),
        ("infinite", "1e400"),
        ("minus infinite", "-1e400"),
        ("a string", '"NaN"'),
        ("a list", "[1]"),
    ]
    for bound in field.metadata:
        if isinstance(bound, annotated_types.Ge | annotated_types.Gt) and bound_of(bound) >= 0:
            values.append(("negative", "-1"))
        if isinstance(bound, annotated_types.Le | annotated_types.Lt):
            values.append(("past its bound", str(bound_of(bound) + 1)))
    return values


def bound_of(bound: Any) -> float:
    for name in ("ge", "gt", "le", "lt"):
        if hasattr(bound, name):
            return float(getattr(bound, name))
    raise AssertionError(bound)


def table() -> list[Case]:
    cases = [
        Case(path, what, raw)
        for path, field in numeric_fields(RunRequest)
        for what, raw in bad_values(field)
    ]
    for name in RunRequest.model_fields:
        if name in ("goal",):
            cases.append(Case((name,), "a list", "[1]"))
            continue
        wrong = "[1]" if _unwrapped(RunRequest.model_fields[name].annotation) is str else '"x"'
        cases.append(Case((name,), "the wrong type", wrong))
    return cases


def test_the_table_reaches_every_numeric_field_of_the_budget_limits_and_policy() -> None:
    fields = {".".join(path) for path, _ in numeric_fields(RunRequest)}
    assert {"budget.usd", "budget.tokens", "limits.max_turns_per_step"} <= fields
    assert {"policy.approve_payments_above", "policy.decision_timeout_seconds"} <= fields
    assert len(table()) > 60


async def start_raw(client: Client, queue: str, text: str, wid: str) -> None:
    payload = Payload(metadata={"encoding": b"json/plain"}, data=text.encode())
    await client.start_workflow("AgentWorkflow", RawValue(payload), id=wid, task_queue=queue)


async def failed_in_one_line(client: Client, wid: str) -> str:
    """The run's failure message: the run must close FAILED within 10 s."""
    handle = client.get_workflow_handle(wid)
    try:
        await asyncio.wait_for(handle.result(), timeout=10)
    except WorkflowFailureError as err:
        cause = err.cause
        said = getattr(cause, "message", None) or str(cause)
        assert (await handle.describe()).status == WorkflowExecutionStatus.FAILED
        return str(said)
    except TimeoutError:
        status = (await handle.describe()).status
        return f"still {status.name if status else status} after 10 s"
    return "completed"


async def test_every_bad_value_fails_its_run_in_one_line_naming_the_field(
    dev_env, settings, worker
) -> None:
    client, cases = dev_env.client, table()
    ids = [run_id("bad") for _ in cases]
    await asyncio.gather(
        *(
            start_raw(client, settings.task_queue, c.start_input(), i)
            for c, i in zip(cases, ids, strict=True)
        )
    )
    said = await asyncio.gather(*(failed_in_one_line(client, i) for i in ids))
    wrong = [
        f"{case.field} = {case.raw} ({case.what}): {message}"
        for case, message in zip(cases, said, strict=True)
        if not (
            message.startswith("refused: the start input cannot be read:")
            and case.field in message
            and "\n" not in message
        )
    ]
    assert not wrong, "\n".join(wrong)


async def test_the_temporal_cli_start_with_a_bad_budget_fails_the_run(
    dev_env, settings, worker
) -> None:
    for budget in ('{"usd": -1}', '{"usd": "NaN"}', '{"tokens": 1e400}', "[1]"):
        wid = run_id("cli-bad")
        started = await temporal(
            dev_env.client, "workflow", "start", "--type", "AgentWorkflow",
            "--task-queue", settings.task_queue, "--workflow-id", wid,
            "--input", f'{{"goal": "pay", "budget": {budget}}}',
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        said = await failed_in_one_line(dev_env.client, wid)
        assert said.startswith("refused: the start input cannot be read: budget"), said


async def test_a_bad_run_id_fails_its_run_in_one_line(dev_env, settings, worker) -> None:
    for wid in (f"bad id {run_id('x')}", "b" * 201, f"{run_id('nl')}\n"):
        await start_raw(dev_env.client, settings.task_queue, json.dumps(GOOD), wid)
        said = await failed_in_one_line(dev_env.client, wid)
        assert said.startswith("refused: run id") and "\n" not in said, said
