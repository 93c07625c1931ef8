"""The console over real HTTP against a dev server and a worker: sign-in, CSRF, who may
decide, the signed-in user on every decision, and one-line refusals for bad input."""

from __future__ import annotations

import json

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agents.control import runs
from durable_agents.workflows.records import ApprovalStatus, QuestionStatus, RunStatus
from tests.console.live import LiveConsole, csrf_of, signed_in
from tests.console.runs_for_console import asking, waiting_payment


async def test_sign_in_logout_and_csrf(console: LiveConsole) -> None:
    http = console.client()
    assert (await http.get("/")).headers["location"] == "/login"
    assert (await http.get("/runs")).status_code == 303
    login = await http.get("/login")
    token = csrf_of(login.text)
    no_token = await http.post("/login", data={"name": "alice", "password": "alice-password"})
    assert no_token.status_code == 403
    wrong = await http.post(
        "/login", data={"csrf": token, "name": "alice", "password": "not-her-password"}
    )
    assert wrong.status_code == 401 and "wrong name or password" in wrong.text
    nobody = await http.post("/login", data={"csrf": token, "name": "eve", "password": "x" * 9})
    assert nobody.status_code == 401

    http, token = await signed_in(console, "alice")
    assert 'signed in as <strong id="me">alice</strong>' in (await http.get("/")).text
    assert (await http.post("/logout", data={})).status_code == 403
    out = await http.post("/logout", data={"csrf": token})
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert (await http.get("/")).status_code == 303


async def test_a_decision_carries_the_signed_in_user_never_a_typed_name(
    console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    client = dev_env.client
    state = await waiting_payment(client, console.settings)
    rid, request = state.run_id, state.pending_approvals[0]

    bob, bob_token = await signed_in(console, "bob")
    page = (await bob.get(f"/runs/{rid}")).text
    assert "Who may decide:</strong> alice" in page
    assert 'value="approve" class="primary" disabled' in page
    form = {"csrf": bob_token, "request_id": request.request_id, "decision": "approve"}
    refused = await bob.post(f"/runs/{rid}/decide", data=form)
    assert refused.status_code == 403 and "bob may not decide pay_invoice" in refused.text
    after = await runs.get_state(client, rid)
    assert after.pending_approvals == state.pending_approvals and after.audit == state.audit

    alice, alice_token = await signed_in(console, "alice")
    form = {"request_id": request.request_id, "decision": "approve", "by": "cfo"}
    assert (await alice.post(f"/runs/{rid}/decide", data=form)).status_code == 403
    assert (await runs.get_state(client, rid)).audit == state.audit

    form |= {"csrf": alice_token, "comment": "ok, within budget"}
    done = await alice.post(f"/runs/{rid}/decide", data=form)
    assert done.status_code == 303, done.text
    outcome = await runs.wait_for_outcome(client, rid)
    assert outcome["status"] == RunStatus.COMPLETED
    final = await runs.get_state(client, rid)
    decided = final.approvals[0]
    assert decided.status is ApprovalStatus.APPROVED
    assert (decided.decided_by, decided.comment) == ("alice", "ok, within budget")
    assert not [e for e in final.audit if e.actor == "cfo"]
    # The message the redirect carried is on the next page, once.
    page = (await alice.get(f"/runs/{rid}")).text
    assert "approved: pay_invoice" in page
    assert "approved: pay_invoice" not in (await alice.get(f"/runs/{rid}")).text


async def test_an_answer_and_the_json_replies_of_scripted_pages(
    console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    client = dev_env.client
    rid = await asking(client, console.settings)

    async def asked() -> bool:
        return bool((await runs.get_summary(client, rid)).pending_questions)

    from tests.conftest import eventually

    await eventually(asked)
    question = (await runs.get_summary(client, rid)).pending_questions[0]
    http, token = await signed_in(console, "bob")
    json_headers = {"Accept": "application/json"}
    base = {"csrf": token, "question_id": question.question_id}
    if question.options:
        wrong = await http.post(
            f"/runs/{rid}/answer", data=base | {"answer": "not an option"}, headers=json_headers
        )
        assert wrong.status_code == 409 and wrong.json()["message"].startswith("answer must be")
    reply = (question.options or ["yes"])[0]
    done = await http.post(
        f"/runs/{rid}/answer", data=base | {"answer": reply, "by": "cfo"}, headers=json_headers
    )
    assert done.status_code == 200 and done.json()["ok"] is True
    answered = (await runs.get_state(client, rid)).questions[0]
    assert answered.status is QuestionStatus.ANSWERED
    assert (answered.answer, answered.answered_by) == (reply, "bob")


@pytest.mark.parametrize(
    ("path", "form", "status", "says"),
    [
        ("/runs/no-such-run/decide", {"request_id": "r", "decision": "approve"}, 404, "no run"),
        ("/runs/bad id!/pause", {}, 404, "no run"),
        ("/runs/{rid}/decide", {"request_id": "nope", "decision": "approve"}, 409, "no pending"),
        ("/runs/{rid}/decide", {"request_id": "{req}", "decision": "maybe"}, 422, "decision"),
        ("/runs/{rid}/decide", {"request_id": "{req}", "comment": "x" * 2001}, 422, "comment"),
        ("/runs/{rid}/fork", {"moment": "abc"}, 422, "moment"),
        ("/runs/{rid}/fork", {"moment": "999999"}, 409, "there is no step 999999"),
        ("/runs/{rid}/rewind", {"moment": "0"}, 422, "moment"),
        ("/runs/{rid}/edit", {}, 409, "the patch changes nothing"),
        ("/runs/{rid}/answer", {"question_id": "q", "answer": "x"}, 409, "no question"),
        ("/runs/{rid}/pause", {f"f{i}": "x" for i in range(30)}, 400, "malformed form"),
        ("/runs/{rid}/budget", {"usd": "nan"}, 422, "usd"),
        ("/runs/{rid}/budget", {"usd": "inf"}, 422, "usd"),
        ("/runs/{rid}/budget", {"seconds": "1e300"}, 422, "seconds"),
        ("/runs/{rid}/budget", {"tokens": "9" * 40}, 422, "tokens"),
        ("/runs/{rid}/fork", {"moment": "9" * 40}, 422, "moment"),
    ],
)
async def test_bad_input_is_one_line_and_changes_nothing(
    console: LiveConsole,
    dev_env: WorkflowEnvironment,
    path: str,
    form: dict[str, str],
    status: int,
    says: str,
) -> None:
    state = await waiting_payment(dev_env.client, console.settings)
    http, token = await signed_in(console, "alice")
    req = state.pending_approvals[0].request_id
    path = path.replace("{rid}", state.run_id)
    form = {k: v.replace("{req}", req) for k, v in form.items()}
    response = await http.post(
        path, data={"csrf": token, **form}, headers={"Accept": "application/json"}
    )
    assert response.status_code == status, response.text
    message = response.json()["message"]
    assert says in message and "\n" not in message
    after = await runs.get_state(dev_env.client, state.run_id)
    assert after.audit == state.audit and after.approvals == state.approvals


async def test_pages_refuse_bad_requests(console: LiveConsole) -> None:
    http, token = await signed_in(console, "alice")
    assert (await http.get("/runs/no-such-run")).status_code == 404
    assert (await http.get("/runs?status=bogus")).status_code == 400
    assert (await http.get("/runs/no-such-run/events")).status_code == 404
    garbage = await http.post(
        "/runs/x/pause",
        content=b"--b\r\nnot a part",
        headers={"Content-Type": "multipart/form-data; boundary=b"},
    )
    assert garbage.status_code in (400, 403)
    upload = await http.post("/runs/x/pause", data={"csrf": token}, files={"f": ("a.txt", b"x")})
    assert upload.status_code == 400 and "files" in upload.text
    urlencoded = {"Content-Type": "application/x-www-form-urlencoded"}
    twice = await http.post(
        "/runs/x/pause",
        content=f"csrf={token}&reason=a&reason=b",
        headers=urlencoded | {"Accept": "application/json"},
    )
    assert twice.status_code == 400 and twice.json()["message"].endswith("'reason' is given twice")
    huge = await http.post(
        "/runs/x/pause", content=f"csrf={token}&reason=" + "x" * 300_000, headers=urlencoded
    )
    assert huge.status_code == 413

    async def chunks():
        yield f"csrf={token}".encode()

    unsized = await http.post("/runs/x/pause", content=chunks(), headers=urlencoded)
    assert unsized.status_code == 411
    # A GET changes nothing: there is no GET for an action.
    assert (await http.get("/runs/x/pause")).status_code == 405


async def test_edit_cancel_and_rewind_from_the_console(
    console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    client = dev_env.client
    state = await waiting_payment(client, console.settings)
    rid = state.run_id
    http, token = await signed_in(console, "bob")
    json_headers = {"Accept": "application/json"}

    form = {"csrf": token, "goal": "Pay INV-1001 only", "pending_steps": "Wrap up\n\n", "by": "x"}
    edited = await http.post(f"/runs/{rid}/edit", data=form, headers=json_headers)
    assert edited.status_code == 200, edited.text
    after = await runs.get_state(client, rid)
    assert after.goal == "Pay INV-1001 only" and after.plan[-1].title == "Wrap up"
    assert after.audit[-1].actor == "bob" and after.audit[-1].action == "edited"

    before_rewind = (await runs.handle(client, rid).describe()).run_id
    rewound = await http.post(f"/runs/{rid}/rewind", data={"csrf": token, "moment": "2"})
    assert rewound.status_code == 303, rewound.text
    assert (await runs.handle(client, rid).describe()).run_id != before_rewind

    cancelled = await http.post(
        f"/runs/{rid}/cancel", data={"csrf": token, "reason": "wrong vendor"}, headers=json_headers
    )
    assert cancelled.status_code == 200
    assert (await runs.wait_for_outcome(client, rid))["status"] == RunStatus.CANCELLED
    closed = await http.post(f"/runs/{rid}/pause", data={"csrf": token}, headers=json_headers)
    assert closed.status_code == 409 and "cancelled" in closed.json()["message"]
    final = await runs.get_state(client, rid)
    assert any(e.actor == "bob" and e.action == "cancel_requested" for e in final.audit)


async def test_a_removed_user_is_signed_out(console: LiveConsole) -> None:
    from durable_agents.console import users

    http, _ = await signed_in(console, "cfo")
    users.remove_user(console.settings.console_users_path, "cfo")
    assert (await http.get("/")).status_code == 303
    users.add_user(console.settings.console_users_path, "cfo", "cfo-password")


async def test_proxy_mode_believes_the_header_only_from_the_proxy(
    dev_env: WorkflowEnvironment, settings
) -> None:
    from tests.console.live import live_console

    proxied = settings.model_copy(
        update={"console_auth": "proxy", "console_trusted_proxies": ["127.0.0.1"]}
    )
    async with live_console(proxied, dev_env.client) as console:
        http = console.client()
        named = await http.get("/", headers={"X-Forwarded-User": "dana"})
        assert named.status_code == 200 and 'id="me">dana<' in named.text
        assert (await http.get("/")).status_code == 401
        login = await http.post("/login", data={"csrf": csrf_of(named.text)})
        assert login.status_code == 400

    elsewhere = settings.model_copy(
        update={"console_auth": "proxy", "console_trusted_proxies": ["10.9.8.7"]}
    )
    async with live_console(elsewhere, dev_env.client) as console:
        refused = await console.client().get("/", headers={"X-Forwarded-User": "dana"})
        assert refused.status_code == 401 and "dana" not in refused.text
        # Served as production serves it: a spoofed X-Forwarded-For makes no proxy.
        spoofed = {"X-Forwarded-User": "dana", "X-Forwarded-For": "10.9.8.7"}
        refused = await console.client().get("/", headers=spoofed)
        assert refused.status_code == 401 and "dana" not in refused.text


async def test_a_run_that_cannot_answer_still_lists_and_its_page_says_why(
    console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    from tests.conftest import start_wedged_run

    wedged = await start_wedged_run(dev_env.client, console.settings.task_queue)
    http, _ = await signed_in(console, "alice")
    listing = await http.get("/runs")
    assert listing.status_code == 200 and wedged.id in listing.text
    page = await http.get(f"/runs/{wedged.id}")
    assert page.status_code == 503 and "is wedged" in page.text
    assert (await http.get("/")).status_code == 200


async def test_the_inbox_and_runs_are_those_of_the_consoles_task_queue(
    console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    """Another app on the namespace (another task queue) has its own console: its runs are
    not listed here, nor asked for their summary."""
    from durable_agents.infra.stack import settings_env
    from durable_agents.worker.main import build_worker
    from tests.starters.test_verb_walk import agentctl

    client = dev_env.client
    ours = await waiting_payment(client, console.settings)
    other_settings = console.settings.model_copy(
        update={"task_queue": f"{console.settings.task_queue}-other"}
    )
    async with build_worker(client, other_settings):
        theirs = await waiting_payment(client, other_settings)
        http, _ = await signed_in(console, "alice")
        inbox, listed = (await http.get("/")).text, (await http.get("/runs")).text
        cli = await agentctl(settings_env(console.settings), "inbox", "--json")
        elsewhere = await agentctl(settings_env(other_settings), "inbox", "--json")
    assert ours.run_id in inbox and theirs.run_id not in inbox
    assert ours.run_id in listed and theirs.run_id not in listed
    assert [item["run_id"] for item in json.loads(cli.stdout)] == [ours.run_id]
    assert [item["run_id"] for item in json.loads(elsewhere.stdout)] == [theirs.run_id]
