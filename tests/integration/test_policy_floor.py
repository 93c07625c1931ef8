"""The agent's policy is a floor (workflows/policy.py): a start may tighten it, never
loosen it. Refused in one line by agentctl before anything connects, and by the run itself
before any activity when the request comes through the plain `temporal` CLI."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from durable_agents.control import runs
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.contracts import RunPolicy, RunRequest, TrustedKey
from durable_agents.workflows.policy import loosening, policy_floor
from durable_agents.workflows.signing import new_key
from tests.conftest import count_effects, eventually, run_id
from tests.starters.test_cli_agents import agentctl, one_error
from tests.temporal_cli import temporal

_, TRUSTED = new_key()
_, STRANGER = new_key()
FLOOR = policy_floor(
    RunPolicy(
        approve_all_side_effects=True,
        approve_payments_above=Decimal("50"),
        approve_everything_after_spend_usd=1.0,
        on_timeout="escalate",
        escalate_to=["cfo", "ceo"],
        require_signed_decisions=True,
        trusted_keys={"desk": TrustedKey(public_key=TRUSTED, signs_for=["alice", "bob"])},
    ),
    {"issue_refund": ["support-lead", "cfo"]},
)
KEYS = {"trusted_keys": {"desk": {"public_key": TRUSTED, "signs_for": ["alice"]}}}
TIGHT: dict[str, Any] = {
    "approve_all_side_effects": True,
    "approve_payments_above": "10",
    "approve_everything_after_spend_usd": 0.5,
    "require_signed_decisions": True,
    **KEYS,
}


def asked(**changes: Any) -> RunPolicy:
    return RunPolicy.model_validate(TIGHT | changes)


def test_a_policy_that_only_tightens_the_floor_is_taken() -> None:
    assert loosening(asked(), FLOOR) is None
    assert loosening(asked(approvers={"issue_refund": ["cfo"], "other": ["x"]}), FLOOR) is None
    assert loosening(asked(on_timeout="escalate", escalate_to=["cfo"]), FLOOR) is None
    assert loosening(FLOOR, FLOOR) is None
    # An agent that declares nothing takes any policy: each rule only adds a person.
    assert loosening(asked(), policy_floor(None, {})) is None


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"approve_all_side_effects": False}, "approve_all_side_effects must stay on"),
        ({"approve_payments_above": None}, "approve_payments_above must be 50 or less"),
        ({"approve_payments_above": "50.01"}, "approve_payments_above must be 50 or less"),
        ({"approve_everything_after_spend_usd": 2.0}, "approve_everything_after_spend_usd"),
        ({"approvers": {"issue_refund": ["mallory"]}}, "approvers of issue_refund must be among"),
        (
            {"approvers": {"issue_refund": ["cfo", "mallory"]}},
            "approvers of issue_refund must be among ['cfo', 'support-lead']",
        ),
        ({"on_timeout": "escalate", "escalate_to": []}, "escalate_to must be among"),
        ({"on_timeout": "escalate", "escalate_to": ["mallory"]}, "escalate_to must be among"),
        ({"require_signed_decisions": False, "trusted_keys": {}}, "must stay on"),
        (
            {"trusted_keys": {"desk": {"public_key": STRANGER}}},
            "trusted key 'desk' is not one the agent trusts",
        ),
        (
            {"trusted_keys": {"mine": {"public_key": TRUSTED}}},
            "trusted key 'mine' is not one the agent trusts",
        ),
        (
            {"trusted_keys": {"desk": {"public_key": TRUSTED, "signs_for": []}}},
            "trusted key 'desk' may sign only for ['alice', 'bob']",
        ),
    ],
)
def test_a_policy_that_loosens_the_floor_is_refused(changes: dict[str, Any], says: str) -> None:
    error = loosening(asked(**changes), FLOOR)
    assert error is not None and says in error and "\n" not in error


def test_an_escalation_goes_only_to_people_the_agent_lets_decide() -> None:
    floor = policy_floor(RunPolicy(), {"issue_refund": ["lead", "cfo"]})
    to_boss = RunPolicy(on_timeout="escalate", escalate_to=["boss"])
    to_anyone = RunPolicy(on_timeout="escalate")
    says = "escalate_to must be among the approvers of issue_refund: ['cfo', 'lead']"
    assert says in (loosening(to_boss, floor) or "")
    assert says in (loosening(to_anyone, floor) or "")
    assert loosening(RunPolicy(on_timeout="escalate", escalate_to=["cfo"]), floor) is None
    # Where anyone may decide, an escalation to a few only narrows who does.
    assert loosening(to_boss, policy_floor(None, {})) is None


def test_a_what_if_needs_no_keys() -> None:
    unsigned = FLOOR.model_copy(update={"require_signed_decisions": False, "trusted_keys": {}})
    assert loosening(unsigned, FLOOR, decided_by_record=True) is None
    assert loosening(unsigned, FLOOR) is not None


def test_agentctl_refuses_a_lax_policy_before_it_connects(tmp_path: Path) -> None:
    lax = tmp_path / "lax.json"
    lax.write_text("{}")
    one_error(
        agentctl("run", "Refund jane 80 EUR", "--agent", "refund", "--policy", str(lax)),
        "agent refund: the requested policy loosens the agent's: approve_payments_above "
        "must be 50 or less",
    )
    tighter = tmp_path / "tighter.json"
    tighter.write_text(json.dumps({"approve_payments_above": "20"}))
    # Past the policy check, the one error left is that no Temporal listens.
    result = agentctl("run", "Refund jane 80 EUR", "--agent", "refund", "--policy", str(tighter))
    assert "loosens" not in result.stderr and result.exit_code == 1


async def test_a_lax_policy_through_the_temporal_cli_is_refused_before_any_activity(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    lax = run_id("lax-refund")
    request = RunRequest(goal="Refund jane 80 EUR", agent="refund", label="refund-loop")
    started = await temporal(
        dev_env.client, "workflow", "start", "--type", "AgentWorkflow",
        "--task-queue", settings.task_queue, "--workflow-id", lax,
        "--input", request.model_dump_json()[:-1] + ', "policy": {}}',
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    with pytest.raises(WorkflowFailureError) as failed:
        await dev_env.client.get_workflow_handle(lax).result()
    assert "refused: the requested policy loosens the agent's" in str(failed.value.cause)
    history = await dev_env.client.get_workflow_handle(lax).fetch_history()
    scheduled = [
        e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert scheduled == [] and count_effects(settings, lax, "refund") == 0
    # The same refund under a tighter policy waits for a person, as the agent's own does.
    tight = run_id("tight-refund")
    await runs.start_run(
        dev_env.client,
        settings,
        request.model_copy(update={"policy": RunPolicy(approve_payments_above=Decimal("20"))}),
        tight,
    )

    async def waits() -> bool:
        summary = await runs.get_summary(dev_env.client, tight)
        return bool(summary.pending_approvals)

    await eventually(waits)
    assert count_effects(settings, tight, "refund") == 0
