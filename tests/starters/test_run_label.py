"""One name for the run's label: `--label` in `agentctl run` as in the API and `schedule
create`, `--scenario` kept as its older name. For the offline model the label names the
scenario it plays, checked before anything starts; for a real endpoint it is free."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from durable_agents.infra.offline_model.scenarios import ScenarioError
from durable_agents.starters.cli import app
from durable_agents.starters.cli_runs import run_label


def test_an_offline_label_is_a_scenario_checked_before_anything_starts():
    assert run_label("pay-invoice", None, None, []) == "pay-invoice"
    spec = run_label("long", 3, 64, ["step1:500"])
    assert spec == "long?steps=3&reply_bytes=64&fault=step1.0:500*1"
    with pytest.raises(ScenarioError):
        run_label("customer-42", None, None, [])
    with pytest.raises(ScenarioError, match="need --label"):
        run_label(None, 3, None, [])


def test_a_label_for_a_real_endpoint_is_the_runs_own():
    assert run_label("customer-42", None, None, [], offline=False) == "customer-42"
    for blank in ("", "  "):
        with pytest.raises(ScenarioError, match="--label is empty"):
            run_label(blank, None, None, [], offline=False)
    with pytest.raises(ScenarioError):  # a fault is the offline model's: still checked
        run_label("customer-42", None, None, ["step1:500"], offline=False)


@pytest.mark.parametrize("flag", ["--label", "--scenario"])
def test_both_names_reach_the_same_check(flag):
    """Refused in one line before any connection is made, whichever name is used."""
    result = CliRunner().invoke(app, ["run", "pay", flag, "no-such-scenario"])
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert line.startswith("error:") and "no-such-scenario" in line
