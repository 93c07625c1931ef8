"""An MCP call goes through the store check like a tool's, against the real MCP test
server (tests/mcp/server.py over stdio): one that carries no count of the run's
transcript rows is refused, never taken as checked, and one whose count this store does
not hold waits; neither reaches the server, writes a row or a ledger entry. A count the
store holds is answered, so the refusals are the check's and not a server out of reach."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.mcp import UNCOUNTED, MCPActivities
from durable_agents.activities.store_holds import STORE_MISSING
from durable_agents.activities.stores import Stores
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.activity_io import ToolCallInput
from durable_agents.workflows.registry import AgentRegistry
from tests.mcp.test_mcp_tools import calls_at, stdio_agent

RUN = "mcp-held@first"


def charge(rows_written: int | None) -> ToolCallInput:
    """The server's `charge`, a side effect, as the workflow hands it to the activity."""
    return ToolCallInput(
        run_id=RUN,
        step=1,
        tool_call_id="call-1",
        name="charge",
        arguments={"amount": 5},
        result_seq=4,
        side_effect=True,
        agent="mcp-user",
        mcp="t",
        mcp_name="charge",
        rows_written=rows_written,
    )


# Each count the call carries, and the refusal's type (None: answered).
COUNTS = {
    "no count": (None, UNCOUNTED),
    "more than held": (3, STORE_MISSING),
    "none yet": (0, None),
}


@pytest.mark.parametrize("case", list(COUNTS))
async def test_an_mcp_call_is_answered_only_on_a_store_shown_to_hold_its_run(case, tmp_path):
    rows_written, refusal = COUNTS[case]
    settings = Settings(data_dir=tmp_path / "data")
    stores = Stores.open(settings)
    activities = MCPActivities(settings, stores, AgentRegistry().add(stdio_agent(tmp_path)))
    if refusal is None:
        outcome = await ActivityEnvironment().run(activities.call_mcp_tool, charge(rows_written))
        assert outcome.ok and outcome.summary == "charged 5 (charges: 1)"
        assert [c["tool"] for c in calls_at(tmp_path)] == ["charge"]
        return
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(activities.call_mcp_tool, charge(rows_written))
    err = raised.value
    assert err.type == refusal and "\n" not in err.message
    assert err.non_retryable == (refusal == UNCOUNTED)  # no worker could ever check it
    assert calls_at(tmp_path) == []
    assert stores.transcript.rows_of(RUN) == 0 and stores.ledger.effects(RUN) == []
