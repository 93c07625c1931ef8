"""Sub-agents as child workflows, on the time-skipping server with a scripted model."""

from __future__ import annotations

from dataclasses import replace

from durable_agents import Agent, RunBudget, RunLimits, RunPolicy, delegate
from durable_agents.control import timeline
from durable_agents.testing import AgentTestbed, ScriptedModel, call, plan, say
from durable_agents.workflows.contracts import ChildSpend, Spend
from durable_agents.workflows.registry import serve_for_replay
from tests.conftest import eventually
from tests.delegation.agents import model_with_a_report, research, triage


def model_for_triage() -> ScriptedModel:
    return ScriptedModel(
        [call("ask_research", task="What is the answer?"), say("Triaged: the answer is 42.")],
        agents={"research": [call("look_up", topic="answer"), say("The answer is 42.")]},
    )


async def test_a_delegate_runs_as_a_child_and_its_answer_goes_to_the_model(time_env):
    model = model_for_triage()
    async with AgentTestbed(triage, model=model, env=time_env) as bed:
        run = await bed.start("triage", "Ticket 7: what is the answer?")
        result = await run.result()
        state = await run.state()
        [delegation] = state.delegations
        child = bed.client.run(delegation.child_id)
        child_state = await child.state()
    assert result.status == "completed", result
    assert delegation.status == "completed" and delegation.answer == "The answer is 42."
    assert delegation.child_id.startswith(f"{run.run_id}.1.call_0_0.")
    assert child_state.delegated_by is not None
    assert child_state.delegated_by.run_id == run.run_id
    assert child_state.goal == "What is the answer?"
    # the model of the parent read the child's answer as the tool's result
    assert model.requests[-1].messages[-1]["content"] == "The answer is 42."


async def child_of(run, within: float = 30.0) -> str:
    async def started() -> str | None:
        state = await run.state()
        return state.delegations[0].child_id if state.delegations else None

    return str(await eventually(started, within=within))


async def test_a_childs_approval_waits_in_the_child_linked_to_its_parent(time_env):
    policy = RunPolicy(approve_all_side_effects=True)  # the child inherits its parent's policy
    async with AgentTestbed(triage, model=model_with_a_report(), env=time_env) as bed:
        run = await bed.start("triage", "Ticket 8", policy=policy)
        child = bed.client.run(await child_of(run))
        request = await child.next_approval()
        child_summary = await child.summary()
        parent_summary = await run.summary()
        await child.approve(request.request_id, by="alice")
        result = await run.result()
        reports = (bed.data_dir / "reports.log").read_text().splitlines()
    assert request.tool == "file_report"
    assert child_summary.delegated_by is not None
    assert child_summary.delegated_by.run_id == run.run_id
    assert "waiting for sub-agent research" in parent_summary.progress
    assert parent_summary.pending_approvals == []  # the child's request is the child's
    assert result.status == "completed"
    assert len(reports) == 1


async def test_pause_resume_and_cancel_of_the_parent_reach_the_child(time_env):
    policy = RunPolicy(approve_all_side_effects=True)
    async with AgentTestbed(triage, model=model_with_a_report(), env=time_env) as bed:
        run = await bed.start("triage", "Ticket 9", policy=policy)
        child = bed.client.run(await child_of(run))
        await child.next_approval()
        await run.pause(by="ops")
        await eventually(lambda: _paused(child), within=30)
        await run.resume(by="ops")
        await eventually(lambda: _paused(child, False), within=30)
        await run.cancel(by="ops", reason="wrong ticket")
        result = await run.result()
        child_result = await child.result()
        assert not (bed.data_dir / "reports.log").exists()
    assert result.status == "cancelled"
    assert child_result.status == "cancelled"


async def _paused(handle, wanted: bool = True) -> bool | None:
    state = await handle.state()
    return True if state.pause_requested is wanted else None


async def test_a_fork_before_the_delegation_starts_its_own_child_one_after_reuses_it(
    time_env,
):
    model = model_for_triage()
    async with AgentTestbed(triage, model=model, env=time_env) as bed:
        serve_for_replay(bed.registry)
        run = await bed.start("triage", "Ticket 10")
        await run.result()
        [first] = (await run.state()).delegations
        found = await timeline.rebuild(bed.client.temporal, run.run_id)
        before = next(m for m in found.moments if m.kind == "model")
        after = next(m for m in found.moments if m.kind == "delegate answered")
        early = await timeline.fork(bed.client.temporal, bed.settings, run.run_id, before.index)
        late = await timeline.fork(bed.client.temporal, bed.settings, run.run_id, after.index)
        early_result = await bed.client.run(early.run_id).result()
        late_result = await bed.client.run(late.run_id).result()
        [early_child] = (await bed.client.run(early.run_id).state()).delegations
        [late_child] = (await bed.client.run(late.run_id).state()).delegations
    assert early_result.status == late_result.status == "completed"
    assert early_child.child_id.startswith(early.run_id) and not early_child.inherited
    assert late_child.child_id == first.child_id and late_child.inherited
    # the research agent ran twice in all: for the run and for the early fork, not the late
    research_runs = {r.partition("@")[0] for r in model._next if ".1.call_0_0." in r}
    assert research_runs == {first.child_id, early_child.child_id}


async def test_continue_as_new_between_delegating_steps_starts_no_child_twice(time_env):
    planning = Agent(
        name="planner",
        instructions="Plan, then hand each step's research to the research agent.",
        delegates=[research],
    )
    model = ScriptedModel(
        [
            plan("First", "Second", "Third"),
            *(
                turn
                for topic in ("a", "b", "c")
                for turn in (call("ask_research", task=f"Research {topic}"), say(f"{topic} done"))
            ),
            say("All three researched."),
        ],
        agents={"research": [say("Researched.")]},
    )
    limits = RunLimits(continue_as_new_after_events=50)
    async with AgentTestbed(planning, model=model, env=time_env) as bed:
        run = await bed.start("planner", "Research a, b and c", limits=limits)
        result = await run.result()
        state = await run.state()
        children = [d.child_id for d in state.delegations]
    # each execution of a child asks the model under its own identity (id@first run id)
    executions = sorted(r.partition("@")[0] for r in model._next if r.startswith(run.run_id + "."))
    assert result.status == "completed" and state.chain > 1  # it did continue as new
    assert len(set(children)) == 3 and executions == sorted(children)
    assert [d.step for d in state.delegations] == [1, 2, 3]


async def test_a_forged_or_stale_spend_report_changes_nothing(time_env):
    async with AgentTestbed(triage, model=model_with_a_report(), env=time_env) as bed:
        policy = RunPolicy(approve_all_side_effects=True)
        run = await bed.start("triage", "Ticket 12", policy=policy)
        child = await run.next_sub_agent()
        await child.next_approval()
        before = (await run.state()).delegations[0].spent
        handle = bed.client.temporal.get_workflow_handle(run.run_id)
        lower = ChildSpend(child_id=child.run_id, spent=Spend(usd=0, tokens=0, tool_calls=0))
        unknown = ChildSpend(child_id="someone-else", spent=Spend(tokens=10**9))
        # Higher, and naming the running child, but without the token the child was given.
        higher = ChildSpend(child_id=child.run_id, spent=Spend(usd=99, tokens=10**9, tool_calls=99))
        guessed = higher.model_copy(update={"token": "a-guess"})
        for report in (lower, unknown, higher, guessed):
            await handle.signal("child_spent", report)
        await run.pause(by="probe")  # applied after both: they were seen by then
        await eventually(lambda: _paused(run))
        state = await run.state()
        own = (await child.summary()).spent
        await run.cancel(by="probe")
        # nothing is left open on the shared server: later tests skip its time
        assert (await run.result()).status == (await child.result()).status == "cancelled"
    assert before.tokens > 0
    assert state.delegations[0].spent == own  # the child's own spend, not a report's


def test_a_reused_parent_id_names_other_children():
    """The id's last part comes from the parent's identity: a new run under a reused id
    (another first execution) must not find the old run's child and its answer."""
    from durable_agents.workflows.delegation import child_run_id

    first = child_run_id("triage-7", "triage-7@run-a", 1, "call_abc")
    again = child_run_id("triage-7", "triage-7@run-a", 1, "call_abc")
    reused = child_run_id("triage-7", "triage-7@run-b", 1, "call_abc")
    assert first == again  # a retried task, a crash, a reset: the same child
    assert reused != first and reused.rsplit(".", 1)[0] == first.rsplit(".", 1)[0]
    assert child_run_id("triage-7", "triage-7@run-a", 2, "call_abc") != first


async def test_a_sub_agent_runs_under_the_tighter_of_its_parents_budget_and_its_own(time_env):
    """A budget is a floor for sub-agents too (workflows/floors.py): the child takes the
    parent's remaining budget where it is tighter and its own agent's where that is."""
    frugal = replace(research, budget=RunBudget(usd=0.25, tool_calls=3))
    boss = replace(triage, delegates=[delegate(frugal)])
    async with AgentTestbed(boss, model=model_for_triage(), env=time_env) as bed:
        run = await bed.start("triage", "Ticket 9", budget=RunBudget(usd=2.0, tokens=10_000))
        await run.result()
        [delegation] = (await run.state()).delegations
        child_budget = (await bed.client.run(delegation.child_id).state()).budget
    assert child_budget is not None
    assert child_budget.usd == 0.25 and child_budget.tool_calls == 3  # its own agent's
    assert child_budget.tokens is not None and child_budget.tokens <= 10_000  # the parent's
