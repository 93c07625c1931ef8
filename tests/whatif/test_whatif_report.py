"""The report's arithmetic: effects paired by the same call, then by the same tool (its
arguments changed), the rest added or removed; the lines that differ; what graders say."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable_agents.control import whatif
from durable_agents.control.runs import RunError
from durable_agents.control.whatif_report import (
    Approval,
    Effect,
    RunComparison,
    Side,
    differences,
    effect_changes,
    grade,
)
from durable_agents.runtime.settings import Settings


def pay(amount: str, invoice: str = "INV-1") -> Effect:
    return Effect(tool="pay", arguments={"invoice": invoice, "amount": amount})


def test_effects_pair_by_call_then_by_tool() -> None:
    then = [pay("10"), pay("20", "INV-2"), Effect(tool="email", arguments={"to": "a"})]
    now = [pay("20", "INV-2"), pay("15"), Effect(tool="sms", arguments={"to": "a"}), pay("15")]
    changes = effect_changes(then, now)
    inv1 = {"invoice": "INV-1"}
    assert [(c.change, c.tool, c.then, c.now) for c in changes] == [
        ("changed", "pay", inv1 | {"amount": "10"}, inv1 | {"amount": "15"}),
        ("removed", "email", {"to": "a"}, None),
        ("added", "sms", None, {"to": "a"}),
        ("added", "pay", None, inv1 | {"amount": "15"}),
    ]
    assert changes[0].line() == "effect changed: pay: amount '10' -> '15'"
    assert effect_changes(then, list(reversed(then))) == []


def test_differences_name_what_changed_but_not_the_cost() -> None:
    asked = Approval(tool="pay", arguments={"amount": "10"}, status="approved", by="alice")
    then = Side(run_id="r", status="completed", final_answer="paid", approvals=[asked], tokens=90)
    same = then.model_copy(update={"run_id": "s", "tokens": 0, "cost_usd": 0.0})
    assert differences(then, same, []) == []
    now = then.model_copy(update={"final_answer": "not paid", "approvals": []})
    assert differences(then, now, []) == [
        "final answer: 'paid' -> 'not paid'",
        "approval no longer asked: pay amount='10'",
    ]


async def test_graders_pass_fail_and_say_why() -> None:
    side = Side(run_id="r", status="completed")
    run = RunComparison(run_id="r", shadow_id="s", agent="a", then=side, now=side)

    def passes(_: RunComparison) -> None:
        return None

    def says_no(_: RunComparison) -> str:
        return "pays twice"

    def asserts(_: RunComparison) -> None:
        assert 1 > 2, "one is not more than two"

    def breaks(_: RunComparison) -> bool:
        raise KeyError("amount")

    async def agrees(_: RunComparison) -> bool:
        return True

    grades = await grade(run, [passes, says_no, asserts, breaks, agrees])
    assert [(g.grader, g.passed, g.reason) for g in grades] == [
        ("passes", True, ""),
        ("says_no", False, "pays twice"),
        ("asserts", False, "one is not more than two"),
        ("breaks", False, "the grader raised KeyError: 'amount'"),
        ("agrees", True, ""),
    ]


def test_kept_reports_on_a_store_that_is_not_ours_are_one_line(tmp_path: Path) -> None:
    """A file where the SQLite store should be that is no database: every way of reading
    or keeping reports says so in one line, and the file is left as it was."""
    settings = Settings(data_dir=tmp_path)
    settings.database_path.parent.mkdir(parents=True, exist_ok=True)
    settings.database_path.write_bytes(b"not a database, " * 64)
    before = settings.database_path.read_bytes()
    for read in (
        lambda: whatif.kept_reports(settings),
        lambda: whatif.kept_report(settings, "wi-1"),
    ):
        with pytest.raises(RunError, match=r"^cannot read our stores \(SQLite\): "):
            read()
    assert settings.database_path.read_bytes() == before
