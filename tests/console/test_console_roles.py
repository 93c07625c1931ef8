"""The console's roles: a viewer reads; an approver decides and answers what each run's
policy lets them; an operator also edits, pauses, cancels, forks and rewinds; a memory
admin sees memories. Each refusal is a 403 in one line, and the run is unchanged."""

from __future__ import annotations

from html import unescape

from temporalio.testing import WorkflowEnvironment

from durable_agents.control import runs
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.contracts import RunPolicy, RunRequest
from tests.conftest import eventually, run_id
from tests.console.live import live_console, signed_in
from tests.console.runs_for_console import waiting_payment

ROLES = {
    "console_viewers": ["bob"],
    "console_operators": ["alice", "bob"],  # bob is a viewer too: the viewer wins
    "console_memory_admins": ["alice"],
}


async def test_each_role_does_what_it_may_and_nothing_more(
    dev_env: WorkflowEnvironment, settings: Settings, worker: object
) -> None:
    client = dev_env.client
    roles = settings.model_copy(update=ROLES)
    anyone = RunPolicy()  # the policy lets anyone decide: the roles alone say who may
    state = await waiting_payment(client, roles, anyone)
    rid = state.run_id
    [pending] = state.pending_approvals
    async with live_console(roles, client) as console:
        viewer, viewer_csrf = await signed_in(console, "bob")
        approver, approver_csrf = await signed_in(console, "cfo")
        operator, operator_csrf = await signed_in(console, "alice")
        assert (await viewer.get(f"/runs/{rid}")).status_code == 200  # a viewer reads
        decision = {"request_id": pending.request_id, "decision": "approve"}
        no = await viewer.post(f"/runs/{rid}/decide", data={"csrf": viewer_csrf, **decision})
        assert no.status_code == 403 and "bob views runs only: they may not decide" in unescape(
            no.text
        )
        for verb, form in {
            "pause": {}, "cancel": {}, "edit": {"goal": "pay mallory"},
            "fork": {"moment": "1"}, "rewind": {"moment": "1"},
        }.items():  # fmt: skip
            refused = await approver.post(
                f"/runs/{rid}/{verb}", data={"csrf": approver_csrf, **form}
            )
            assert refused.status_code == 403, (verb, refused.status_code)
            assert "that is for the console's operators" in unescape(refused.text), verb
        paused = await viewer.post(f"/runs/{rid}/pause", data={"csrf": viewer_csrf})
        assert paused.status_code == 403 and "bob may not pause" in unescape(paused.text)
        for user, http in (("bob", viewer), ("cfo", approver)):
            page = await http.get("/memory")
            assert page.status_code == 403 and f"{user} may not see or forget memories" in unescape(
                page.text
            )
        assert (await operator.get("/memory")).status_code == 200
        unchanged = await runs.get_state(client, rid)
        assert (unchanged.goal, unchanged.pause_requested, unchanged.cancel_requested_by) == (
            state.goal, False, None,
        )  # fmt: skip
        assert unchanged.pending_approvals  # nobody decided
        # What each may do, they can: the approver decides, the operator pauses.
        paused = await operator.post(f"/runs/{rid}/pause", data={"csrf": operator_csrf})
        assert paused.status_code == 303
        yes = await approver.post(f"/runs/{rid}/decide", data={"csrf": approver_csrf, **decision})
        assert yes.status_code == 303

        async def decided() -> bool:
            now = await runs.get_state(client, rid)
            return now.pause_requested and not now.pending_approvals

        await eventually(decided)
        assert (await runs.get_state(client, rid)).approvals[0].decided_by == "cfo"
        await client.get_workflow_handle(rid).terminate("test done")


async def test_answers_come_only_from_who_the_policy_lets_answer(
    dev_env: WorkflowEnvironment, settings: Settings, worker: object
) -> None:
    client = dev_env.client
    rid = run_id("ask")
    policy = RunPolicy(approvers={"ask_human": ["cfo"]})
    request = RunRequest(goal="ask", agent="question", label="ask-human", policy=policy)
    await runs.start_run(client, settings, request, rid)

    async def asked():
        return (await runs.get_summary(client, rid)).pending_questions

    [question] = await eventually(asked)
    async with live_console(settings, client) as console:
        alice, alice_csrf = await signed_in(console, "alice")
        form = {"question_id": question.question_id, "answer": "INV-1002"}
        no = await alice.post(f"/runs/{rid}/answer", data={"csrf": alice_csrf, **form})
        assert no.status_code == 403 and "alice may not answer this run's questions" in unescape(
            no.text
        )
    # Through Temporal, past the console: the run refuses it too.
    from durable_agents.workflows.people_inputs import Answer

    try:
        await runs.answer(client, rid, Answer(answer="INV-1002", by="alice"))
    except runs.RunError as err:
        assert "alice may not answer this run's questions" in str(err)
    else:
        raise AssertionError("the run took an answer from someone its policy does not name")
    assert (await runs.get_summary(client, rid)).pending_questions
    await runs.answer(client, rid, Answer(answer="INV-1002", by="cfo"))
    assert (await runs.wait_result(client, rid)).status == "completed"
