"""The codec server over real HTTP: Temporal's remote codec protocol, a bearer token, CORS
for the Web UI's origin, and the caps that keep one request from stalling it (issue 52).

Most tests run the server as `agentctl up` does, in a process of its own. Those that must
see inside a request (was anything decrypted? is a decode under way right now?) serve the
same app with real uvicorn on a thread of the test, over a keyring that reports its use."""

from __future__ import annotations

import base64
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import httpx
import pytest
import uvicorn
from google.protobuf import json_format

from bench.codec_server_stall import attack_body, largest_body, one_wide_payload, rss_mb, sealed
from durable_agents.infra.offline_model.embedded import free_port
from durable_agents.runtime.encryption import Keyring, new_key
from durable_agents.worker.codec_server import (
    MAX_BODY_BYTES,
    MAX_JSON_VALUES,
    MAX_PAYLOAD_BYTES,
    MAX_PAYLOADS,
    codec_app,
    ui_token,
)

TOKEN = "codec-test-token-of-32-bytes-or-more-0123"
UI_ORIGIN = "http://127.0.0.1:8233"
KEYS = f"k1={new_key()}"
PLAIN = {
    "metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
    "data": base64.b64encode(b'"the customer said hello"').decode(),
}


@pytest.fixture(scope="module")
def codec_server(tmp_path_factory):
    port = free_port()
    env = {
        "AGENT_ENCRYPTION_KEYS": KEYS,
        "AGENT_CODEC_TOKEN": TOKEN,
        "AGENT_CODEC_PORT": str(port),
        "AGENT_DATA_DIR": str(tmp_path_factory.mktemp("codec")),
        "PATH": "/usr/bin:/bin",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "durable_agents.worker.codec_server"], env=env
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            httpx.get(f"{url}/health", timeout=1).raise_for_status()
            break
        except httpx.HTTPError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("codec server did not start") from None
            time.sleep(0.1)
    yield url, process
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(scope="module")
def codec_url(codec_server):
    return codec_server[0]


def post(url, path, body, **headers):
    return httpx.post(f"{url}{path}", json=body, headers=headers, timeout=5)


def test_encode_then_decode_with_the_token(codec_url):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    encoded = post(codec_url, "/encode", {"payloads": [PLAIN]}, **auth)
    assert encoded.status_code == 200
    [sealed] = encoded.json()["payloads"]
    assert base64.b64decode(sealed["metadata"]["encoding"]) == b"binary/encrypted"
    assert b"hello" not in base64.b64decode(sealed["data"])

    decoded = post(codec_url, "/decode", {"payloads": [sealed]}, **auth)
    assert decoded.json() == {"payloads": [PLAIN]}
    # The Web UI's endpoint carries a token of its own in its path.
    assert post(codec_url, f"/ui/{ui_token(TOKEN)}/decode", {"payloads": [sealed]}).json() == {
        "payloads": [PLAIN]
    }


@pytest.mark.parametrize(
    "path, headers",
    [
        ("/decode", {}),
        ("/decode", {"Authorization": "Bearer wrong"}),
        ("/decode", {"Authorization": TOKEN}),  # not a bearer
        ("/ui/wrong/decode", {}),
        ("/encode", {}),
        (f"/ui/{TOKEN}/decode", {}),  # the main token is not the UI's
        ("/decode", {"Authorization": f"Bearer {ui_token(TOKEN)}"}),  # nor the other way
    ],
)
def test_a_request_without_the_token_is_refused(codec_url, path, headers):
    response = post(codec_url, path, {"payloads": [PLAIN]}, **headers)
    assert response.status_code == 401
    assert "codec token" in response.json()["detail"]


def test_bad_bodies_get_a_clear_error(codec_url):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    response = httpx.post(f"{codec_url}/decode", content=b"not json", headers=auth, timeout=5)
    assert response.status_code == 400 and "payloads" in response.json()["detail"]
    foreign = {
        "metadata": {
            "encoding": base64.b64encode(b"binary/encrypted").decode(),
            "encryption-key-id": base64.b64encode(b"gone").decode(),
        },
        "data": base64.b64encode(b"x" * 40).decode(),
    }
    response = post(codec_url, "/decode", {"payloads": [foreign]}, **auth)
    assert response.status_code == 422 and "'gone'" in response.json()["detail"]


def test_cors_lets_the_web_ui_in_and_no_one_else(codec_url):
    def preflight(origin):
        return httpx.options(
            f"{codec_url}/decode",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,x-namespace,authorization",
            },
            timeout=5,
        )

    allowed = preflight(UI_ORIGIN)
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == UI_ORIGIN
    assert "access-control-allow-origin" not in preflight("http://evil.example").headers


def sealed_with(key_id: bytes, data: bytes) -> dict[str, object]:
    return {
        "metadata": {
            "encoding": base64.b64encode(b"binary/encrypted").decode(),
            "encryption-key-id": base64.b64encode(key_id).decode(),
        },
        "data": base64.b64encode(data).decode(),
    }


@pytest.mark.parametrize(
    "payload, says",
    [
        (sealed_with(b"\xff\xfe", b"x" * 40), "not among the configured keys"),
        (sealed_with(b"k1", b"short"), "too short"),
        (sealed_with(b"k1", b"x" * 40), "does not decrypt"),
    ],
    ids=["non-utf8 key id", "shorter than a nonce", "altered"],
)
def test_payloads_that_cannot_decrypt_are_a_4xx_not_a_500(codec_url, payload, says):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    response = post(codec_url, "/decode", {"payloads": [payload]}, **auth)
    assert response.status_code == 422 and says in response.json()["detail"]


def test_a_body_past_the_limit_is_refused_unread(codec_url):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    huge = b'{"payloads": [' + b" " * MAX_BODY_BYTES + b"]}"
    response = httpx.post(f"{codec_url}/decode", content=huge, headers=auth, timeout=30)
    assert response.status_code == 413


def test_health_tells_a_caller_with_no_token_nothing_about_keys(codec_url):
    assert httpx.get(f"{codec_url}/health", timeout=5).json() == {"status": "ok"}


@dataclass(frozen=True)
class WatchedKeyring(Keyring):
    """Notes each use; while `gate` is clear, a decrypt waits for it, having said so."""

    uses: list[str] = field(default_factory=list)
    decrypting: threading.Event = field(default_factory=threading.Event)
    gate: threading.Event = field(default_factory=threading.Event)

    def encrypt(self, plaintext: bytes, bound_to: bytes | None = None) -> tuple[str, bytes]:
        self.uses.append("encrypt")
        return super().encrypt(plaintext, bound_to)

    def decrypt(self, key_id: str, data: bytes, bound_to: bytes | None = None) -> bytes:
        self.uses.append("decrypt")
        self.decrypting.set()
        assert self.gate.wait(timeout=120), "the test never opened the gate"
        return super().decrypt(key_id, data, bound_to)


@pytest.fixture
def watched():
    """The codec server's app, served by uvicorn on a thread, over a WatchedKeyring."""
    parsed = Keyring.parse(KEYS)
    keyring = WatchedKeyring(parsed.keys, parsed.active)
    keyring.gate.set()
    port = free_port()
    config = uvicorn.Config(
        codec_app(keyring, TOKEN, [UI_ORIGIN]), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "codec server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", keyring
    keyring.gate.set()
    server.should_exit = True
    thread.join(timeout=30)


def sealed_body(count: int, size: int, then: bytes = b"") -> bytes:
    """`count` payloads sealed with KEYS, `size` bytes of data each, then `then` (if any)
    before the list closes."""
    one = json_format.MessageToJson(sealed(Keyring.parse(KEYS), size), indent=None)
    return b'{"payloads": [' + b", ".join([one.encode()] * count) + then + b"]}"


@pytest.mark.parametrize(
    "body, says",
    [
        # The attack: 8 MB of empty payloads. Counted before parsing: what follows the cap
        # is not JSON, and the answer is still the cap's.
        (attack_body().replace(b"{}]}", b"nope"), "JSON values"),
        # Counted before any is converted: the last is not a payload, and the answer is
        # still the cap's.
        (sealed_body(MAX_PAYLOADS, 10, then=b', {"data": "not base64!"}'), "payloads"),
        # Measured before the codec sees them: nothing is decrypted.
        (sealed_body(3, MAX_PAYLOAD_BYTES // 3 + 1), "bytes"),
    ],
    ids=["values", "count", "bytes"],
)
@pytest.mark.parametrize("direction", ["decode", "encode"])
def test_a_request_past_a_cap_is_refused_with_the_reason_and_changes_nothing(
    watched, body, says, direction
):
    url, keyring = watched
    assert len(body) <= MAX_BODY_BYTES
    auth = {"Authorization": f"Bearer {TOKEN}"}
    response = httpx.post(f"{url}/{direction}", content=body, headers=auth, timeout=60)
    assert response.status_code == 413
    [reason] = response.json().values()
    assert says in reason and "\n" not in reason
    assert keyring.uses == []  # the codec never ran
    # And the server answers as before.
    assert httpx.get(f"{url}/health", timeout=10).json() == {"status": "ok"}
    one = sealed_body(1, 10)
    assert httpx.post(f"{url}/decode", content=one, headers=auth, timeout=10).status_code == 200


def test_the_caps_let_in_the_largest_request_they_allow(watched):
    url, keyring = watched
    body = largest_body(Keyring.parse(KEYS))
    assert body.count(b",") + body.count(b":") <= MAX_JSON_VALUES
    auth = {"Authorization": f"Bearer {TOKEN}"}
    response = httpx.post(f"{url}/decode", content=body, headers=auth, timeout=120)
    assert response.status_code == 200
    assert len(response.json()["payloads"]) == MAX_PAYLOADS == keyring.uses.count("decrypt")


def test_health_answers_while_the_largest_request_is_being_decoded(watched):
    url, keyring = watched
    body = largest_body(Keyring.parse(KEYS))
    keyring.gate.clear()  # the decode starts, then waits for the gate
    answer: list[httpx.Response] = []
    sender = threading.Thread(
        target=lambda: answer.append(
            httpx.post(f"{url}/ui/{ui_token(TOKEN)}/decode", content=body, timeout=120)
        )
    )
    sender.start()
    try:
        assert keyring.decrypting.wait(timeout=60)
        # The decode is under way, and cannot end before the gate opens: a decode on the
        # event loop would hold it, and /health would not answer.
        assert httpx.get(f"{url}/health", timeout=10).json() == {"status": "ok"}
        assert sender.is_alive() and keyring.uses == ["decrypt"]
    finally:
        keyring.gate.set()
        sender.join(timeout=120)
    assert answer[0].status_code == 200
    assert len(answer[0].json()["payloads"]) == MAX_PAYLOADS


def test_memory_comes_back_after_the_largest_requests(codec_server):
    url, process = codec_server
    auth = {"Authorization": f"Bearer {TOKEN}"}
    before = rss_mb(process.pid)
    for body, status in [
        (attack_body(), 413),
        (largest_body(Keyring.parse(KEYS)), 200),
        (one_wide_payload(), 200),
    ]:
        response = httpx.post(f"{url}/decode", content=body, headers=auth, timeout=120)
        assert response.status_code == status
    # Uncapped, the attack alone kept 370 MB. The issue asks for 50 MB at most; the three
    # leave about 12 here, and about 45 without `give_back`, so hold 30 to see it go.
    assert rss_mb(process.pid) - before < 30
