"""`agentctl run` links the run in the Web UI of the server it started it on, or not at all.
Against a team's own Temporal server, reached through TEMPORAL_ADDRESS as its `temporal`
CLI reaches it, our Web UI port (8233 by default) belongs to no one: a link there would
send the reader to the wrong place, or to nothing."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from typer.testing import CliRunner

from durable_agents.infra.stack import settings_env
from durable_agents.runtime.settings import Settings
from durable_agents.starters.cli import app
from durable_agents.starters.cli_runs import web_ui_link
from tests.conftest import run_id

LINK = re.compile(r"\(http://\S+\)")


def agentctl_run(env: Mapping[str, str | None], rid: str) -> str:
    """`agentctl run` as a person types it, with this environment: what it printed."""
    args = ["run", "Pay INV-1001", "--agent", "invoice", "--label", "pay-invoice", "--id", rid]
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return " ".join(result.stdout.split())  # rich wraps long lines


async def test_on_the_server_our_settings_name_the_link_is_its_web_ui(settings, worker):
    rid = run_id("link")
    said = await asyncio.to_thread(agentctl_run, settings_env(settings), rid)
    ui = f"http://{settings.temporal_host}:{settings.temporal_ui_port}"
    assert f"started run {rid} ({ui}/namespaces/{settings.namespace}/workflows/{rid})" in said


async def test_on_a_server_reached_through_temporal_address_no_link_is_made_up(settings, worker):
    ours = {name: None for name in settings_env(settings) if name.startswith("AGENT_TEMPORAL")}
    env = settings_env(settings) | ours | {"AGENT_NAMESPACE": None}
    env |= {"TEMPORAL_ADDRESS": settings.temporal_address, "TEMPORAL_NAMESPACE": settings.namespace}
    rid = run_id("nolink")
    said = await asyncio.to_thread(agentctl_run, env, rid)
    assert f"started run {rid}" in said
    assert not LINK.search(said), said


def reached(address: str, namespace: str = "default") -> Any:
    """A client as far as the link reads it: the server it reached, and the namespace."""
    return SimpleNamespace(
        service_client=SimpleNamespace(config=SimpleNamespace(target_host=address)),
        namespace=namespace,
    )


def test_a_teams_host_in_our_settings_gets_a_link_only_with_its_web_ui_port():
    guessed = Settings(temporal_host="temporal.example.com")
    assert web_ui_link(reached("temporal.example.com:7233"), guessed, "r1") == ""
    given = Settings(temporal_host="temporal.example.com", temporal_ui_port=8080)
    link = web_ui_link(reached("temporal.example.com:7233"), given, "r1")
    assert link == "  (http://temporal.example.com:8080/namespaces/default/workflows/r1)"
    # Another namespace than the one the link would name: none.
    assert web_ui_link(reached("temporal.example.com:7233", "billing"), given, "r1") == ""
