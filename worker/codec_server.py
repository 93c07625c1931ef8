"""The codec server: Temporal's remote codec protocol (POST /encode, /decode) over our keys,
so the Web UI and `temporal` CLI show decrypted payloads to those who hold the token.

Callers send `Authorization: Bearer <token>` (the CLI's `--codec-auth`). The Web UI
cannot send a header without single sign-on, so it is given an endpoint carrying the
token in its path, /ui/<token>; serve that only where the UI's users may read payloads.
"""

from __future__ import annotations

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

from worker.encryption import EncryptionCodec, Keyring, KeyringError, keyring_from
from worker.settings import Settings, load_settings

log = logging.getLogger("durable_agents.codec_server")
# The protocol's two calls, each a method of the codec.
Direction = Literal["encode", "decode"]


def codec_app(keyring: Keyring, token: str, origins: list[str]) -> FastAPI:
    codec = EncryptionCodec(keyring)
    app = FastAPI(title="durable-agents codec server", docs_url=None, redoc_url=None)
    app.add_middleware(
        CORSMiddleware,
        allow_origins=origins,
        allow_credentials=True,
        allow_methods=["POST", "OPTIONS"],
        allow_headers=["authorization", "content-type", "x-namespace"],
    )

    def check(given: str | None) -> None:
        if given is None or not hmac.compare_digest(given.encode(), token.encode()):
            raise HTTPException(status_code=401, detail="missing or wrong codec token")

    async def convert(request: Request, direction: Direction) -> Response:
        try:
            payloads = json_format.Parse(await request.body(), Payloads())
        except json_format.ParseError as err:
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
        check(path_token)
        return await convert(request, direction)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok", "active_key": keyring.active}

    return app


def ui_endpoint(settings: Settings, token: str) -> str:
    """What the Web UI is told to call (`--ui-codec-endpoint`)."""
    return f"{settings.codec_url}/ui/{token}"


def app_from(settings: Settings) -> FastAPI:
    keyring = keyring_from(settings)
    if keyring is None:
        raise KeyringError("the codec server needs AGENT_ENCRYPTION_KEYS (or _FILE)")
    if settings.codec_token is None:
        raise KeyringError("the codec server needs AGENT_CODEC_TOKEN")
    return codec_app(keyring, settings.codec_token.get_secret_value(), settings.ui_origins)


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
