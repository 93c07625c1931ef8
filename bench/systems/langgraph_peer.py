"""LangGraph with SqliteSaver, in process: a model node calling the offline model through
the openai client with the whole conversation, a tool node, a checkpoint after each.
Other guarantees than Temporal's (one process, no worker fleet), but the storage users
compare with. Storage is what SqliteSaver keeps for the thread: checkpoints and writes."""

from __future__ import annotations

import asyncio
import json
import operator
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from openai import OpenAI

from bench.systems.common import (
    LOOP_TOOL_SCHEMA,
    Options,
    log,
    new_id,
    parse_options,
    peak_rss_mb,
    report,
    steps_per_second,
)

TOOLS = [LOOP_TOOL_SCHEMA]


class LoopState(TypedDict):
    scenario: str
    messages: Annotated[list[dict[str, Any]], operator.add]


def record_progress(step: int, note: str) -> str:
    return f"recorded step {step}: {note}"


class LangGraphLoop:
    def __init__(self, options: Options, db_path: Path) -> None:
        self.options = options
        self.model = OpenAI(base_url=options.model_url, api_key="offline")
        self.connection = sqlite3.connect(db_path, check_same_thread=False)
        graph = StateGraph(LoopState)
        graph.add_node("model", self._model)
        graph.add_node("tools", self._tools)
        graph.add_edge(START, "model")
        graph.add_conditional_edges("model", self._route, ["tools", END])
        graph.add_edge("tools", "model")
        self.graph = graph.compile(checkpointer=SqliteSaver(self.connection))

    def _model(self, state: LoopState) -> dict[str, Any]:
        reply = self.model.chat.completions.create(
            model="offline",
            messages=state["messages"],  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            extra_headers={"X-Scenario": state["scenario"]},
        )
        return {"messages": [reply.choices[0].message.model_dump(exclude_none=True)]}

    def _tools(self, state: LoopState) -> dict[str, Any]:
        calls = state["messages"][-1]["tool_calls"]
        return {
            "messages": [
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": record_progress(**json.loads(call["function"]["arguments"])),
                }
                for call in calls
            ]
        }

    @staticmethod
    def _route(state: LoopState) -> str:
        return "tools" if state["messages"][-1].get("tool_calls") else END

    def config(self, thread_id: str, steps: int) -> Any:
        return {"configurable": {"thread_id": thread_id}, "recursion_limit": 2 * steps + 10}

    def run(self, steps: int, thread_id: str) -> None:
        start = {
            "scenario": self.options.scenario(steps),
            "messages": [{"role": "user", "content": "Record every work item."}],
        }
        final = self.graph.invoke(start, self.config(thread_id, steps))
        done = sum(1 for m in final["messages"] if m["role"] == "tool")
        if done != steps:
            raise RuntimeError(f"thread {thread_id} did {done} of {steps} steps")

    def stored_bytes(self, thread_id: str) -> int:
        (checkpoints,) = self.connection.execute(
            "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) "
            "FROM checkpoints WHERE thread_id = ?",
            (thread_id,),
        ).fetchone()
        (writes,) = self.connection.execute(
            "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes WHERE thread_id = ?",
            (thread_id,),
        ).fetchone()
        return int(checkpoints) + int(writes)

    def rebuild(self, thread_id: str, steps: int) -> int:
        return sum(1 for _ in self.graph.get_state_history(self.config(thread_id, steps)))


async def figures(options: Options) -> dict[str, Any]:
    name = "langgraph"
    with tempfile.TemporaryDirectory() as tmp:
        loop = LangGraphLoop(options, Path(tmp) / "checkpoints.sqlite")

        async def one(steps: int) -> None:
            await asyncio.to_thread(loop.run, steps, new_id(name))

        result: dict[str, Any] = {"system": name}
        result["steps_per_s_1"] = await steps_per_second(one, 1, options.steps)
        result["steps_per_s_many"] = await steps_per_second(one, options.concurrent, options.steps)
        log(
            name,
            f"steps/s: {result['steps_per_s_1']:.1f} (1 run), "
            f"{result['steps_per_s_many']:.1f} ({options.concurrent} runs)",
        )
        result["bytes_per_step"] = {}
        for steps in options.size_steps:
            thread_id = new_id(name)
            loop.run(steps, thread_id)
            result["bytes_per_step"][steps] = loop.stored_bytes(thread_id) / steps
            log(name, f"{steps} steps: {result['bytes_per_step'][steps]:,.0f} B/step")
        thread_id = new_id(name)
        loop.run(options.fail_steps, thread_id)
        size = loop.stored_bytes(thread_id)
        log(name, f"{options.fail_steps} steps completed ({size:,} B of checkpoints)")
        result["fails_at"] = {"steps": None, "error": None, "tried": options.fail_steps}
        thread_id = new_id(name)
        loop.run(options.rebuild_steps, thread_id)
        started = time.perf_counter()
        states = loop.rebuild(thread_id, options.rebuild_steps)
        seconds = time.perf_counter() - started
        log(name, f"rebuilt {states} checkpoints of a {options.rebuild_steps}-step run")
        result["rebuild"] = {"seconds": seconds, "note": f"{states} states"}
        loop.connection.close()
    result["peak_rss_mb"] = peak_rss_mb()
    return result


if __name__ == "__main__":
    report(asyncio.run(figures(parse_options(__doc__ or ""))))
