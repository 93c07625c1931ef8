"""The codec server: Temporal's remote codec protocol (POST /encode, /decode) over our keys,
so the Web UI and `temporal` CLI show decrypted payloads to those who hold the token.

Callers send `Authorization: Bearer <token>` (the CLI's `--codec-auth`); the server reads
the token from its environment or a file, never from its command line. The Web UI cannot
send a header without single sign-on, so it is given an endpoint carrying a token of its
own in its path, /ui/<ui token>: derived from the main one, accepted only on that path.
The dev server takes that endpoint as a flag, so the UI token is as visible as the local
Web UI itself; the main token never is. Bodies past MAX_BODY_BYTES are refused (413).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import sys
from typing import Annotated, Literal

import uvicorn
from fastapi import FastAPI, Header, HTTPException, Request, Response
from fastapi.middleware.cors import CORSMiddleware
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from durable_agents.runtime.encryption import EncryptionCodec, Keyring, KeyringError, keyring_from
from durable_agents.runtime.settings import Settings, load_settings

log = logging.getLogger("durable_agents.codec_server")
# The protocol's two calls, each a method of the codec.
Direction = Literal["encode", "decode"]
# Far above what the Web UI sends for one history page; a larger body is refused unread.
MAX_BODY_BYTES = 8 * 1024 * 1024


def ui_token(token: str) -> str:
    """The Web UI's own token: whoever reads it from a process list cannot call /encode or
    /decode with it, only the UI's path."""
    return hmac.new(token.encode(), b"temporal-web-ui", hashlib.sha256).hexdigest()


async def _body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise HTTPException(413, f"request body over {MAX_BODY_BYTES:,} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise HTTPException(413, f"request body over {MAX_BODY_BYTES:,} bytes")
    return bytes(body)


def codec_app(keyring: Keyring, token: str, origins: list[str], ui: str | None = None) -> FastAPI:
    """`ui`: the Web UI's own token (AGENT_CODEC_UI_TOKEN), else one derived from `token`."""
    ui = ui or ui_token(token)
    codec = EncryptionCodec(keyring)
    app = FastAPI(title="durable-agents codec server", docs_url=None, redoc_url=None)
    app.add_middleware(
        CORSMiddleware,
        allow_origins=origins,
        allow_credentials=True,
        allow_methods=["POST", "OPTIONS"],
        allow_headers=["authorization", "content-type", "x-namespace"],
    )

    def check(given: str | None, expected: str = token) -> None:
        if given is None or not hmac.compare_digest(given.encode(), expected.encode()):
            raise HTTPException(status_code=401, detail="missing or wrong codec token")

    async def convert(request: Request, direction: Direction) -> Response:
        try:
            payloads = json_format.Parse(await _body(request), Payloads())
        except (json_format.ParseError, UnicodeDecodeError) as err:
            raise HTTPException(400, f'expected {{"payloads": [...]}}: {err}') from err
        try:
            done = await getattr(codec, direction)(list(payloads.payloads))
        except KeyringError as err:
            raise HTTPException(422, str(err)) from err
        body = json_format.MessageToJson(Payloads(payloads=done))
        return Response(body, media_type="application/json")

    def bearer(authorization: str | None) -> str | None:
        scheme, _, value = (authorization or "").partition(" ")
        return value.strip() if scheme.lower() == "bearer" else None

    @app.post("/{direction}")
    async def with_header(
        request: Request,
        direction: Direction,
        authorization: Annotated[str | None, Header()] = None,
    ) -> Response:
        check(bearer(authorization))
        return await convert(request, direction)

    @app.post("/ui/{path_token}/{direction}")
    async def with_path_token(request: Request, path_token: str, direction: Direction) -> Response:
        check(path_token, ui)
        if direction != "decode":
            # Whoever opens the Web UI sees its token: it may read payloads, never make them.
            raise HTTPException(status_code=403, detail="the Web UI's path decodes only")
        return await convert(request, direction)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}  # nothing about keys for a caller with no token

    return app


def ui_endpoint(settings: Settings, token: str) -> str:
    """What the Web UI is told to call (`--ui-codec-endpoint`)."""
    ui = settings.codec_ui_token.get_secret_value() if settings.codec_ui_token else None
    return f"{settings.codec_url}/ui/{ui or ui_token(token)}"


def app_from(settings: Settings) -> FastAPI:
    keyring = keyring_from(settings)
    if keyring is None:
        raise KeyringError("the codec server needs AGENT_ENCRYPTION_KEYS (or _FILE)")
    if settings.codec_token is None:
        raise KeyringError("the codec server needs AGENT_CODEC_TOKEN")
    token = settings.codec_token.get_secret_value()
    ui = settings.codec_ui_token.get_secret_value() if settings.codec_ui_token else None
    for name, value in (("AGENT_CODEC_TOKEN", token), ("AGENT_CODEC_UI_TOKEN", ui)):
        if value is not None and len(value.encode()) < MIN_TOKEN_BYTES:
            # An empty or short token would let anyone decrypt every payload.
            raise KeyringError(f"{name} must be at least {MIN_TOKEN_BYTES} bytes")
    if ui == token:
        raise KeyringError("AGENT_CODEC_UI_TOKEN must differ from AGENT_CODEC_TOKEN")
    return codec_app(keyring, token, settings.ui_origins, ui)


MIN_TOKEN_BYTES = 32


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = load_settings()
    try:
        app = app_from(settings)
    except KeyringError as err:
        print(f"codec server: {err}", file=sys.stderr)
        sys.exit(2)
    # Request lines would carry the UI's token in their path: keep access logs off.
    uvicorn.run(app, host=settings.codec_host, port=settings.codec_port, access_log=False)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
