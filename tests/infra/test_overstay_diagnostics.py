"""The diagnostics a CLI call that overstays leaves behind (tests/temporal_cli.py): the dev
server behind the call gets SIGQUIT, so its goroutine stacks reach the test's output."""

from __future__ import annotations

import asyncio

from temporalio.service import RPCError

from tests.temporal_cli import own_dev_server, quit_dev_servers


async def test_the_dev_server_behind_an_overstayed_call_is_found_and_told_to_dump(capfd):
    async with own_dev_server() as env:
        port = env.client.service_client.config.target_host.rpartition(":")[2]
        assert quit_dev_servers("1") == []  # no server on another port is touched
        [pid] = quit_dev_servers(port)
        for _ in range(100):  # Go prints every goroutine on SIGQUIT, then exits
            try:
                await env.client.count_workflows()
            except RPCError:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"dev server {pid} still answers after SIGQUIT")
    assert "goroutine " in capfd.readouterr().err  # where each goroutine of it waited
