"""An agent's own approval rules: a pure function in workflow code, or an evaluator run as
an activity; deny goes back to the model, ask is an approval with the rule's reason,
and the verdict is recorded, so a replay never asks again."""

from __future__ import annotations

from decimal import Decimal

from durable_agents import Agent, CallToReview, ToolRisk, Verdict, evaluator, tool
from durable_agents.control.timeline import replay_files
from durable_agents.testing import AgentTestbed, ScriptedModel, call, say
from durable_agents.workflows import timeline

CALLS: list[str] = []


@tool(risk=ToolRisk.SIDE_EFFECT, amount_field="amount")
def transfer(account: str, amount: Decimal) -> dict[str, str]:
    """Transfer money to an account."""
    CALLS.append(account)
    return {"sent": str(amount), "to": account}


def no_offshore(review: CallToReview) -> Verdict | None:
    if review.arguments.get("account", "").startswith("KY"):
        return Verdict.deny("offshore accounts are not allowed")
    return None


JUDGED: list[str] = []


@evaluator
async def compliance(review: CallToReview) -> Verdict:
    """Stands for a policy service: new accounts need a person."""
    JUDGED.append(review.arguments["account"])
    if review.arguments["account"].startswith("NEW"):
        return Verdict.ask("a new payee: compliance wants a person to look")
    return Verdict.approve("known payee")


treasurer = Agent(
    name="treasurer",
    instructions="Move money as told.",
    tools=[transfer],
    planning=False,
    rules=[no_offshore, compliance],
)


async def test_a_deny_goes_back_to_the_model_and_nothing_runs(time_env):
    model = ScriptedModel([call("transfer", account="KY-1", amount="10"), say("Refused.")])
    async with AgentTestbed(treasurer, model=model, env=time_env) as bed:
        run = await bed.start("treasurer", "Pay KY-1")
        result = await run.result()
        state = await run.state()
    assert result.status == "completed" and "KY-1" not in CALLS
    told = model.requests[1].messages[-1]["content"]
    assert told == (
        "denied by rule no_offshore: offshore accounts are not allowed "
        "(the transfer call was not executed)"
    )
    assert "KY-1" not in JUDGED  # the first deny decides; later rules are not asked
    verdicts = [e.detail for e in state.audit if e.action == "verdict"]
    assert verdicts == ["transfer: deny: offshore accounts are not allowed"]


async def test_an_evaluators_ask_is_a_persons_approval_and_replay_does_not_ask_again(
    time_env, tmp_path, monkeypatch
):
    JUDGED.clear()
    model = ScriptedModel([call("transfer", account="NEW-7", amount="10"), say("Sent.")])
    async with AgentTestbed(treasurer, model=model, env=time_env) as bed:
        run = await bed.start("treasurer", "Pay NEW-7")
        request = await run.next_approval()
        assert request.rule == "rule compliance: a new payee: compliance wants a person to look"
        await run.approve(request.request_id, by="alice")
        result = await run.result()
        history = await bed.client.temporal.get_workflow_handle(run.run_id).fetch_history()
    assert result.status == "completed" and CALLS.count("NEW-7") == 1
    assert JUDGED == ["NEW-7"]
    # Replayed as `agentctl replay` does: with the agents of AGENT_MODULES.
    monkeypatch.setenv("AGENT_MODULES", __name__)
    path = tmp_path / "treasurer.json"
    path.write_text(history.to_json())
    with timeline.recording(run.run_id):
        [outcome] = await replay_files([path])
    assert outcome.ok, outcome.message
    assert JUDGED == ["NEW-7"]  # the verdict came from the history, not a new evaluation


async def test_an_approve_verdict_does_not_lift_a_declared_risk(time_env):
    @tool(risk=ToolRisk.NEEDS_APPROVAL)
    def wire(account: str) -> str:
        """Wire money."""
        return f"wired to {account}"

    agent = Agent(
        name="wirer",
        instructions="Wire.",
        tools=[wire],
        planning=False,
        rules=[lambda review: Verdict.approve("fine by me")],
    )
    model = ScriptedModel([call("wire", account="A"), say("Wired.")])
    async with AgentTestbed(agent, model=model, env=time_env) as bed:
        run = await bed.start("wirer", "Wire A")
        request = await run.next_approval()
        assert request.rule == "wire is declared as needing approval"
        await run.approve(request.request_id, by="bob")
        assert (await run.result()).status == "completed"


async def test_an_evaluator_that_fails_for_good_hands_the_call_to_a_person(time_env):
    """The policy service is down: no verdict, and the call is not let through either."""
    from temporalio.exceptions import ApplicationError

    @evaluator
    async def policy_service(review: CallToReview) -> Verdict:
        """Stands for a service that answers with an error."""
        raise ApplicationError("policy service down", non_retryable=True)

    agent = Agent(
        name="unreviewed", instructions="Move money.", tools=[transfer], planning=False,
        rules=[policy_service],
    )  # fmt: skip
    model = ScriptedModel([call("transfer", account="DE-1", amount="5"), say("Not sent.")])
    async with AgentTestbed(agent, model=model, env=time_env) as bed:
        run = await bed.start("unreviewed", "Pay DE-1")
        request = await run.next_approval()
        await run.reject(request.request_id, by="alice", comment="wait for the service")
        result = await run.result()
    assert request.rule == (
        "rule policy_service: the evaluator failed (policy service down); a person decides"
    )
    assert result.status == "completed" and "DE-1" not in CALLS
