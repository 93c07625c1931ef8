"""A run id is RUN_ID_PATTERN's whole, wherever one comes in: hostile ids (a trailing
newline, spaces around it, empty, 201 characters, look-alike letters, NUL) are refused
by the pattern however Python's `re` applies it, and by every door that checks one. The
doors are taken from the code: each module that uses RUN_ID_PATTERN has one here, so a
new use without a door fails `test_every_use_of_the_pattern_has_a_door`."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agents.console import web
    from durable_agents.control import runs
    from durable_agents.testing import AgentTestbed, ScriptedModel, say
    from durable_agents.workflows import admission
    from durable_agents.workflows.calling import AgentRequestInvalid, run_agent
    from durable_agents.workflows.contract_base import RUN_ID_PATTERN
    from durable_agents.workflows.contracts import RunRequest
    from tests.calling.billing import GOOD, TriageDecision, triage

ROOT = Path(__file__).parents[2]
HOSTILE = [
    "run-1\n", "\nrun-1", "run\n1", "run-1\r", "run-1\t",
    " run-1", "run-1 ", " ", "", "a" * 201,
    "run-1\x00", "\x00",
    "r\u0443n-1",  # Cyrillic u
    "run\u20111",  # non-breaking hyphen
    "run-\uff11",  # fullwidth digit one
    "\u212aelvin",  # Kelvin sign, a K to case-folding
    ".run", "-run", "run@first", "../etc", "run/1", "run'1",
]  # fmt: skip
GOOD_IDS = ["r", "run-1", "A.b_c:d-9", "a" * 200]


@pytest.mark.parametrize("how", [re.match, re.search, re.fullmatch])
def test_the_pattern_alone_holds_however_re_applies_it(how):
    assert [i for i in HOSTILE if how(RUN_ID_PATTERN, i)] == []
    assert all(how(RUN_ID_PATTERN, i) for i in GOOD_IDS)


# -- every door: each takes the ids and says, for each, whether it was refused ----------
def refused_by(
    check: Callable[[str], object], refusal: type[Exception], ids: list[str]
) -> list[bool]:
    said = []
    for run_id in ids:
        try:
            check(run_id)
        except refusal:
            said.append(True)
        else:
            said.append(False)
    return said


@dataclass
class Info:
    """The field of workflow.Info the admission's first check reads."""

    workflow_id: str


async def agentctl(ids: list[str]) -> list[bool]:
    return refused_by(runs.check_run_id, runs.RunError, ids)


async def console(ids: list[str]) -> list[bool]:
    return refused_by(web.check_run_id, web.PageError, ids)


async def admitted(ids: list[str]) -> list[bool]:
    request = RunRequest(goal="g")
    return [
        admission.before_parsing(request, Info(i), trusts_the_clear=True) is not None  # type: ignore[arg-type]
        for i in ids
    ]


@workflow.defn
class CallsWithIds:
    """A team's workflow that calls the agent under each id it is given: for each,
    whether run_agent refused it by the id check's words (a good id's child runs)."""

    @workflow.run
    async def run(self, ids: list[str]) -> list[bool]:
        said = []
        for run_id in ids:
            try:
                await run_agent(triage, "Decide", output_type=TriageDecision, run_id=run_id)
            except AgentRequestInvalid as err:
                said.append(err.message.startswith("bad run id"))
            else:
                said.append(False)
        return said


async def called(ids: list[str]) -> list[bool]:
    model = ScriptedModel([say(GOOD) for _ in ids])
    async with AgentTestbed(triage, model=model, workflows=[CallsWithIds]) as bed:
        return await bed.temporal.execute_workflow(
            CallsWithIds.run, ids, id="caller", task_queue=bed.task_queue
        )


DOORS: dict[str, Callable[[list[str]], Awaitable[list[bool]]]] = {
    "control/runs.py": agentctl,  # agentctl's ids, and every start_run's
    "console/web.py": console,  # a page's run id
    "workflows/admission.py": admitted,  # a run's own workflow id, as it starts
    "workflows/calling.py": called,  # run_agent's child id
}


def uses_of_the_pattern() -> set[str]:
    """Each module of the package (durable_agents/ and the folders it links) that reads
    RUN_ID_PATTERN, by its path in the repository."""
    package = ROOT / "durable_agents"
    found = set()
    for folder, _, names in os.walk(package, followlinks=True):
        for name in names:
            path = Path(folder, name)
            if name.endswith(".py") and "RUN_ID_PATTERN" in (text := path.read_text()):
                read = any(
                    isinstance(node, ast.Name)
                    and node.id == "RUN_ID_PATTERN"
                    and isinstance(node.ctx, ast.Load)  # not its definition
                    for node in ast.walk(ast.parse(text))
                )
                if read:
                    found.add(str(path.relative_to(package)))
    return found


def test_every_use_of_the_pattern_has_a_door():
    assert uses_of_the_pattern() == set(DOORS)


# What a door takes for "no id given", never checked as one: run_agent's empty run_id
# is its default, the caller's id and a suffix (`run_id or _child_id(...)`).
NOT_GIVEN = {"workflows/calling.py": {""}}


@pytest.mark.parametrize("door", list(DOORS))
async def test_each_door_refuses_every_hostile_id(door):
    hostile = [i for i in HOSTILE if i not in NOT_GIVEN.get(door, set())]
    said = await DOORS[door](hostile + GOOD_IDS)
    assert dict(zip(hostile + GOOD_IDS, said, strict=True)) == {
        **dict.fromkeys(hostile, True),
        **dict.fromkeys(GOOD_IDS, False),
    }
