"""The console in a real Chromium: what an approver and an operator do, click by click.

Each test opens its own browser context (its own cookies) against a console served over
real HTTP, beside a real worker and dev server. Waits are Playwright's expectations on
what the page shows, never sleeps.
"""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Browser, Page, expect
from temporalio.testing import WorkflowEnvironment

from durable_agents.control import runs
from durable_agents.workflows.people_inputs import Actor
from durable_agents.workflows.records import ApprovalStatus, QuestionStatus, RunStatus
from tests.conftest import eventually
from tests.console.browser import WIDTHS, shoot
from tests.console.live import PASSWORDS, LiveConsole
from tests.console.runs_for_console import asking, waiting_payment

LIVE = 30_000  # ms: a run's next moments, live on the page


async def sign_in(browser: Browser, console: LiveConsole, name: str) -> Page:
    width, height = WIDTHS["desktop"]
    context = await browser.new_context(
        base_url=console.url, viewport={"width": width, "height": height}
    )
    page = await context.new_page()
    await page.goto("/login")
    await page.get_by_label("Name").fill(name)
    await page.get_by_label("Password").fill(PASSWORDS[name])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Waiting for a person")).to_be_visible()
    return page


async def test_approve_from_the_inbox_and_watch_the_run_complete_live(
    browser: Browser, console: LiveConsole, dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    state = await waiting_payment(dev_env.client, console.settings)
    rid = state.run_id
    page = await sign_in(browser, console, "alice")

    item = page.locator(f'li[data-run="{rid}"]')
    await expect(item).to_contain_text("pay_invoice")
    await expect(item).to_contain_text("INV-1001")
    await expect(item).to_contain_text("pay_invoice is declared as needing approval")
    await expect(item.locator(".countdown")).to_have_text(re.compile(r"^in \d+h \d+m$"))
    await shoot(page, "inbox-desktop", tmp_path)
    await page.set_viewport_size({"width": WIDTHS["phone"][0], "height": WIDTHS["phone"][1]})
    await shoot(page, "inbox-phone", tmp_path)
    await page.set_viewport_size({"width": WIDTHS["desktop"][0], "height": WIDTHS["desktop"][1]})

    streams: list[str] = []
    page.on("request", lambda r: streams.append(r.url) if "/events" in r.url else None)
    await item.get_by_role("link", name="Open the run to decide").click()
    await expect(page.locator("#timeline")).to_contain_text("approval requested")
    # The page came with its moments and streams only those after the last it shows.
    rendered = await page.locator(".run[data-run]").get_attribute("data-after")
    assert rendered is not None and int(rendered) >= 1

    async def subscribed() -> bool:
        return bool(streams)

    await eventually(subscribed)  # the page's script opens its stream once loaded
    assert streams[0].endswith(f"/runs/{rid}/events?after={rendered}"), streams
    await page.evaluate("window.stillTheSamePage = true")
    # By keyboard: the comment field, then Tab to Approve, then Enter.
    comment = page.get_by_label("Comment")
    await comment.fill("within budget")
    await comment.press("Tab")
    await expect(page.get_by_role("button", name="Approve")).to_be_focused()
    await page.keyboard.press("Enter")

    await expect(page.locator("#status")).to_have_text("completed", timeout=LIVE)
    await expect(page.locator("#timeline li").last).to_contain_text("completed", timeout=LIVE)
    assert await page.evaluate("window.stillTheSamePage") is True, "the page reloaded"
    shown = await page.locator("#timeline li").evaluate_all(
        "items => items.map(li => Number(li.dataset.offset))"
    )
    assert shown == list(range(1, len(shown) + 1)), "each moment shown once, in order"
    await expect(page.locator(".audit")).to_contain_text("alice")
    await shoot(page, "run-desktop", tmp_path)
    await page.set_viewport_size({"width": WIDTHS["phone"][0], "height": WIDTHS["phone"][1]})
    await shoot(page, "run-phone", tmp_path)

    decided = (await runs.get_state(dev_env.client, rid)).approvals[0]
    assert (decided.decided_by, decided.comment) == ("alice", "within budget")


async def test_someone_outside_the_approvers_cannot_decide_even_by_a_forged_post(
    browser: Browser, console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    state = await waiting_payment(dev_env.client, console.settings)
    rid, request_id = state.run_id, state.pending_approvals[0].request_id
    page = await sign_in(browser, console, "bob")
    await page.goto(f"/runs/{rid}")
    await expect(page.get_by_role("button", name="Approve")).to_be_disabled()
    await expect(page.get_by_role("button", name="Reject")).to_be_disabled()
    await expect(page.locator(".who-may")).to_contain_text("alice")

    token = await page.locator("main").get_attribute("data-csrf")
    form: dict[str, str | float | bool] = {"request_id": request_id, "decision": "approve"}
    forged = await page.request.post(f"/runs/{rid}/decide", form={"csrf": token or "", **form})
    assert forged.status == 403
    no_token = await page.request.post(f"/runs/{rid}/decide", form=form)
    assert no_token.status == 403 and "CSRF" in await no_token.text()
    after = await runs.get_state(dev_env.client, rid)
    assert after.approvals[0].status is ApprovalStatus.PENDING and after.audit == state.audit


async def test_answer_pause_resume_fork_and_sign_out(
    browser: Browser, console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    client = dev_env.client
    asked = await asking(client, console.settings)
    page = await sign_in(browser, console, "bob")

    await page.goto(f"/runs/{asked}")
    await page.get_by_role("button", name="INV-1002").click(timeout=LIVE)
    await expect(page.locator("#status")).to_have_text("completed", timeout=LIVE)
    question = (await runs.get_state(client, asked)).questions[0]
    assert question.status is QuestionStatus.ANSWERED
    assert (question.answer, question.answered_by) == ("INV-1002", "bob")

    payment = await waiting_payment(client, console.settings)
    await page.goto(f"/runs/{payment.run_id}")
    await page.get_by_role("button", name="Pause").click()
    await expect(page.get_by_role("button", name="Resume")).to_be_visible()
    await expect(page.locator(".audit")).to_contain_text("pause_requested")
    await page.get_by_role("button", name="Resume").click()
    await expect(page.get_by_role("button", name="Pause")).to_be_visible()
    await expect(page.locator(".audit")).to_contain_text("resumed")

    await page.get_by_label("Fork from moment").fill("2")
    await page.get_by_role("button", name="Fork").click()
    await expect(page).not_to_have_url(re.compile(f"/runs/{payment.run_id}$"), timeout=LIVE)
    await expect(page.locator(".meta")).to_contain_text(f"forked from {payment.run_id}")
    fork_id = page.url.rsplit("/", 1)[-1]

    async def fork_started() -> bool:
        return (await runs.get_state(client, fork_id)).parent is not None

    await eventually(fork_started)

    copied = await page.context.cookies()  # as someone who lifted the cookie would
    await page.get_by_role("button", name="Sign out").click()
    await expect(page).to_have_url(re.compile("/login$"))
    await page.goto("/")
    await expect(page).to_have_url(re.compile("/login$"))
    # The copy, taken before sign-out, in another browser: the server ended its session.
    thief = await browser.new_context(base_url=console.url)
    await thief.add_cookies(copied)  # type: ignore[arg-type]
    stolen = await thief.new_page()
    await stolen.goto("/")
    await expect(stolen).to_have_url(re.compile("/login$"))
    await thief.close()
    for rid in (payment.run_id, fork_id):
        await runs.cancel(client, rid, Actor(by="test", reason="done"))
    assert (await runs.get_state(client, payment.run_id)).status is not RunStatus.COMPLETED
