"""A worker with no model configured says what to set: at its start (model_setup_hint, one
line), in the failing model call's error, and in `agentctl doctor`, which tells a team on
its own Temporal the settings rather than to start a second stack with `agentctl up`."""

from __future__ import annotations

import pytest
from pydantic import SecretStr
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.model import ModelActivities
from durable_agents.activities.model_setup import model_setup_hint
from durable_agents.activities.stores import Stores
from durable_agents.control.doctor import diagnose
from durable_agents.infra.offline_model.embedded import free_port
from durable_agents.runtime.settings import Settings
from tests.activities.test_model_activity import plan_call
from tests.conftest import EXAMPLE_AGENTS


def test_the_hint_is_one_line_only_when_no_model_answers(settings, model_server):
    nothing = settings.model_copy(update={"offline_model_port": free_port()})
    hint = model_setup_hint(nothing)
    assert hint is not None and "\n" not in hint
    assert hint.startswith("durable-agents: no model configured: set OPENAI_BASE_URL and ")
    assert "OPENAI_API_KEY" in hint and "AGENT_MODEL" in hint and "agentctl up" in hint
    # The offline model answering, or a real endpoint set: nothing to say.
    answering = settings.model_copy(update={"offline_model_port": model_server.port})
    assert model_setup_hint(answering) is None
    real = nothing.model_copy(
        update={"openai_base_url": "https://models.example/v1", "openai_api_key": SecretStr("k")}
    )
    assert model_setup_hint(real) is None


async def test_the_failing_model_call_says_what_to_set(tmp_path):
    nothing = Settings(data_dir=tmp_path, offline_model_port=free_port())
    model = ModelActivities(nothing, Stores.open(nothing), EXAMPLE_AGENTS)
    with pytest.raises(ApplicationError) as failed:
        await ActivityEnvironment().run(model.call_model, plan_call("no-model-1"))
    assert failed.value.type == "ModelUnavailable" and not failed.value.non_retryable
    assert "unreachable" in failed.value.message
    assert "no model configured: set OPENAI_BASE_URL" in failed.value.message


async def test_doctor_tells_a_team_on_its_own_temporal_the_settings(settings):
    # The dev server answers on the settings' address, and `agentctl up` did not start it.
    team = settings.model_copy(update={"offline_model_port": free_port()})
    finding = {f.part: f for f in await diagnose(team, only={"model"})}["model"]
    assert not finding.ok
    assert "OPENAI_BASE_URL" in finding.fix and "OPENAI_API_KEY" in finding.fix
    assert "agentctl up" not in finding.fix
    assert f"--port {team.offline_model_port}" in finding.fix
