"""What DurableAgentsPlugin keeps and refuses wherever it stands among a client's, a
worker's or a Replayer's plugins: failure messages sealed with the payloads, a converter
that cannot refuse what the worker's codec hands on refused at the worker, sealing never
dropped by a plugin after ours, a Replayer taking plugins in either order, and a team
activity under one of our names refused with the way out."""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import pytest
from pydantic import SecretStr
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio import activity
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import DataConverter, DefaultFailureConverterWithEncodedAttributes
from temporalio.exceptions import ApplicationError
from temporalio.openai_agents import OpenAIAgentsPlugin
from temporalio.openai_agents._temporal_openai_agents import OpenAIPayloadConverter
from temporalio.plugin import SimplePlugin
from temporalio.worker import Replayer, Worker

from durable_agents import Agent, DurableAgentsPlugin, PluginError, Settings, tool
from durable_agents.client import AgentClient
from durable_agents.runtime.client import data_converter
from durable_agents.runtime.encryption import ENCODING, new_key
from durable_agents.testing import ScriptedModel, call, say
from durable_agents.worker.activities import production_activities
from durable_agents.worker.converter import check_carries_agents
from durable_agents.worker.plugin import replayer_plugins

SECRET = "card 4242 declined for alice@example.com"


@tool
def charge(customer: str) -> str:
    """Charge a customer."""
    raise ApplicationError(SECRET, non_retryable=True)


charger = Agent(name="charger", instructions="Charge.", planning=False, tools=[charge])


def settings(tmp_path, queue: str, *, sealed: bool) -> Settings:
    keys = SecretStr(f"k1={new_key()}") if sealed else None
    return Settings(
        data_dir=tmp_path, task_queue=queue, metrics_port=0, encryption_keys=keys,
        namespace_is_ours_alone=True,
    )  # fmt: skip


def ours(tmp_path, queue: str, model: ScriptedModel, *, sealed: bool) -> DurableAgentsPlugin:
    return DurableAgentsPlugin(
        [charger],
        settings=settings(tmp_path, queue, sealed=sealed),
        activities=partial(production_activities, model_clients=lambda s, m: model),
    )


async def connect(env, plugins: list[Any]) -> Client:
    return await Client.connect(
        env.client.service_client.config.target_host,
        namespace=env.client.namespace,
        plugins=plugins,
        runtime=env.client.config().get("runtime"),
    )


def swap_converter() -> SimplePlugin:
    """A plugin after ours that sets the pydantic converter over whatever is there (the
    codec kept, our refusals not)."""
    return SimplePlugin(
        "team.swap",
        data_converter=lambda c: dataclasses.replace(
            c or DataConverter.default, payload_converter_class=PydanticPayloadConverter
        ),
    )


ORDERS = ["ours", "ours-then-pydantic-ai", "pydantic-ai-then-ours"]


@pytest.mark.parametrize("order", ORDERS)
async def test_with_keys_a_failing_tools_message_reaches_the_server_sealed(
    own_clock, tmp_path, order
):
    """A tool's error message (an address, a card number) is as private as its input: with
    keys set the history holds "Encoded failure", whichever plugins share the client."""
    queue = f"failures-{order}"
    model = ScriptedModel([call("charge", customer="alice"), say("could not charge")])
    plugin = ours(tmp_path, queue, model, sealed=True)
    plugins = {
        "ours": [plugin],
        "ours-then-pydantic-ai": [plugin, PydanticAIPlugin()],
        "pydantic-ai-then-ours": [PydanticAIPlugin(), plugin],
    }[order]
    client = await connect(own_clock, plugins)
    failures = client.data_converter.failure_converter_class
    assert failures is DefaultFailureConverterWithEncodedAttributes
    async with Worker(client, task_queue=queue):
        run = await AgentClient(client, plugin.settings, plugin.registry).start("charger", "go")
        assert (await run.result()).status == "completed"

    raw = await own_clock.client.get_workflow_handle(run.run_id).fetch_history()
    failed = [e.activity_task_failed_event_attributes.failure for e in raw.events]
    messages = [f.message for f in failed if f.message or f.encoded_attributes.data]
    assert messages == ["Encoded failure"]
    [sealed] = [f.encoded_attributes for f in failed if f.encoded_attributes.data]
    assert sealed.metadata["encoding"] == ENCODING
    assert not [e for e in raw.events if SECRET.encode() in e.SerializeToString()]


def test_the_worker_check_refuses_a_tolerant_codec_without_refusals(tmp_path):
    """The worker's codec hands on what it cannot open as a marker; a payload converter
    that does not refuse markers would hand the marker to the workflow as its input."""
    sealed = data_converter(settings(tmp_path, "q", sealed=True), for_worker=True)
    unrefusing = dataclasses.replace(sealed, payload_converter_class=PydanticPayloadConverter)
    with pytest.raises(PluginError, match="does not refuse them"):
        check_carries_agents(unrefusing, sealed)
    check_carries_agents(sealed, sealed)


async def test_a_worker_whose_client_lost_our_refusals_to_a_later_plugin_is_refused(
    own_clock, tmp_path
):
    plugin = ours(tmp_path, "swapped", ScriptedModel([]), sealed=True)
    client = await connect(own_clock, [plugin, swap_converter()])
    assert client.data_converter.payload_converter_class is PydanticPayloadConverter
    with pytest.raises(PluginError, match="does not refuse them: a plugin after"):
        Worker(client, task_queue="swapped")


@pytest.mark.parametrize("way", ["outright", "over-none"])
async def test_a_start_only_client_never_loses_sealing_to_a_later_plugin(own_clock, tmp_path, way):
    """A client with agents=[] has no worker to catch a plugin after ours that replaces
    the converter: refused at connect, naming the plugin and the order that works; that
    order seals."""
    sealed = settings(tmp_path, "start-only", sealed=True)
    team = SimplePlugin(
        "team.Converter",
        data_converter=pydantic_data_converter
        if way == "outright"
        else (lambda c: DataConverter()),
    )
    plugin = DurableAgentsPlugin([], settings=sealed)
    with pytest.raises(
        PluginError,
        match=r"^team.Converter replaces the client's data converter, dropping "
        r"AGENT_ENCRYPTION_KEYS' sealing: list DurableAgentsPlugin after it$",
    ):
        await connect(own_clock, [plugin, team])
    client = await connect(own_clock, [team, DurableAgentsPlugin([], settings=sealed)])
    assert client.data_converter.payload_codec is not None
    # Keys unset: nothing to drop, the team's plugin has the last word as before.
    plain = DurableAgentsPlugin([], settings=settings(tmp_path, "plain", sealed=False))
    assert (await connect(own_clock, [plain, team])).data_converter.payload_codec is None


@pytest.mark.parametrize("order", ["ours-first", "theirs-first"])
async def test_a_replayer_takes_ours_and_the_openai_agents_plugin_in_either_order(
    own_clock, tmp_path, order
):
    """A run recorded with ours alone replays on a Replayer with the OpenAI Agents SDK's
    plugin beside ours, listed before or after it (a Replayer's config carries no plugin
    list: ours finds the plugins after it on the Replayer)."""
    queue = f"replayed-{order}"
    plugin = ours(tmp_path, queue, ScriptedModel([say("done")]), sealed=False)
    client = await connect(own_clock, [plugin])
    async with Worker(client, task_queue=queue):
        run = await AgentClient(client, plugin.settings, plugin.registry).start("charger", "go")
        assert (await run.result()).status == "completed"
    history = await client.get_workflow_handle(run.run_id).fetch_history()

    replaying = ours(tmp_path, queue, ScriptedModel([]), sealed=False)
    theirs = OpenAIAgentsPlugin()
    plugins = [replaying, theirs] if order == "ours-first" else [theirs, replaying]
    replayer = Replayer(workflows=[], plugins=replayer_plugins(*plugins))
    converter = replayer.config(active_config=True)["data_converter"]
    assert issubclass(converter.payload_converter_class, OpenAIPayloadConverter)
    await replayer.replay_workflow(history)


def test_a_sealed_replayer_before_the_openai_agents_plugin_says_the_order_that_works(tmp_path):
    sealed = DurableAgentsPlugin([charger], settings=settings(tmp_path, "q", sealed=True))
    with pytest.raises(PluginError, match=r"OpenAIAgentsPlugin takes .* list DurableAgentsPlugin"):
        Replayer(workflows=[], plugins=replayer_plugins(sealed, OpenAIAgentsPlugin()))
    Replayer(workflows=[], plugins=[OpenAIAgentsPlugin(), sealed])


async def test_a_replayer_whose_plugins_after_ours_were_not_told_says_how(tmp_path):
    """Ours listed first on a plain list: the plugin after it was never told of, so our
    converter may sit under the wrong one; replaying says so in one line, with the way out."""
    plain = DurableAgentsPlugin([charger], settings=settings(tmp_path, "q", sealed=False))
    quiet = SimplePlugin("team.Quiet")
    replayer = Replayer(workflows=[], plugins=[plain, quiet])
    with pytest.raises(
        PluginError, match=r"\(team.Quiet\): build it with plugins=replayer_plugins"
    ):
        async with replayer.workflow_replay_iterator(_no_histories()):
            pass
    Replayer(workflows=[], plugins=replayer_plugins(plain, quiet))


async def _no_histories() -> Any:
    return
    yield


def team_activity(name: str) -> Any:
    """The team's activity, registered under `name`."""

    async def order_of(order: str) -> str:
        return order

    return activity.defn(name=name)(order_of)


def registered_names(worker: Worker) -> list[str]:
    return [
        activity._Definition.must_from_callable(fn).name or ""
        for fn in worker.config(active_config=True).get("activities", ())
    ]


@pytest.mark.parametrize("index", range(3), ids=["first", "second", "third"])
async def test_a_team_activity_under_one_of_our_names_is_refused_with_the_way_out(
    own_clock, tmp_path, index
):
    """Our names are those of the activities our plugin registers (a new one of ours is
    covered without a list here): the first, middle and last of them."""
    plugin = ours(tmp_path, "clash", ScriptedModel([]), sealed=False)
    client = await connect(own_clock, [plugin])
    names = sorted(registered_names(Worker(client, task_queue=f"clash-{index}-ours")))
    assert {"call_model", "run_tool"} <= set(names)
    name = names[index * (len(names) - 1) // 2]

    theirs = team_activity(name)

    with pytest.raises(
        PluginError,
        match=rf"^your activity '{name}' has the name of one of durable_agents' own: "
        rf"register yours under another name, @activity.defn\(name='<yours>.{name}'\)$",
    ):
        Worker(client, task_queue="clash", activities=[theirs])
    # Under a name of their own, theirs and ours share the worker.
    renamed = team_activity(f"billing.{name}")
    both = Worker(client, task_queue=f"clash-{index}-both", activities=[renamed])
    assert f"billing.{name}" in registered_names(both) and name in registered_names(both)
