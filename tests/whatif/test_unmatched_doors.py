"""Every `--unmatched` mode, taken from the code's own list (workflows/whatif.Unmatched),
through `agentctl whatif`: a recorded pay-invoice run whose payment alice approved is
played against a model that pays twice, so the shadow asks for an approval the
recording does not have. Each mode does what it says (approve: the second payment is
simulated; reject: it is refused and never made, not even simulated; stop: the shadow
ends there), the payment provider's journal never moves, and the modes documented in
docs/cli.md are the code's. A mode added to the list without a behaviour here fails."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import pytest

from durable_agents.control import runs
from durable_agents.infra.stack import settings_env
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.whatif import POLICY_ACTOR, Unmatched
from tests.conftest import approve_when_asked, run_id
from tests.starters.test_verb_walk import agentctl
from tests.whatif.test_whatif_invoice import journal

MODES: tuple[str, ...] = get_args(Unmatched)
CLI_DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
PAYMENT = {"invoice_id": "INV-1001", "amount": "1250.00", "currency": "EUR"}


@dataclass(frozen=True)
class Expected:
    """What the shadow does with the approval its recording lacks."""

    status: str
    # The unmatched approval as the shadow's report lists it (None: never decided).
    policy_decision: str | None
    # pay_invoice as the shadow made it: the recorded payment, then any other.
    payments: list[str]
    final_answer: str | None = None
    error: str | None = None


EXPECTED: dict[str, Expected] = {
    "approve": Expected(
        status="completed",
        policy_decision="approved",
        payments=["recorded", "simulated"],
        final_answer="is paid",
    ),
    "reject": Expected(
        status="completed",
        policy_decision="rejected",
        payments=["recorded"],
        final_answer="was not paid: the approver rejected the payment",
    ),
    "stop": Expected(
        status="failed",
        policy_decision=None,
        payments=["recorded"],  # answered from the record before the second stops it
        error="what-if stopped: pay_invoice asked for an approval the recorded run never asked for",
    ),
}


def test_the_documented_modes_are_the_codes():
    """docs/cli.md lists `--unmatched a|b|c`: the same modes as the code, no more."""
    [listed] = re.findall(r"--unmatched ([a-z\\|]+)\]", CLI_DOC.read_text())
    assert set(listed.split("\\|")) == set(MODES)


@pytest.mark.usefixtures("worker")
@pytest.mark.parametrize("mode", MODES)
async def test_each_unmatched_mode_on_a_call_the_recording_lacks(dev_env, settings, mode):
    expected = EXPECTED[mode]  # a mode with no behaviour written here fails here
    client = dev_env.client
    rid = run_id("paid")
    request = RunRequest(goal="Pay invoice INV-1001", agent="invoice", label="pay-invoice")
    await runs.start_run(client, settings, request, rid)
    await approve_when_asked(client, rid)
    assert (await runs.wait_result(client, rid)).status == "completed"
    before = journal(settings)
    assert sum(e["operation"] == "charge" for e in before) == 1

    played = await agentctl(
        settings_env(settings),
        "whatif",
        rid,
        "--model",
        "scripted/pay-invoice-twice",
        "--unmatched",
        mode,
        "--json",
    )
    assert played.exit_code == 0, played.stdout + played.stderr
    report: dict[str, Any] = json.loads(played.stdout)
    assert report["unmatched"] == mode
    [run] = report["runs"]
    now = run["now"]

    assert now["status"] == expected.status, now
    asked = [a for a in now["approvals"] if a["tool"] == "pay_invoice"]
    by_people = [a for a in asked if a["by"] != POLICY_ACTOR]
    by_policy = [a["status"] for a in asked if a["by"] == POLICY_ACTOR]
    if expected.policy_decision is None:
        assert by_policy == []
    else:
        assert by_policy == [expected.policy_decision]
        assert [a["status"] for a in by_people] == ["approved"]  # alice's, as recorded
    paid = [e for e in now["effects"] if e["tool"] == "pay_invoice"]
    assert [e["source"] for e in paid] == expected.payments
    assert all(e["arguments"] == PAYMENT for e in paid)
    if expected.final_answer is not None:
        assert expected.final_answer in (now["final_answer"] or "")
    if expected.error is not None:
        assert expected.error in (now["error"] or "")
    # Whatever the mode, nothing was paid or sent: the provider's own journal is as it was.
    assert journal(settings) == before
