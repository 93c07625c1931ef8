"""The codec server: Temporal's remote codec protocol (POST /encode, /decode) over our keys,
so the Web UI and `temporal` CLI show decrypted payloads to those who hold the token.

Callers send `Authorization: Bearer <token>` (the CLI's `--codec-auth`); the server reads
the token from its environment or a file, never from its command line. The Web UI cannot
send a header without single sign-on, so it is given an endpoint carrying a token of its
own in its path, /ui/<ui token>: derived from the main one, accepted only on that path.
The dev server takes that endpoint as a flag, so the UI token is as visible as the local
Web UI itself; the main token never is.

No request can stall the server (issue 52: 8 MB of ~2.8 million empty payloads held its
event loop for 30 to 100 s, and hundreds of MB it never gave back). Bodies past
MAX_BODY_BYTES are refused unread; then, each checked before the work it bounds, a body
with more than MAX_JSON_VALUES values (counted without parsing), more than MAX_PAYLOADS
payloads, or more than MAX_PAYLOAD_BYTES in them is refused (413). So no request builds
more than a bounded set of objects, and memory comes back after it (`give_back` helps
glibc return it; a worker process per request would too, at a process start per Web UI
call). The parse, the codec and the answer run on one worker thread, so the event loop,
and /health, answer meanwhile.
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import hmac
import json
import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Literal

try:  # the [console] extra's: `python -m` without it says so in one line, no traceback
    import uvicorn
    from fastapi import FastAPI, Header, HTTPException, Request, Response
    from fastapi.middleware.cors import CORSMiddleware
except ModuleNotFoundError as err:
    from durable_agents.runtime.extras import import_failed

    raise import_failed(err, __name__, part="the codec server", extra="console") from None
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from durable_agents.runtime.encryption import EncryptionCodec, Keyring, KeyringError, keyring_from
from durable_agents.runtime.settings import Settings, load_settings

log = logging.getLogger("durable_agents.codec_server")
# The protocol's two calls, each a method of the codec.
Direction = Literal["encode", "decode"]
# Far above what the Web UI sends for one history page; a larger body is refused unread.
MAX_BODY_BYTES = 8 * 1024 * 1024
# The Web UI decodes one event's payloads, or at most one history page's, per call: a few
# to a few hundred payloads. Far above that, and far below the ~2.8 million empty payloads
# that 8 MB can carry, each of which costs the codec a Python object or three.
MAX_PAYLOADS = 10_000
# The payloads' own bytes (metadata and data, base64 undone): Temporal refuses a payload
# over 2 MB by default, so two of the largest fit.
MAX_PAYLOAD_BYTES = 4 * 1024 * 1024
# JSON values in a body, counted before parsing as its commas and colons (each value but
# the first follows one; base64 holds neither): MAX_PAYLOADS payloads of ten metadata
# entries each have fewer. It bounds what the JSON parser builds, and the time it holds
# the GIL, whatever the shape (millions of empty payloads, or one with a million entries).
MAX_JSON_VALUES = 25 * MAX_PAYLOADS
_LIBC = ctypes.CDLL(None)  # the C library this process runs on


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


def parse(body: bytes) -> list[Payload]:
    """The payloads of `{"payloads": [...]}`; a request past a cap is refused before it is
    parsed (values), before its payloads are converted (count), or before the codec sees
    them (bytes)."""
    if body.count(b",") + body.count(b":") > MAX_JSON_VALUES:
        raise HTTPException(413, f"over {MAX_JSON_VALUES:,} JSON values in one request")
    document = json.loads(body)
    items = document.get("payloads") if isinstance(document, dict) else None
    if isinstance(items, list) and len(items) > MAX_PAYLOADS:
        raise HTTPException(413, f"over {MAX_PAYLOADS:,} payloads in one request")
    payloads = json_format.ParseDict(document, Payloads())
    if payloads.ByteSize() > MAX_PAYLOAD_BYTES:
        raise HTTPException(413, f"payloads over {MAX_PAYLOAD_BYTES:,} bytes in one request")
    return list(payloads.payloads)


def give_back() -> None:
    """Hand freed heap pages back to the system (glibc's malloc_trim; elsewhere nothing):
    glibc keeps them for reuse. In the bench, after a payload with 125,000 metadata entries
    it took RSS from 17 MB above the figure before the request to 15 below; it changed
    nothing after the others. It costs a fraction of a millisecond."""
    trim = getattr(_LIBC, "malloc_trim", None)
    if trim is not None:
        trim(0)


def codec_app(keyring: Keyring, token: str, origins: list[str], ui: str | None = None) -> FastAPI:
    """`ui`: the Web UI's own token (AGENT_CODEC_UI_TOKEN), else one derived from `token`."""
    ui = ui or ui_token(token)
    codec = EncryptionCodec(keyring)
    # One thread: the work is Python under the GIL, so more threads would not go faster,
    # and one request's objects at a time bound the memory.
    worker = ThreadPoolExecutor(1, thread_name_prefix="codec")

    def work(body: bytes, direction: Direction) -> bytes:
        try:
            return convert_now(body, direction)
        finally:
            give_back()

    def convert_now(body: bytes, direction: Direction) -> bytes:
        """Parse, encode or decode, and serialize the answer: on `worker`, off the loop."""
        try:
            payloads = parse(body)
        except (ValueError, TypeError, RecursionError, json_format.ParseError) as err:
            raise HTTPException(400, f'expected {{"payloads": [...]}}: {err}') from err
        try:
            # The codec's methods never wait on anything: run one to its end on this thread.
            done = asyncio.run(getattr(codec, direction)(payloads))
        except KeyringError as err:
            raise HTTPException(422, str(err)) from err
        return json_format.MessageToJson(Payloads(payloads=done)).encode()

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
        body = await _body(request)
        done = await asyncio.get_running_loop().run_in_executor(worker, work, body, direction)
        return Response(done, media_type="application/json")

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
