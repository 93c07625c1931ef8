"""The codec server over real HTTP: Temporal's remote codec protocol, a bearer token, CORS
for the Web UI's origin."""

from __future__ import annotations

import base64
import subprocess
import sys
import time

import httpx
import pytest

from durable_agents.infra.offline_model.embedded import free_port
from durable_agents.runtime.encryption import new_key
from durable_agents.worker.codec_server import MAX_BODY_BYTES, ui_token

TOKEN = "codec-test-token-of-32-bytes-or-more-0123"
UI_ORIGIN = "http://127.0.0.1:8233"
PLAIN = {
    "metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
    "data": base64.b64encode(b'"the customer said hello"').decode(),
}


@pytest.fixture(scope="module")
def codec_url(tmp_path_factory):
    port = free_port()
    env = {
        "AGENT_ENCRYPTION_KEYS": f"k1={new_key()}",
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
    yield url
    process.terminate()
    process.wait(timeout=10)


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
