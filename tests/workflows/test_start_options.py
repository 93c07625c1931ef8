"""One set of start options: the same fields everywhere, each one reaching the request,
and the one check every client-side start goes through."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import pytest

from durable_agents import Agent, Memory, RunBudget, RunPolicy, StartOptions
from durable_agents.control.agents import checked_request, start_options
from durable_agents.control.runs import RunError
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.registry import AgentRegistry, load_registry
from durable_agents.workflows.start_options import StartFields
from durable_agents.workflows.state import RunState

NOW = datetime(2026, 1, 1, tzinfo=UTC)

keeper = Agent(name="keeper", instructions="Keep.", memory=Memory("customer/{customer}"))
REGISTRY = AgentRegistry().add(keeper)


def test_the_keyword_form_and_the_model_have_the_same_fields():
    assert set(StartFields.__annotations__) == set(StartOptions.model_fields)


def test_every_option_is_kept_by_the_run_and_carried_when_it_continues_as_new():
    # Story.continue_as_new starts the next run with StartOptions.fields_of(state).
    assert set(StartOptions.model_fields) <= set(RunState.model_fields)
    state = RunState.start("r1", RunRequest(goal="g", label="l", subject={"c": "j"}), NOW)
    assert StartOptions.fields_of(state) == {
        "label": "l", "policy": state.policy, "limits": state.limits, "budget": None,
        "subject": {"c": "j"},
    }  # fmt: skip


def test_every_option_reaches_the_request():
    options = StartOptions(
        label="pay-invoice",
        policy=RunPolicy(approve_all_side_effects=True),
        budget=RunBudget(usd=2),
        subject={"customer": "jane"},
    )
    request = checked_request(REGISTRY, keeper, "Remember", options)
    assert request.agent == "keeper" and request.goal == "Remember"
    assert request.label == "pay-invoice" and request.subject == {"customer": "jane"}
    assert request.policy == options.policy and request.budget == options.budget
    assert checked_request(REGISTRY, "keeper", "x", options, conversation=True).conversation


def test_a_start_that_cannot_run_is_refused_in_one_line():
    with pytest.raises(RunError, match=r"agent keeper: .*customer"):
        checked_request(REGISTRY, "keeper", "x", StartOptions())  # its memory needs a subject
    with pytest.raises(RunError, match="no agent named 'nobody'"):
        checked_request(REGISTRY, "nobody", "x", StartOptions(subject={"customer": "j"}))
    with pytest.raises(RunError, match=r"invalid start option subject"):
        start_options(subject={"Customer": "jane"})
    with pytest.raises(RunError, match=r"invalid start option limits"):
        start_options(limits="lots")
    typed = Agent(name="typed", instructions="Decide.", output_type=StartOptions)
    with pytest.raises(RunError, match="answers once, as a StartOptions: it holds no conv"):
        checked_request(AgentRegistry().add(typed), "typed", "x", StartOptions(), conversation=True)
    with pytest.raises(RunError, match="printable ASCII"):
        checked_request(REGISTRY, "keeper", "x", StartOptions(label="é", subject={"customer": "j"}))


def test_agent_modules_are_found_in_the_current_folder_or_the_one_named(tmp_path, monkeypatch):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "team_agents_x1.py").write_text(
        "from durable_agents import Agent\nhelper = Agent(name='helper', instructions='Help.')\n"
    )
    monkeypatch.setattr("sys.path", list(sys.path))
    assert list(load_registry(["team_agents_x1"], folder).agents) == ["helper"]
    monkeypatch.chdir(folder)
    monkeypatch.delitem(sys.modules, "team_agents_x1")
    monkeypatch.setattr("sys.path", [p for p in sys.path if p != str(folder)])
    assert list(load_registry(["team_agents_x1"]).agents) == ["helper"]
