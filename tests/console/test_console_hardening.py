"""The console as an attacker meets it: sessions the server ends (sign-out, a changed
password, a removed user), cookies tampered with, forged or expired, a wrong CSRF token,
sign-in floods throttled, another deployment's runs out of reach, short secrets refused,
and the safety headers on every response."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace

import httpx
import pytest
from itsdangerous import TimestampSigner, URLSafeTimedSerializer
from pydantic import SecretStr
from starlette.requests import Request
from temporalio.testing import WorkflowEnvironment

from durable_agents.console import sessions, throttle, users
from durable_agents.console.identity import SESSION_COOKIE, Identity, SecretTooShort, console_secret
from durable_agents.console.sessions import SignedOutSessions
from durable_agents.console.throttle import SignInThrottle, client_address
from durable_agents.control import runs
from durable_agents.runtime.encryption import KeyringError, new_key
from durable_agents.runtime.settings import Settings
from durable_agents.worker.codec_server import app_from
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.records import ApprovalStatus
from tests.conftest import run_id
from tests.console.live import PASSWORDS, LiveConsole, csrf_of, live_console, signed_in
from tests.console.runs_for_console import waiting_payment


def cookie_of(http: httpx.AsyncClient) -> str:
    value = http.cookies.get(SESSION_COOKIE)
    assert value, "no session cookie"
    return value


def with_cookie(console: LiveConsole, value: str) -> httpx.AsyncClient:
    """Another client, as someone who copied the cookie would be."""
    copy = console.client()
    copy.cookies.set(SESSION_COOKIE, value)
    return copy


async def test_a_session_ends_on_the_server_at_sign_out_and_with_the_password(
    console: LiveConsole,
) -> None:
    http, token = await signed_in(console, "alice")
    copied = cookie_of(http)
    assert (await with_cookie(console, copied).get("/")).status_code == 200
    assert (await http.post("/logout", data={"csrf": token})).status_code == 303
    # The copy taken before sign-out is refused after it, on every page.
    for page in ("/", "/runs"):
        assert (await with_cookie(console, copied).get(page)).status_code == 303, page

    # A changed password ends every session of the user's; a removed user's too.
    first, _ = await signed_in(console, "bob")
    second, _ = await signed_in(console, "bob")
    path = console.settings.console_users_path
    users.add_user(path, "bob", "a-new-password-for-bob")
    try:
        assert (await first.get("/")).status_code == 303
        assert (await second.get("/")).status_code == 303
    finally:
        users.add_user(path, "bob", PASSWORDS["bob"])
    cfo, _ = await signed_in(console, "cfo")
    users.remove_user(path, "cfo")
    try:
        assert (await cfo.get("/")).status_code == 303
    finally:
        users.add_user(path, "cfo", PASSWORDS["cfo"])


async def test_tampered_forged_and_expired_cookies_sign_nobody_in(console: LiveConsole) -> None:
    http, _ = await signed_in(console, "alice")
    genuine = cookie_of(http)
    payload, _, signature = genuine.rpartition(".")
    tampered = f"{payload}.{'A' if signature[0] != 'A' else 'B'}{signature[1:]}"
    forger = URLSafeTimedSerializer("not-the-console-secret-" * 2, salt="console-session")
    fields = {"csrf": "x" * 24, "sid": "forged", "user": "alice", "pw": "0" * 24, "flash": None}
    forged = forger.dumps(fields)
    secret = console_secret(console.settings)
    real = URLSafeTimedSerializer(secret, salt="console-session").loads(genuine)
    long_ago = URLSafeTimedSerializer(secret, salt="console-session", signer=SignedLongAgo)
    expired = long_ago.dumps(real)
    for name, value in {"tampered": tampered, "forged": forged, "expired": expired}.items():
        assert (await with_cookie(console, value).get("/")).status_code == 303, name
    assert (await with_cookie(console, genuine).get("/")).status_code == 200


class SignedLongAgo(TimestampSigner):
    """The console's own signature, dated past the session's lifetime (12 h)."""

    def get_timestamp(self) -> int:
        return int(time.time()) - 13 * 3600


async def test_a_wrong_csrf_token_changes_nothing(
    console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    state = await waiting_payment(dev_env.client, console.settings)
    http, token = await signed_in(console, "alice")
    _, other_token = await signed_in(console, "bob")
    request_id = state.pending_approvals[0].request_id
    for wrong in (other_token, token[:-1] + ("a" if token[-1] != "a" else "b"), "x"):
        form = {"csrf": wrong, "request_id": request_id, "decision": "approve"}
        refused = await http.post(f"/runs/{state.run_id}/decide", data=form)
        assert refused.status_code == 403, wrong
    after = await runs.get_state(dev_env.client, state.run_id)
    assert after.approvals[0].status is ApprovalStatus.PENDING


async def test_every_route_refuses_another_deployments_run(
    console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    elsewhere = run_id("elsewhere")
    await dev_env.client.start_workflow(
        "AgentWorkflow",
        RunRequest(goal="pay", label="pay-invoice"),
        id=elsewhere,
        task_queue=f"{console.settings.task_queue}-other-deployment",
    )
    http, token = await signed_in(console, "alice")
    for path in ("", "/panel", "/events"):
        page = await http.get(f"/runs/{elsewhere}{path}")
        assert page.status_code == 404, path
    forms = {
        "decide": {"request_id": "call-1", "decision": "approve"},
        "answer": {"question_id": "q", "answer": "yes"},
        "pause": {}, "resume": {}, "cancel": {},
        "budget": {"tool_calls": "9"},
        "edit": {"goal": "another"},
        "fork": {"moment": "1"},
        "rewind": {"moment": "1"},
    }  # fmt: skip
    for verb, form in forms.items():
        refused = await http.post(f"/runs/{elsewhere}/{verb}", data={"csrf": token, **form})
        assert refused.status_code == 404, (verb, refused.text[:200])
    await dev_env.client.get_workflow_handle(elsewhere).terminate("test done")


async def test_sign_in_is_throttled_per_name_and_per_address(
    dev_env: WorkflowEnvironment, settings
) -> None:
    limited = settings.model_copy(
        update={"console_signin_failures_per_name": 3, "console_signin_per_address_per_minute": 8}
    )
    async with live_console(limited, dev_env.client) as console:
        http = console.client()
        token = csrf_of((await http.get("/login")).text)
        codes = []
        for _ in range(4):
            wrong = {"csrf": token, "name": "alice", "password": "guess-guess"}
            codes.append((await http.post("/login", data=wrong)).status_code)
        assert codes == [401, 401, 401, 429]
        # The right password for that name is refused too while it is throttled.
        right = {"csrf": token, "name": "alice", "password": PASSWORDS["alice"]}
        assert (await http.post("/login", data=right)).status_code == 429
        # Another name goes on, until the address has had its share.
        bob = {"csrf": token, "name": "bob", "password": PASSWORDS["bob"]}
        assert (await http.post("/login", data=bob)).status_code == 303
        # Eight attempts a minute from one address, whatever the names: four were checked
        # so far (a refused attempt costs nothing, and counts for nothing).
        fresh = console.client()
        token = csrf_of((await fresh.get("/login")).text)
        codes = []
        for n in range(5):  # each claiming another address: the TCP peer's is what counts
            guess = {"csrf": token, "name": f"someone-{n}", "password": "guess-guess"}
            spoof = {"X-Forwarded-For": f"198.51.100.{n}"}
            codes.append((await fresh.post("/login", data=guess, headers=spoof)).status_code)
        assert codes == [401, 401, 401, 401, 429]
        last = await fresh.post("/login", data={**bob, "csrf": token})
        assert last.status_code == 429 and "too many sign-in attempts" in last.text
    # Behind a reverse proxy (this machine, trusted): a flood of wrong passwords for alice
    # from one client locks her out there, never where she signs in herself.
    proxied = limited.model_copy(update={"console_trusted_proxies": ["127.0.0.1"]})
    async with live_console(proxied, dev_env.client) as console:
        http = console.client()
        token = csrf_of((await http.get("/login")).text)
        guesser, alice = {"X-Forwarded-For": "198.51.100.7"}, {"X-Forwarded-For": "203.0.113.9"}
        wrong = {"csrf": token, "name": "alice", "password": "guess-guess"}
        codes = [
            (await http.post("/login", data=wrong, headers=guesser)).status_code for _ in range(4)
        ]
        assert codes == [401, 401, 401, 429]
        right = {"csrf": token, "name": "alice", "password": PASSWORDS["alice"]}
        assert (await http.post("/login", data=right, headers=guesser)).status_code == 429
        assert (await http.post("/login", data=right, headers=alice)).status_code == 303


async def test_safety_headers_and_secure_cookies(dev_env: WorkflowEnvironment, settings) -> None:
    secure = settings.model_copy(update={"console_secure_cookies": True})
    async with live_console(secure, dev_env.client) as console:
        http = console.client()
        for path in ("/login", "/health", "/static/console.css", "/nowhere"):
            response = await http.get(path)
            assert response.headers["x-frame-options"] == "DENY", path
            assert response.headers["x-content-type-options"] == "nosniff", path
            policy = response.headers["content-security-policy"]
            assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        login = await http.get("/login")
        assert "secure" in login.headers["set-cookie"].lower()


def test_short_secrets_are_refused_at_start_in_one_line(settings, tmp_path) -> None:
    for short in ("", "short-secret"):
        with pytest.raises(SecretTooShort, match="at least 32 bytes"):
            Identity(settings.model_copy(update={"console_secret": SecretStr(short)}))
    keys = SecretStr(f"k1={new_key()}")
    for short in ("", "x" * 31):
        codec = settings.model_copy(
            update={"encryption_keys": keys, "codec_token": SecretStr(short)}
        )
        with pytest.raises(KeyringError, match="at least 32 bytes"):
            app_from(codec)
    env = {"AGENT_DATA_DIR": str(tmp_path), "AGENT_CONSOLE_SECRET": "too-short", "PATH": ""}
    started = subprocess.run(
        [sys.executable, "-m", "durable_agents.console"],
        env=env, capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert started.returncode == 2
    assert started.stdout.strip().splitlines() == [
        "console: AGENT_CONSOLE_SECRET: the console secret must be at least 32 bytes "
        "(python -c 'import secrets; print(secrets.token_urlsafe(32))' makes one)"
    ]


def test_a_console_whose_stores_are_down_says_so_in_one_line(tmp_path) -> None:
    """Sign-outs are kept in our stores: without them no session could be checked, so
    the console does not start, and says why in one line (no traceback, no password)."""
    env = {
        "AGENT_DATA_DIR": str(tmp_path),
        "AGENT_DATABASE_URL": "postgresql://nobody:s3cret@127.0.0.1:1/none",
        "PATH": "",
    }
    started = subprocess.run(
        [sys.executable, "-m", "durable_agents.console"],
        env=env, capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert started.returncode == 2
    [line] = (started.stdout + started.stderr).strip().splitlines()
    assert line.startswith("console: our stores' database") and "refused" in line
    assert "s3cret" not in line


def test_a_sign_out_lasts_as_long_as_the_cookie_would(sql_database, monkeypatch):
    clock = [1_000_000.0]
    monkeypatch.setattr(sessions, "time", SimpleNamespace(time=lambda: clock[0]))
    ended = SignedOutSessions(sql_database)
    ended.end("copied-session", 12 * 3600)
    clock[0] += 11 * 3600  # a later sign-out sweeps the rows of expired cookies
    ended.end("another-session", 12 * 3600)
    assert ended.ended("copied-session"), "a cookie still valid for an hour was let in again"
    clock[0] += 2 * 3600  # past the cookie's own lifetime: its row may go
    ended.end("a-third-session", 12 * 3600)
    assert not ended.ended("copied-session")
    assert ended.ended("another-session")


def bare_request() -> Request:
    scope = {"type": "http", "method": "POST", "path": "/login", "headers": [],
             "query_string": b"", "client": ("127.0.0.1", 5000)}  # fmt: skip
    return Request(scope)


def test_sign_in_gives_a_new_csrf_token(tmp_path):
    settings = Settings(data_dir=tmp_path)
    users.add_user(settings.console_users_path, "alice", "alice-password")
    identity = Identity(settings)
    request = bare_request()
    before = identity.session(request).csrf  # the login page's token, seen by anyone there
    session = identity.sign_in(request, "alice")
    assert session.user == "alice" and session.csrf != before
    assert identity.csrf_ok(request, session.csrf)
    assert not identity.csrf_ok(request, before)


def test_a_names_lockout_lasts_fifteen_minutes_for_the_client_that_failed(monkeypatch):
    clock = [5_000.0]
    monkeypatch.setattr(throttle, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    guard = SignInThrottle(per_address_per_minute=1000, failures_per_name=3)
    for _ in range(3):
        assert guard.refusal("alice", "198.51.100.7") is None
        guard.failed("alice", "198.51.100.7")
    clock[0] += 14 * 60  # fourteen minutes on
    said = guard.refusal("alice", "198.51.100.7")
    assert said is not None and "try again in 61 s" in said
    # The person with the right password, from their own client, is not locked out.
    assert guard.refusal("alice", "203.0.113.9") is None
    assert guard.refusal("bob", "198.51.100.7") is None  # the name is locked, not everyone
    clock[0] += 60  # fifteen minutes after the failures
    assert guard.refusal("alice", "198.51.100.7") is None


def test_behind_a_trusted_proxy_the_client_is_the_one_it_forwarded_for():
    proxies = ["10.0.0.2"]
    assert client_address("10.0.0.2", "198.51.100.1, 203.0.113.9", proxies) == "203.0.113.9"
    assert client_address("10.0.0.2", None, proxies) == "10.0.0.2"
    # Anyone else's X-Forwarded-For is their own claim: the peer counts.
    assert client_address("192.0.2.4", "203.0.113.9", proxies) == "192.0.2.4"
    assert client_address(None, "203.0.113.9", proxies) == "?"
