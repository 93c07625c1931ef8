"""What if, on 20 recorded pay-invoice runs: played again against the same agent (no
difference, no token), against instructions that forbid paying above 1,000 EUR (20
payments removed) and against a model that pays twice (20 payments added), with the
payment provider's own journal watched throughout; graders gate the result in Python, in
`agentctl whatif`'s exit code, and the console shows the report."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import timedelta
from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_agents import ToolRisk
from durable_agents.client import AgentClient
from durable_agents.control import runs, whatif_record
from durable_agents.examples.invoice import (
    draft_email,
    invoice_agent,
    lookup_invoice,
    pay_invoice,
    send_email,
)
from durable_agents.examples.providers import Providers
from durable_agents.infra.stack import settings_env
from durable_agents.runtime.settings import Settings
from durable_agents.whatif import Variant
from durable_agents.workflows.contracts import RunRequest
from tests.conftest import approve_when_asked, eventually, run_id
from tests.console.live import live_console, signed_in
from tests.starters.test_verb_walk import agentctl
from tests.whatif.graders import no_payment_above_1000, pays_at_most_once

RUNS = 20
STRICT = invoice_agent.instructions + " Never pay an invoice above 1,000 EUR: leave it unpaid."


async def paid_runs(client: Any, settings: Settings, count: int) -> list[str]:
    """`count` demo runs, each payment approved by alice, each ended."""
    ids = [run_id("inv") for _ in range(count)]
    request = RunRequest(goal="Pay invoice INV-1001", agent="invoice", label="pay-invoice")
    for rid in ids:
        await runs.start_run(client, settings, request, rid)
    await asyncio.gather(*(approve_when_asked(client, rid) for rid in ids))
    for rid in ids:
        assert (await runs.wait_result(client, rid)).status == "completed"
    return ids


def journal(settings: Settings) -> list[dict[str, Any]]:
    """What the providers themselves recorded: every charge and email, with its key."""
    providers = Providers.open(settings.data_dir)
    return [*providers.payments.effects(), *providers.email.effects()]


async def test_twenty_invoice_runs_played_again(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    ids = await paid_runs(dev_env.client, settings, RUNS)
    before = journal(settings)
    assert sum(e["operation"] == "charge" for e in before) == RUNS
    client = AgentClient(dev_env.client, settings)

    same = await client.what_if(ids, graders=[pays_at_most_once])
    assert [run.differences for run in same.runs] == [[]] * RUNS
    assert same.totals.tokens_then > 0 and same.totals.tokens_now == 0
    assert all(run.now.memoized_calls == run.now.model_calls > 0 for run in same.runs)
    assert [e.source for run in same.runs for e in run.now.effects] == ["recorded"] * 3 * RUNS
    assert same.passed and journal(settings) == before

    strict = await client.what_if(ids, variant=Variant(instructions=STRICT))
    removed = [(c.tool, c.then) for r in strict.runs for c in r.effect_changes]
    payment = {"invoice_id": "INV-1001", "amount": "1250.00", "currency": "EUR"}
    assert removed.count(("pay_invoice", payment)) == RUNS
    assert strict.totals.effects_removed == 2 * RUNS  # the payment and its confirmation
    assert strict.totals.effects_added == 0 and strict.totals.tokens_now > 0
    assert all("above the 1,000 EUR limit" in (r.now.final_answer or "") for r in strict.runs)
    assert journal(settings) == before

    twice = await client.what_if(
        ids, variant=Variant(model="scripted/pay-invoice-twice"), graders=[pays_at_most_once]
    )
    added = [c for r in twice.runs for c in r.effect_changes if c.change == "added"]
    assert [(c.tool, c.now) for c in added] == [("pay_invoice", payment)] * RUNS
    assert not twice.passed and len(twice.failing()) == RUNS
    assert twice.failing()[0].grades[0].reason == "pays INV-1001 more than once"
    # The extra payment was approved by the what-if's policy, never by a person.
    extra = [a for r in twice.runs for a in r.now.approvals if a.by == "what-if policy"]
    assert len(extra) == RUNS
    assert journal(settings) == before

    # The CLI: a grader that fails exits 1, naming each failing run on a line of its own.
    env = settings_env(settings)
    grader = "tests.whatif.graders:no_payment_above_1000"
    failed = await agentctl(env, "whatif", *ids[:4], "--grader", grader, "--json")
    assert failed.exit_code == 1, failed.stdout + failed.stderr
    printed = json.loads(failed.stdout)  # the whole report, for machines
    assert printed["totals"]["runs"] == 4 and printed["totals"]["failed_grades"] == 4
    lines = [line for line in failed.stderr.splitlines() if line.startswith("FAILED ")]
    assert sorted(lines) == sorted(
        f"FAILED {rid}: no_payment_above_1000: pays INV-1001 1250.00 EUR" for rid in ids[:4]
    )
    passed = await agentctl(env, "whatif", *ids[:4], "--instructions", STRICT, "--grader", grader)
    assert passed.exit_code == 0, passed.stdout + passed.stderr
    assert "4 of 4 runs differ: 0 effects added, 8 removed, 0 changed" in passed.stdout
    assert no_payment_above_1000 is not None and journal(settings) == before

    # An approval the record lacks may stop the shadow instead: reported as stopped.
    stopped = await client.what_if(
        ids[:2], variant=Variant(model="scripted/pay-invoice-twice"), unmatched="stop"
    )
    for run in stopped.runs:
        assert (run.then.status, run.now.status) == ("completed", "failed")
        assert "what-if stopped: pay_invoice asked for an approval" in (run.now.error or "")
    assert journal(settings) == before

    # A variant declaring the payment tool read-only (no approval, no key) still never
    # pays: the record and the code here say it acts, so its second payment is simulated.
    unguarded = dataclasses.replace(pay_invoice, risk=ToolRisk.READ_ONLY)
    tools = [lookup_invoice, draft_email, unguarded, send_email]
    careless = Variant(model="scripted/pay-invoice-twice", tools=tools)
    sneaked = await client.what_if(ids[:2], variant=careless, read_only="live")
    for run in sneaked.runs:
        assert [(e.tool, e.source) for e in run.now.effects if e.tool == "pay_invoice"] == [
            ("pay_invoice", "recorded"),
            ("pay_invoice", "simulated"),
        ]
        assert run.now.approvals == []  # read-only: nobody was asked
    assert journal(settings) == before

    # The runs found by a visibility query: the agent's runs closed in the last hour.
    async def found() -> int:
        closed = await whatif_record.recorded_runs(
            dev_env.client,
            settings,
            matching=whatif_record.Matching(agent="invoice", closed_within=timedelta(hours=1)),
        )
        return len(closed) if sorted(r.run_id for r in closed) == sorted(ids) else 0

    assert await eventually(found) == RUNS

    # The console: the report, each run then and now side by side, links to both.
    async with live_console(settings, dev_env.client) as console:
        http, _ = await signed_in(console, "alice")
        page = await http.get(f"/whatif/{twice.id}")
        assert page.status_code == 200
        assert f"{RUNS} of {RUNS} runs differ: {RUNS} effects added, 0 removed" in page.text
        assert f'href="/runs/{ids[0]}"' in page.text and twice.runs[0].shadow_id in page.text
        assert "pays INV-1001 more than once" in page.text
        listing = await http.get("/whatif")
        assert twice.id in listing.text and strict.id in listing.text
        assert (await http.get("/whatif/wi-nothere00")).status_code == 400
        assert (await http.get("/whatif/wi-0000000000")).status_code == 404
        assert (await console.client().get(f"/whatif/{twice.id}")).status_code in (303, 401)
