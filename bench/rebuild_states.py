"""Every state of a run rebuilt in a process of its own, as `agentctl` or the console
would: prints {"states": N, "seconds": S} for the rebuild alone (connecting and
importing excluded). The Temporal address comes from AGENT_TEMPORAL_HOST/PORT.

Usage: python -m bench.rebuild_states RUN_ID
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from durable_agents.control.timeline import rebuild
from durable_agents.runtime import exiting
from durable_agents.runtime.client import connect
from durable_agents.runtime.settings import load_settings


async def timed(run_id: str) -> dict[str, float]:
    client = await connect(load_settings())
    started = time.perf_counter()
    found = await rebuild(client, run_id)
    seconds = time.perf_counter() - started
    if not all(moment.state_json for moment in found.moments):
        raise SystemExit(f"{run_id}: a state was not rebuilt")
    return {"states": len(found.moments), "seconds": seconds}


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(json.dumps(asyncio.run(timed(sys.argv[1]))))
    exiting.leave(0)


if __name__ == "__main__":
    main()
