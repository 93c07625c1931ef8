"""Re-record the replay fixtures: real runs of every behaviour, exported as history JSON.

Run with `make histories` after a deliberate change to the workflow; commit the files
together with the change. tests/workflows/test_replay_fixtures.py replays every file here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from decimal import Decimal
from pathlib import Path

from temporalio import workflow

from bench.harness import Bench, bench_stack
from durable_agents.activities.stores import Stores
from durable_agents.control import conversations, runs, timeline
from durable_agents.control.signer import Signer
from durable_agents.workflows import timeline as timeline_hook
from durable_agents.workflows.activity_io import idempotency_key
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import (
    RunBudget,
    RunLimits,
    RunPolicy,
    RunRequest,
    TrustedKey,
)
from durable_agents.workflows.people_inputs import (
    Actor,
    Answer,
    DecideRequest,
    Decision,
    StatePatch,
)
from durable_agents.workflows.signing import new_key
from tests.histories.rule_agent import FIXTURE_AGENT_MODULES

HERE = Path(__file__).parent
# More fixtures a behaviour records: fixture name -> (workflow id, run of its chain).
Extra = dict[str, tuple[str, int]]


async def until(bench: Bench, run_id: str, check: Callable[[object], bool]) -> None:
    for _ in range(600):
        if check(await runs.get_summary(bench.client, run_id)):
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{run_id}: condition not met")


def waiting(summary: object) -> bool:
    return bool(getattr(summary, "pending_approvals", None))


def waiting_or_closed(summary: object) -> bool:
    status = getattr(summary, "status", None)
    return waiting(summary) or (status is not None and status.is_closed)


async def happy_path(bench: Bench, rid: str) -> None:
    await runs.start_run(
        bench.client, bench.settings, RunRequest(goal="pay", label="pay-invoice"), rid
    )
    await until(bench, rid, waiting)
    await runs.approve(bench.client, rid, Decision(by="alice", comment="ok"))


async def rejected_approval(bench: Bench, rid: str) -> None:
    await runs.start_run(
        bench.client, bench.settings, RunRequest(goal="pay", label="pay-invoice"), rid
    )
    await until(bench, rid, waiting)
    await runs.reject(bench.client, rid, Decision(by="bob", comment="not this month"))


async def question_answered(bench: Bench, rid: str) -> None:
    await runs.start_run(
        bench.client, bench.settings, RunRequest(goal="ask", label="ask-human"), rid
    )
    await until(bench, rid, lambda s: bool(getattr(s, "pending_questions", None)))
    await runs.answer(bench.client, rid, Answer(answer="INV-1002", by="dan"))


async def edited(bench: Bench, rid: str) -> None:
    request = RunRequest(goal="long", label="long?steps=30&reply_bytes=64")
    await runs.start_run(bench.client, bench.settings, request, rid)
    await until(bench, rid, lambda s: getattr(s, "steps_done", 0) >= 2)
    await runs.pause(bench.client, rid, Actor(by="eve"))
    await until(bench, rid, lambda s: getattr(s, "waiting_for", "") == "resume")
    await runs.edit(bench.client, rid, StatePatch(by="eve", pending_steps=["Wrap up"]))
    await runs.resume(bench.client, rid, Actor(by="eve"))


async def paused_and_resumed(bench: Bench, rid: str) -> None:
    request = RunRequest(goal="long", label="long?steps=10&reply_bytes=64")
    await runs.start_run(bench.client, bench.settings, request, rid)
    await until(bench, rid, lambda s: getattr(s, "steps_done", 0) >= 1)
    await runs.pause(bench.client, rid, Actor(by="eve"))
    await until(bench, rid, lambda s: getattr(s, "waiting_for", "") == "resume")
    await runs.resume(bench.client, rid, Actor(by="eve"))


async def retried_model_errors(bench: Bench, rid: str) -> None:
    scenario = "pay-invoice?fault=plan:429*2&fault=step1:500*1"
    await runs.start_run(bench.client, bench.settings, RunRequest(goal="pay", label=scenario), rid)
    await until(bench, rid, waiting)
    await runs.approve(bench.client, rid, Decision(by="alice"))


async def cancelled(bench: Bench, rid: str) -> None:
    await runs.start_run(
        bench.client, bench.settings, RunRequest(goal="pay", label="pay-invoice"), rid
    )
    await until(bench, rid, waiting)
    await runs.cancel(bench.client, rid, Actor(by="carol", reason="disputed"))


async def failed(bench: Bench, rid: str) -> None:
    request = RunRequest(goal="pay", label="pay-invoice?fault=step2:401")
    await runs.start_run(bench.client, bench.settings, request, rid)


async def forked(bench: Bench, rid: str) -> None:
    parent = f"{rid}-parent"
    await happy_path(bench, parent)
    await runs.wait_for_outcome(bench.client, parent)
    found = await timeline.rebuild(bench.client, parent)
    asked = next(m.index for m in found.moments if m.kind == "approval requested")
    await timeline.fork(bench.client, bench.settings, parent, asked, new_id=rid)
    await until(bench, rid, waiting)
    await runs.approve(bench.client, rid, Decision(by="bob"))


async def continued_as_new(bench: Bench, rid: str) -> None:
    request = RunRequest.model_validate(
        {
            "goal": "long",
            "scenario": "long?steps=8&reply_bytes=64",
            "limits": {"continue_as_new_after_events": 60},
        }
    )
    await runs.start_run(bench.client, bench.settings, request, rid)


async def malformed_signals(bench: Bench, rid: str) -> None:
    """Signals with no input, two inputs or the wrong shape, dropped; then a normal run."""
    await runs.start_run(
        bench.client, bench.settings, RunRequest(goal="pay", label="pay-invoice"), rid
    )
    await until(bench, rid, waiting)
    handle = bench.client.get_workflow_handle(rid)
    await handle.signal("approve")
    await handle.signal("reject", args=[{}, {"by": "mallory"}])
    await handle.signal("cancel", 42)
    await handle.signal("pause", {"launch": True})
    await runs.approve(bench.client, rid, Decision(by="alice"))


async def plain_loop(bench: Bench, rid: str) -> None:
    """The refund agent: a plain tool loop, recorded at start; its policy asks a person."""
    request = RunRequest(goal="refund jane", agent="refund", label="refund-loop")
    await runs.start_run(bench.client, bench.settings, request, rid)
    await until(bench, rid, waiting)
    await runs.approve(bench.client, rid, Decision(by="cfo"))


async def policy_tightened(bench: Bench, rid: str) -> None:
    """The refund agent under a request that tightens its policy (`agent-policy-is-a-
    floor`): taken, merged with the agent's approvers; the refund waits for a person."""
    request = RunRequest(
        goal="refund jane",
        agent="refund",
        label="refund-loop",
        policy=RunPolicy(approve_payments_above=Decimal("20")),
    )
    await runs.start_run(bench.client, bench.settings, request, rid)
    await until(bench, rid, waiting)
    await runs.approve(bench.client, rid, Decision(by="cfo"))


async def signed_changes(bench: Bench, rid: str) -> None:
    """A run requiring signed changes (the `every-change-signed` patch): unsigned changes
    refused and recorded, signed ones counted (a pause, a resume, a budget, a decision)."""
    key, public = new_key()
    alice = Signer(key, "alice-laptop")
    policy = RunPolicy(
        require_signed_decisions=True,
        trusted_keys={"alice-laptop": TrustedKey(public_key=public, signs_for=["alice"])},
    )
    request = RunRequest(
        goal="pay", label="pay-invoice", policy=policy, budget=RunBudget(tool_calls=5)
    )
    await runs.start_run(bench.client, bench.settings, request, rid)
    await until(bench, rid, waiting)
    await runs.pause(bench.client, rid, Actor(by="alice"))
    await runs.approve(bench.client, rid, Decision(by="alice"))
    await runs.pause(bench.client, rid, Actor(by="alice"), alice)
    await until(bench, rid, lambda s: bool(getattr(s, "waiting_for", "")))
    await runs.resume(bench.client, rid, Actor(by="alice"), alice)
    await runs.raise_budget(bench.client, rid, runs.budget_raise("alice", tool_calls=6), alice)
    await runs.decide(bench.client, rid, DecideRequest(approve=True, by="alice"), alice)


async def forked_with_parent(bench: Bench, rid: str) -> None:
    """A fork that asks its parent for its identity and policy (`fork-checked-...`)."""
    await forked(bench, rid)


async def forked_record_checked(bench: Bench, rid: str) -> None:
    """A fork whose carried state is checked against its parent's own history at the
    moment (`fork-state-checked-with-its-parents-record`), an edit applied on top."""
    parent = f"{rid}-parent"
    await happy_path(bench, parent)
    await runs.wait_for_outcome(bench.client, parent)
    found = await timeline.rebuild(bench.client, parent)
    asked = next(m.index for m in found.moments if m.kind == "approval requested")
    edit = StatePatch(by="bob", context=["the fork's own note"])
    await timeline.fork(bench.client, bench.settings, parent, asked, edit=edit, new_id=rid)
    await until(bench, rid, waiting)
    await runs.approve(bench.client, rid, Decision(by="bob"))


async def cut_short(bench: Bench, rid: str) -> None:
    """The payment step's reply cut short (finish_reason length): not the step's end."""
    request = RunRequest(goal="pay", label="pay-invoice?fault=step3:length")
    await runs.start_run(bench.client, bench.settings, request, rid)
    await until(bench, rid, waiting_or_closed)
    if waiting(await runs.get_summary(bench.client, rid)):  # before the patch: unpaid, done
        await runs.approve(bench.client, rid, Decision(by="alice"))


async def tool_failed(bench: Bench, rid: str) -> None:
    """The payment fails for good: its key is in the ledger for another request (a
    conflict no retry mends). The model hears it (after `tool-errors-go-to-the-model`)."""
    await runs.start_run(
        bench.client, bench.settings, RunRequest(goal="pay", label="pay-invoice"), rid
    )
    await until(bench, rid, waiting)
    state = await runs.get_state(bench.client, rid)
    [request] = state.pending_approvals
    key = idempotency_key(state.store_key, request.step, request.request_id)
    ledger = Stores.open(bench.settings).ledger
    ledger.record(key, state.store_key, request.tool, "another-request", {"ok": True})
    await runs.approve(bench.client, rid, Decision(by="alice"))


async def cancelled_with_the_start(bench: Bench, rid: str) -> None:
    """A cancel sent with the start: it holds (`cancel-holds`); before, it was lost and the
    run went on to its approval."""
    request = RunRequest(goal="pay", label="pay-invoice")
    await bench.client.start_workflow(
        AgentWorkflow.run,
        request,
        id=rid,
        task_queue=bench.settings.task_queue,
        start_signal="cancel",
        start_signal_args=[Actor(by="carol", reason="wrong goal")],
    )
    await until(bench, rid, waiting_or_closed)
    if waiting(await runs.get_summary(bench.client, rid)):  # the cancel was lost: finish
        await runs.approve(bench.client, rid, Decision(by="alice"))


async def signed_decisions_v1(bench: Bench, rid: str) -> None:
    """A signing policy as runs from before `every-change-signed` took it: decisions signed
    (v1), other changes counted unsigned."""
    key, public = new_key()
    alice = Signer(key, "alice-laptop")
    policy = RunPolicy(
        require_signed_decisions=True,
        trusted_keys={"alice-laptop": TrustedKey(public_key=public, signs_for=["alice"])},
    )
    request = RunRequest(goal="pay", label="pay-invoice", policy=policy)
    await runs.start_run(bench.client, bench.settings, request, rid)
    await until(bench, rid, waiting)
    await runs.pause(bench.client, rid, Actor(by="alice"))
    await runs.resume(bench.client, rid, Actor(by="alice"))
    await runs.decide(bench.client, rid, DecideRequest(approve=True, by="alice"), alice)


async def conversation(bench: Bench, rid: str) -> Extra:
    """The support chat as a conversation: a message, a refund approved mid-turn, more
    messages until it continues as new, one more in the fresh run, then closed."""
    client = bench.client
    often = RunLimits(continue_as_new_after_events=50)
    request = conversations.conversation_request("support-chat", label="chat", limits=often)
    await conversations.open_conversation(client, bench.settings, request, rid)
    await conversations.send(client, rid, conversations.message("Where is A-1002?", by="jane"))
    asked = conversations.message("Please refund A-1001 5.00", by="jane")
    waiting = await conversations.send(client, rid, asked)
    assert waiting.status == "waiting", waiting
    await runs.decide(client, rid, DecideRequest(approve=True, by="support-lead"))
    await conversations.await_reply(client, rid, asked.message_id)
    for i in range(20):
        if len(await timeline.chain_runs(client, rid)) > 1:
            break
        await conversations.send(client, rid, conversations.message(f"thanks {i}", by="jane"))
    else:
        raise RuntimeError("the conversation never continued as new")
    await conversations.send(client, rid, conversations.message("bye", by="jane"))
    await conversations.close(client, rid, Actor(by="jane"))
    return {"conversation-continued": (rid, -1)}


async def sub_agent(bench: Bench, rid: str) -> Extra:
    """Triage delegates to research, a child run that calls its knowledge base over MCP:
    the parent is this fixture, the child the `mcp-call` fixture."""
    request = RunRequest(goal="Ticket 12: my parcel is late", agent="triage", label="triage")
    await runs.start_run(bench.client, bench.settings, request, rid)
    await runs.wait_for_outcome(bench.client, rid)
    [delegation] = (await runs.get_state(bench.client, rid)).delegations
    return {"mcp-call": (delegation.child_id, 0)}


async def conversation_admitted(bench: Bench, rid: str) -> Extra:
    """The conversation recorded with the admission (`admitted-from-the-record`: its
    continued run asks Temporal's record) and its limits held to the agent's
    (`budget-and-limits-are-floors`); `conversation` is the side from before both."""
    await conversation(bench, rid)
    return {"conversation-admitted-continued": (rid, -1)}


async def sub_agent_admitted(bench: Bench, rid: str) -> Extra:
    """The sub-agent story recorded with the child admitted from the record and the
    parent reading its child's spend from the child's run (`child-spend-read-from-the-
    child`); `sub-agent` and `mcp-call` are the sides from before."""
    await sub_agent(bench, rid)
    [delegation] = (await runs.get_state(bench.client, rid)).delegations
    return {"sub-agent-admitted-child": (delegation.child_id, 0)}


async def evaluator_rule(bench: Bench, rid: str) -> None:
    """The auditor (tests/histories/rule_agent.py): a pure rule denies one call, an
    evaluator asks a person about another, who approves it."""
    request = RunRequest(goal="record", agent="auditor", label="loop?steps=4&reply_bytes=16")
    await runs.start_run(bench.client, bench.settings, request, rid)
    await until(bench, rid, waiting)
    await runs.approve(bench.client, rid, Decision(by="alice"))


def at_budget(summary: object) -> bool:
    return any(a.tool == "(budget)" for a in getattr(summary, "pending_approvals", []))


async def budget_raised(bench: Bench, rid: str) -> None:
    """A run at its tool-call budget: the budget request, raised by a person; the run goes
    on to its approval. Recorded by the code that asked with an approval named `(budget)`."""
    request = RunRequest(goal="pay", label="pay-invoice", budget=RunBudget(tool_calls=1))
    await runs.start_run(bench.client, bench.settings, request, rid)
    await until(bench, rid, at_budget)
    await runs.raise_budget(bench.client, rid, runs.budget_raise("cfo", tool_calls=10))
    await until(bench, rid, lambda s: waiting(s) and not at_budget(s))
    await runs.approve(bench.client, rid, Decision(by="alice"))


async def budget_stopped(bench: Bench, rid: str) -> None:
    """A run at its budget, stopped there by a person who rejects the budget request."""
    request = RunRequest(goal="pay", label="pay-invoice", budget=RunBudget(tool_calls=1))
    await runs.start_run(bench.client, bench.settings, request, rid)
    await until(bench, rid, at_budget)
    await runs.reject(bench.client, rid, Decision(by="cfo", comment="enough"))


async def budget_deadline(bench: Bench, rid: str) -> None:
    """A run at its budget that nobody answers: the deadline stops it."""
    request = RunRequest(
        goal="pay",
        label="pay-invoice",
        budget=RunBudget(tool_calls=1),
        policy=RunPolicy(decision_timeout_seconds=1),
    )
    await runs.start_run(bench.client, bench.settings, request, rid)


@contextlib.contextmanager
def built_before(patches: tuple[str, ...]) -> Iterator[None]:
    """Run the worker as a build from before these patches: asked, each answers no and
    records no marker, which is what a build without the `patched` call did."""
    if not patches:
        yield
        return
    asked = workflow.patched

    def patched(patch_id: str) -> bool:
        return False if patch_id in patches else asked(patch_id)

    workflow.patched = patched  # type: ignore[assignment]
    try:
        yield
    finally:
        workflow.patched = asked


BEHAVIOURS: dict[str, Callable[[Bench, str], Awaitable[Extra | None]]] = {
    "happy-path": happy_path,
    "rejected-approval": rejected_approval,
    "question-answered": question_answered,
    "edited": edited,
    "paused-and-resumed": paused_and_resumed,
    "retried-model-errors": retried_model_errors,
    "cancelled": cancelled,
    "failed": failed,
    "forked": forked,
    "continued-as-new": continued_as_new,  # the first run of the chain, ending in CAN
    # Recorded with the run identity (the "run-identity" patch) and payload-proof handlers:
    "identity-happy-path": happy_path,
    "malformed-signals": malformed_signals,
    # Agents as data: a plain tool loop with its agent recorded at start.
    "plain-loop": plain_loop,
    # Every change signed under a signing policy; a fork checked with its parent.
    "signed-changes": signed_changes,
    "forked-with-parent": forked_with_parent,
    # Both sides of the patches no fixture had replayed: with the marker, and as a build
    # from before the patch ran the same story (BUILT_BEFORE).
    "cut-short": cut_short,
    "cut-short-before-patch": cut_short,
    "tool-failed": tool_failed,
    "tool-failed-before-patch": tool_failed,
    "cancelled-with-the-start": cancelled_with_the_start,
    "cancel-lost-before-patch": cancelled_with_the_start,
    "signed-decisions-v1": signed_decisions_v1,
    "policy-tightened": policy_tightened,
    "forked-record-checked": forked_record_checked,
    # Signed changes checked by this release's rules for people's inputs (the marker).
    "people-checked": signed_changes,
    # Guards of the phases' rebuild: a conversation (with its continued run), a sub-agent
    # (with its child, which calls MCP tools), an agent's evaluator rule.
    "conversation": conversation,
    "sub-agent": sub_agent,
    "evaluator-rule": evaluator_rule,
    # A budget reached, raised and stopped, as runs asked before budget requests had a
    # kind of their own (an approval named `(budget)`): they replay, and read as budget.
    "budget-raised": budget_raised,
    "budget-stopped": budget_stopped,
    "budget-deadline": budget_deadline,
    # A new run's opening on the one `opening-in-one-marker` marker (the four patches of
    # the opening not asked one by one; the fixtures above ask them as before).
    "opened-in-one": plain_loop,
    # Issue 45: runs admitted from Temporal's record, budgets and limits as floors, a
    # child's spend read from the child's own run.
    "conversation-admitted": conversation_admitted,
    "sub-agent-admitted": sub_agent_admitted,
    # Signed changes with decisions and answers bound to their moment (v3, patch
    # `decisions-bound-to-their-moment`); `signed-changes` is the side from before it.
    "signed-moments": signed_changes,
}
# The behaviours recorded as a build from before these patches.
BUILT_BEFORE: dict[str, tuple[str, ...]] = {
    "cut-short-before-patch": ("cut-short-replies-go-on",),
    "tool-failed-before-patch": ("tool-errors-go-to-the-model",),
    "cancel-lost-before-patch": ("cancel-holds",),
    "signed-decisions-v1": ("every-change-signed",),
    # The opening's patches asked one by one (their new sides), as before the one marker.
    "identity-happy-path": ("opening-in-one-marker",),
    "plain-loop": ("opening-in-one-marker",),
    "people-checked": ("opening-in-one-marker",),
}


async def record(only: list[str]) -> None:
    """Record every behaviour, or only those named (older fixtures stay as recorded: they
    prove that runs started on older code still replay)."""
    manifest_path = HERE / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if only else {}
    unknown = set(only) - set(BEHAVIOURS)
    if unknown:
        raise SystemExit(f"no behaviour named {', '.join(sorted(unknown))}")
    os.environ["AGENT_MODULES"] = ",".join(FIXTURE_AGENT_MODULES)
    async with bench_stack() as bench:
        for name, behaviour in BEHAVIOURS.items():
            if only and name not in only:
                continue
            with built_before(BUILT_BEFORE.get(name, ())):
                extra = await behaviour(bench, name)
                await runs.wait_for_outcome(bench.client, name)
            for fixture, (workflow_id, index) in {name: (name, 0), **(extra or {})}.items():
                _, history = (await timeline.fetch_chain(bench.client, workflow_id))[index]
                timeline.export_history(history, HERE / f"{fixture}.json")
                with timeline_hook.recording(workflow_id) as moments:
                    await timeline.replayer().replay_workflow(history)
                manifest[fixture] = moments[max(moments)].state.status.value
                print(f"  {fixture}: {manifest[fixture]}, {len(history.events)} events")
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    asyncio.run(record(sys.argv[1:]))
