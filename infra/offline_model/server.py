"""The HTTP face of the offline model: POST /v1/chat/completions, GET /v1/models.

HTTP faults (429, 500, 401, delay) need memory of how often they already fired for
a run; that count is kept per (run, phase, turn) in this process.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse

from durable_agents.infra.offline_model import engine, streaming
from durable_agents.infra.offline_model.chat import StreamShape, chat_reply, stream_shape
from durable_agents.infra.offline_model.embeddings import embed
from durable_agents.infra.offline_model.loop import loop_reply
from durable_agents.infra.offline_model.scenarios import (
    ScenarioError,
    ScenarioSpec,
    generic_scenario,
    load,
)
from durable_agents.infra.offline_model.shapes import in_shape
from durable_agents.runtime.settings import OFFLINE_MODEL_NAME
from durable_agents.workflows.tools import SUBMIT_PLAN

OWNER = "durable-agents: scripted scenarios, not a language model"


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def create_app() -> FastAPI:
    app = FastAPI(title="durable-agents offline model (scripted)")
    fired: Counter[tuple[str, str, int, str]] = Counter()
    stats: Counter[str] = Counter()
    by_run: Counter[str] = Counter()
    served: list[dict[str, Any]] = []
    # Streams held after their first piece until a test releases them (the chat scenario's
    # `hold=NAME`): a reply caught mid-stream, by construction.
    holds: dict[str, asyncio.Event] = {}

    @app.post("/v1/scripted/holds/{name}")
    async def release(name: str) -> dict[str, Any]:
        holds.setdefault(name, asyncio.Event()).set()
        return {"released": name}

    def answer(
        body: dict[str, Any], completion: dict[str, Any], shape: StreamShape | None = None
    ) -> dict[str, Any] | StreamingResponse:
        """The completion whole, or streamed when the request asks (`"stream": true`)."""
        if not body.get("stream"):
            return completion
        stats["streams"] += 1
        shape = shape or StreamShape()
        after_first = None
        if shape.hold is not None:
            held = holds.setdefault(shape.hold, asyncio.Event())
            after_first = held.wait
            stats[f"held_{shape.hold}"] += 1
        options = body.get("stream_options") or {}
        events = streaming.chunks(
            completion,
            usage=bool(options.get("include_usage")),
            delay=shape.chunk_ms / 1000,
            after_first=after_first,
        )
        return StreamingResponse(events, media_type="text/event-stream")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"id": OFFLINE_MODEL_NAME, "object": "model", "created": 0, "owned_by": OWNER}
            ],
        }

    @app.get("/v1/scripted/stats")
    async def scripted_stats() -> dict[str, Any]:
        """Completions served, per run and one by one (run, seq, when): lets tests and the
        chaos run prove that no answer already stored was paid for again."""
        return {"totals": dict(stats), "completions_by_run": dict(by_run), "served": served}

    @app.post("/v1/embeddings", response_model=None)
    async def embeddings(request: Request) -> dict[str, Any] | JSONResponse:
        """OpenAI's embeddings shape, with deterministic vectors (offline_model/embeddings)."""
        try:
            body = await request.json()
            given = body["input"]
            texts = [given] if isinstance(given, str) else list(given)
            if not texts or not all(isinstance(t, str) for t in texts):
                raise ValueError
        except (ValueError, KeyError, TypeError):
            return _error(400, "invalid_request_error", "input must be a string or strings")
        stats["embeddings"] += len(texts)
        tokens = sum(len(t) // 4 + 1 for t in texts)
        return {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": embed(text)}
                for i, text in enumerate(texts)
            ],
            "model": body.get("model") or "offline-embeddings",
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    @app.post("/v1/chat/completions", response_model=None)
    async def completions(
        request: Request,
        x_run_label: str | None = Header(default=None),
        x_scenario: str | None = Header(default=None),
        x_agent_run: str | None = Header(default=None),
        x_agent_seq: int | None = Header(default=None),
        x_agent_name: str | None = Header(default=None),
        authorization: str | None = Header(default=None),
    ) -> dict[str, Any] | JSONResponse | StreamingResponse:
        stats["requests"] += 1
        if authorization:
            # Which key came, as a digest: tests prove the worker sent its key, and the
            # key itself is kept nowhere.
            stats[f"key_{key_digest(authorization.removeprefix('Bearer '))}"] += 1
        try:
            body = await request.json()
            messages = list(body["messages"])
        except (ValueError, KeyError, TypeError):
            return _error(400, "invalid_request_error", "body must be JSON with a messages list")
        goal = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
        run = x_agent_run or "-"
        try:
            # The run's label names the scenario (X-Scenario: what the benchmark's peers send).
            spec = ScenarioSpec.parse(
                _scripted_model(body) or x_run_label or x_scenario or "generic"
            )
            tools = [t["function"]["name"] for t in body.get("tools") or []]
            if spec.name == "judge":
                stats["completions"] += 1
                return answer(body, _completion(body, judge_reply(messages), [], messages))
            if spec.name in ("loop", "chat"):
                shape = stream_shape(spec) if spec.name == "chat" else None
                said = chat_reply(spec, messages, tools) if shape else loop_reply(spec, messages)
                turn = engine.Position(phase=spec.name, turn=len(messages), faults_so_far=0)
                stats["completions"] += 1
                by_run[run] += 1
                served.append({"run": run, "seq": x_agent_seq, "at": datetime.now(UTC).isoformat()})
                completion = _completion(
                    body, said.content, engine.render_calls(said, turn), messages
                )
                return answer(body, completion, shape)
            if spec.name == "generic" and tools and SUBMIT_PLAN not in tools:
                # A plain tool loop with no script: answered at once, as it would be finally.
                stats["completions"] += 1
                content = generic_scenario(goal).final.content
                return answer(body, _completion(body, content, [], messages))
            scenario = load(spec, goal).for_agent(x_agent_name)
        except ScenarioError as err:
            return _error(400, "invalid_request_error", str(err))
        where = engine.in_scenario(scenario, engine.position(messages))
        for fault in engine.http_faults(scenario, where):
            slot = (run, where.phase, where.turn, fault.kind)
            if fired[slot] >= fault.times:
                continue
            fired[slot] += 1
            stats[f"fault_{fault.kind}"] += 1
            if fault.kind == "delay":
                await asyncio.sleep(fault.delay_seconds)
                if await request.is_disconnected():
                    # The caller is gone (a killed worker): nothing is served, or paid for.
                    stats["abandoned"] += 1
                    return _error(499, "client_closed_request", "the caller went away")
                break
            return _http_fault(fault.kind, fault.retry_after_seconds)
        reply = engine.told_to_complete_step(messages) or engine.scripted_turn(
            scenario, where
        ).choose(engine.tool_results(messages), _instructions(messages))
        content_fault = engine.content_fault(scenario, where)
        finish_reason = None
        if content_fault is not None and content_fault.kind in engine.CUT_FAULTS:
            stats[f"fault_{content_fault.kind}"] += 1
            calls, content, finish_reason = [], engine.CUT_REPLY, content_fault.kind
        elif content_fault is not None:
            stats[f"fault_{content_fault.kind}"] += 1
            calls = [engine.render_fault(content_fault, reply, where, tools)]
            content = None
        else:
            calls = engine.render_calls(reply, where)
            content = reply.content
        stats["completions"] += 1
        by_run[run] += 1
        served.append({"run": run, "seq": x_agent_seq, "at": datetime.now(UTC).isoformat()})
        return answer(body, _completion(body, content, calls, messages, finish_reason))

    return app


def judge_reply(messages: list[Any]) -> str:
    """The scripted judge: PASS when the run played again answered and acted as it did
    (its THEN and NOW sections agree), else FAIL. A stand-in for a model's judgement."""
    text = str(messages[-1].get("content") or "") if messages else ""
    _, _, sides = text.partition("THEN:")
    then, _, now = sides.partition("NOW:")
    if then.strip() and then.strip() == now.strip():
        return "PASS"
    return "FAIL: the run played again answered or acted differently than it did."


def _instructions(messages: list[Any]) -> str:
    return " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")


def _scripted_model(body: dict[str, Any]) -> str | None:
    """A model named `scripted/SCENARIO` plays that scenario whatever the run's label
    says: a changed model, for a what-if."""
    model = body.get("model")
    if isinstance(model, str) and model.startswith(SCRIPTED_MODEL_PREFIX):
        return model.removeprefix(SCRIPTED_MODEL_PREFIX)
    return None


SCRIPTED_MODEL_PREFIX = "scripted/"


def _completion(
    body: dict[str, Any],
    content: str | None,
    calls: list[dict[str, Any]],
    messages: list[Any],
    finish_reason: str | None = None,
) -> dict[str, Any]:
    prompt_chars = sum(len(str(m.get("content") or "")) for m in messages)
    output_chars = len(content or "") + sum(len(c["function"]["arguments"]) for c in calls)
    cap = body.get("max_completion_tokens") or body.get("max_tokens")
    if isinstance(cap, int) and output_chars // 4 + 1 > cap:
        # As real endpoints do: the reply stops at the cap, mid-sentence, no tool call.
        content, calls, finish_reason = (content or "")[: max(0, cap - 1) * 4], [], "length"
        output_chars = len(content)
    if not calls:
        content = in_shape(content, messages)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    prompt_tokens, completion_tokens = prompt_chars // 4 + 1, output_chars // 4 + 1
    return {
        "id": f"chatcmpl-scripted-{len(messages)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or OFFLINE_MODEL_NAME,
        "system_fingerprint": "scripted",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _http_fault(kind: str, retry_after: float) -> JSONResponse:
    if kind == "429":
        response = _error(429, "rate_limit_exceeded", "scripted fault: rate limited")
        response.headers["Retry-After"] = f"{retry_after:g}"
        return response
    if kind == "401":
        return _error(401, "invalid_api_key", "scripted fault: invalid API key")
    return _error(500, "server_error", "scripted fault: internal error")


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(
        status_code=status,
        content={"error": {"message": message, "type": code, "code": code, "param": None}},
    )
