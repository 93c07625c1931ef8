"""`DurableAgentsPlugin`: agents on a worker you already run, through the Temporal SDK's
plugin interface (as the SDK's own integrations do).

    plugin = DurableAgentsPlugin(agents=[support])
    client = await Client.connect("localhost:7233", plugins=[plugin])
    worker = Worker(client, task_queue="billing", workflows=[Billing],
                    activities=[send_invoice])   # the client's plugins reach the worker

On the client it lays our data converter over the client's (pydantic payloads, sealed
when keys are set; beside pydantic-ai's and the OpenAI Agents SDK's plugins in either
order, worker/converter.py) and adds the tracing interceptor unless one is there; on
the worker it adds the agent workflow, the prune workflow, every activity they call, and
the sandbox settings they need, beside the team's own. `agentctl up`'s worker and the
what-if worker are built with it too (worker/main.py, worker/shadow.py): the wiring
exists once.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import temporalio.client
import temporalio.converter
import temporalio.worker
from temporalio import activity
from temporalio.client import ClientConfig
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.plugin import SimplePlugin
from temporalio.worker import WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from durable_agents.activities.model_setup import model_setup_hint
from durable_agents.runtime import telemetry
from durable_agents.runtime.client import as_worker_reads, data_converter
from durable_agents.runtime.encryption import EncryptionCodec
from durable_agents.runtime.refused_payloads import RefusesMarkers, speaks_pydantic
from durable_agents.runtime.settings import Settings, load_settings
from durable_agents.worker.activities import production_activities
from durable_agents.worker.callers import Admits, CallerCheck
from durable_agents.worker.converter import (
    PluginError,
    check_carries_agents,
    lay_over,
    ours_before,
)
from durable_agents.worker.sandbox import sandbox_restrictions, shared_modules
from durable_agents.worker.search_attributes import require_search_attributes
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.agents import Agent
from durable_agents.workflows.prune import AutoUpgradingPruneWorkflow, PruneWorkflow
from durable_agents.workflows.registry import (
    AgentRegistry,
    load_registry,
    serve,
    serve_for_replay,
)

log = logging.getLogger("durable_agents")


def _tracers() -> tuple[type, ...]:
    """The interceptors that record Temporal's spans: the SDK's TracingInterceptor and,
    from temporalio 1.35, its OpenTelemetryPlugin's OpenTelemetryInterceptor (no
    subclass of it). Either one there, a second would record every span twice."""
    try:
        from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor
    except ImportError:  # temporalio 1.34
        return (TracingInterceptor,)
    return (TracingInterceptor, OpenTelemetryInterceptor)


_TRACERS = _tracers()

__all__ = ["DurableAgentsPlugin", "PluginError", "replayer_plugins", "without_our_plugin"]

# Builds the activities for one worker: (client, settings, registry) -> them.
ActivitiesFactory = Callable[
    [temporalio.client.Client, Settings, AgentRegistry], Sequence[Callable[..., Any]]
]


class DurableAgentsPlugin(SimplePlugin):
    """Everything agents need, added to your own client and worker.

    `agents`: the agents this worker serves (their tools and sub-agents come with them);
    None: those of the `AGENT_MODULES` setting; `[]`: none (a client that only starts and
    reads runs; a worker given it is refused). `settings`: our typed settings (stores,
    keys, model endpoint); none: read from the environment, as `agentctl` does.
    Our activities run only for the agent runs of the worker's own task queue
    (worker/callers.py); `admits` narrows that to the runs it says yes to (a what-if's).
    """

    def __init__(
        self,
        agents: Sequence[Agent] | AgentRegistry | None = None,
        *,
        settings: Settings | None = None,
        workflows: Sequence[type] | None = None,
        activities: ActivitiesFactory | None = None,
        admits: Admits | None = None,
    ) -> None:
        self.settings = settings if settings is not None else load_settings()
        if isinstance(agents, AgentRegistry):
            self.registry = agents
        elif agents is not None:
            self.registry = AgentRegistry().add(*agents)
        else:
            self.registry = load_registry(self.settings.agent_modules, self.settings.modules_path)
        self._workflows = workflows
        self._activities = activities
        self._admits = admits
        # The plugins after this one on a Replayer (`replayer_plugins`); a client's and a
        # worker's config name their own.
        self._replaying_before: tuple[Any, ...] = ()
        super().__init__(
            "durable_agents.DurableAgentsPlugin",
            # The data converter and the tracing interceptor: configure_client (and the
            # replayer's converter in configure_replayer).
            workflow_runner=self._runner,
        )

    def configure_client(self, config: ClientConfig) -> ClientConfig:
        """Our converter over the client's (worker/converter.py: laid over what the plugins
        after ours will make of it, so the order of plugins does not matter), and the
        tracing interceptor unless the client has one already (the team's, a peer's):
        each span recorded once."""
        config = super().configure_client(config)
        plugins = list(config.get("plugins", ()))
        later = plugins[plugins.index(self) + 1 :] if self in plugins else []
        ours = data_converter(self.settings, for_worker=True)
        existing = config.get("data_converter")
        made = lay_over(None, ours) if existing is None else ours_before(existing, later, ours)
        config["data_converter"] = made
        present = list(config.get("interceptors", ()))
        config["interceptors"] = [*present, *self._tracing([*present, *_interceptors(later)])]
        return config

    @staticmethod
    def _tracing(present: Sequence[object]) -> list[TracingInterceptor]:
        """Our tracing interceptor, where this process records spans and nobody traces
        Temporal's calls already (`present`: the interceptors there and those the plugins
        after ours will add): a second tracing interceptor records every span twice."""
        if not telemetry.tracing_installed():
            return []
        if any(isinstance(i, _TRACERS) for i in present):
            return []
        return [TracingInterceptor(telemetry.tracer())]

    def _runner(self, existing: WorkflowRunner | None) -> WorkflowRunner:
        """Our sandbox settings on top of the team's: their runner's restrictions gain the
        modules our workflow shares with the worker; an unsandboxed runner stays so."""
        shared = shared_modules(self.settings)
        if existing is None:
            return SandboxedWorkflowRunner(restrictions=sandbox_restrictions(self.settings))
        if isinstance(existing, SandboxedWorkflowRunner):
            restrictions = existing.restrictions.with_passthrough_modules(*shared)
            return dataclasses.replace(existing, restrictions=restrictions)
        return existing

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        client = config.get("client")
        task_queue = config.get("task_queue")
        if client is None or not task_queue:
            raise PluginError("DurableAgentsPlugin needs a worker with a client and a task queue")
        if not self.registry.agents:
            # Its agent workflow would take runs that no agent of it can answer.
            raise PluginError(
                "DurableAgentsPlugin was given no agent: agents=[] is for a client that only "
                "starts and reads runs; give the worker's plugin the agents it serves "
                "(agents=[...], or None for AGENT_MODULES), or build this worker on a client "
                "without it"
            )
        reading = data_converter(self.settings, for_worker=True)
        converter = client.data_converter
        kind = converter.payload_converter_class
        if (
            reading.payload_codec is None
            and speaks_pydantic(kind)
            and not issubclass(kind, RefusesMarkers)
        ):
            # A client made without our plugin: the worker reads through ours all the same
            # (a start input it cannot read then fails its run in one line).
            converter = lay_over(converter, reading)
        elif isinstance(converter.payload_codec, EncryptionCodec):
            # A client's codec (strict, marking nothing): the worker reads as a worker, so
            # what came in the clear is known as such.
            converter = as_worker_reads(converter)
        if converter is not client.data_converter:
            client = _reconnected(client, converter)
            config["client"] = client
        check_carries_agents(client.data_converter, reading)
        serve(task_queue, self.registry, trusts_the_clear=trusts_the_clear(self.settings))
        config = super().configure_worker(config)
        # A worker given our plugin, but not its client: the client's tracing interceptor
        # serves the worker too (the SDK's), so ours only where neither has one, nor a
        # worker plugin after ours.
        own = list(config.get("plugins", ()))
        later = own[own.index(self) + 1 :] if self in own else own
        tracing = self._tracing(
            [
                *client.config(active_config=True)["interceptors"],
                *config.get("interceptors", ()),
                *_interceptors(later),
            ]
        )
        config["workflows"] = [*config.get("workflows", ()), *self._agent_workflows(config)]
        make = self._activities or production_activities
        ours = list(make(client, self.settings, self.registry))
        theirs = list(config.get("activities", ()))
        _refuse_our_names(theirs, ours)
        config["activities"] = [*theirs, *ours]
        check = CallerCheck(client, self._admits)
        config["interceptors"] = [*config.get("interceptors", ()), *tracing, check]
        return config

    async def run_worker(
        self,
        worker: temporalio.worker.Worker,
        next: Callable[[temporalio.worker.Worker], Awaitable[None]],
    ) -> None:
        """Before the worker polls: a namespace without our search attributes is refused in
        one line (else every run, ours or the team's calling an agent, sits stuck on its
        first upsert); a worker with no model says, once, what to set."""
        await require_search_attributes(worker.client)
        hint = model_setup_hint(self.settings)
        if hint is not None:
            log.warning(hint)
        await super().run_worker(worker, next)

    def configure_replayer(
        self, config: temporalio.worker.ReplayerConfig
    ) -> temporalio.worker.ReplayerConfig:
        """As on a client: our converter laid over what the plugins after ours make of the
        Replayer's. A Replayer's config carries no plugin list (a client's and a worker's
        do), so those plugins are the ones `replayer_plugins` told this copy of ours of;
        none told: none after ours (`run_replayer` refuses a Replayer where there are)."""
        serve_for_replay(self.registry, trusts_the_clear=not self.settings.encryption_on)
        config = super().configure_replayer(config)
        existing = config.get("data_converter")
        ours = data_converter(self.settings, for_worker=True)
        later = list(self._replaying_before)
        made = lay_over(None, ours) if existing is None else ours_before(existing, later, ours)
        config["data_converter"] = made
        config["workflows"] = [*config.get("workflows", ()), *self._agent_workflows(None)]
        return config

    @asynccontextmanager
    async def run_replayer(
        self,
        replayer: temporalio.worker.Replayer,
        histories: AsyncIterator[temporalio.client.WorkflowHistory],
        next: Callable[
            [temporalio.worker.Replayer, AsyncIterator[temporalio.client.WorkflowHistory]],
            AbstractAsyncContextManager[AsyncIterator[temporalio.worker.WorkflowReplayResult]],
        ],
    ) -> AsyncIterator[AsyncIterator[temporalio.worker.WorkflowReplayResult]]:
        """Before the first history: the plugins after ours on this Replayer are the ones
        ours was told of, or our converter was laid over the wrong one (said in one line,
        with the way out)."""
        plugins = list(replayer.plugins)
        later = plugins[plugins.index(self) + 1 :] if self in plugins else []
        if [id(p) for p in later] != [id(p) for p in self._replaying_before]:
            names = (
                ", ".join(
                    p.name() if callable(getattr(p, "name", None)) else type(p).__name__
                    for p in later
                )
                or "none"
            )
            raise PluginError(
                f"DurableAgentsPlugin on a Replayer does not know the plugins after it "
                f"({names}): build it with plugins=replayer_plugins(...) "
                "(durable_agents.worker.plugin), which tells it, or list ours last"
            )
        async with super().run_replayer(replayer, histories, next) as results:
            yield results

    def _agent_workflows(self, config: WorkerConfig | None) -> list[type]:
        """The agent and prune workflows (a test's variants where given); on an unversioned
        worker the prune workflow without a versioning behaviour, which Temporal refuses
        there."""
        deployment = config.get("deployment_config") if config is not None else None
        versioned = deployment is not None and deployment.use_worker_versioning
        given = self._workflows if self._workflows is not None else (AgentWorkflow, PruneWorkflow)
        return [
            AutoUpgradingPruneWorkflow if versioned and w is PruneWorkflow else w for w in given
        ]


def replayer_plugins(*plugins: Any) -> list[Any]:
    """A Replayer's plugins, in the order given, with each of ours told the plugins after
    it. On a client or a worker ours reads the plugin list from the config and lays its
    converter over what the plugins after it will make of the client's, so the order of
    plugins does not matter; a Replayer's config carries no list, so it is handed over
    here, explicitly:

        Replayer(workflows=[Billing], plugins=replayer_plugins(ours, OpenAIAgentsPlugin()))

    Ours alone, or listed last, needs none of this (`plugins=[..., ours]`). Each of ours
    is a copy: the plugin given stays as it was for its client and worker."""
    listed = list(plugins)
    for at in reversed(range(len(listed))):  # the last first: each told of the copies after
        plugin = listed[at]
        if isinstance(plugin, DurableAgentsPlugin):
            told = copy.copy(plugin)
            told._replaying_before = tuple(listed[at + 1 :])
            listed[at] = told
    return listed


def _interceptors(plugins: Sequence[Any]) -> list[object]:
    """The interceptors the plugins given will add (those built on the SDK's SimplePlugin,
    the way every integration is: its OpenTelemetryPlugin, a team's own)."""
    return [
        interceptor
        for plugin in plugins
        if isinstance(plugin, SimplePlugin)
        for interceptor in (plugin.interceptors or ())
    ]


def _refuse_our_names(
    theirs: Sequence[Callable[..., Any]], ours: Sequence[Callable[..., Any]]
) -> None:
    """A team activity under one of our activities' names: refused with the way out, not
    the SDK's bare "More than one activity named X" (ours are what the plugin registers,
    so a new one of ours is covered)."""
    taken = {_activity_name(fn) for fn in ours} - {None}
    for fn in theirs:
        name = _activity_name(fn)
        if name in taken and not getattr(fn, "__module__", "").startswith("durable_agents."):
            raise PluginError(
                f"your activity {name!r} has the name of one of durable_agents' own: register "
                f"yours under another name, @activity.defn(name='<yours>.{name}')"
            )


def _activity_name(fn: Callable[..., Any]) -> str | None:
    definition = activity._Definition.from_callable(fn)
    return definition.name if definition is not None else None


def _reconnected(
    client: temporalio.client.Client,
    converter: temporalio.converter.DataConverter,
    plugins: Sequence[Any] = (),
) -> temporalio.client.Client:
    """The same connection and options with another data converter (and these plugins:
    the converter carries what the client's made of it already)."""
    config = client.config(active_config=True)
    return temporalio.client.Client(
        config["service_client"],
        namespace=config["namespace"],
        data_converter=converter,
        plugins=list(plugins),
        interceptors=config.get("interceptors", []),
        default_workflow_query_reject_condition=config.get(
            "default_workflow_query_reject_condition"
        ),
        header_codec_behavior=config["header_codec_behavior"],
    )


def without_our_plugin(client: temporalio.client.Client) -> temporalio.client.Client:
    """The same connection without a DurableAgentsPlugin of the client's: a worker built
    with a plugin of its own (the what-if's, with activities that never act) must not get
    the client's too (production activities on a what-if queue)."""
    config = client.config(active_config=True)  # as the plugins made it (our converter)
    plugins = [p for p in config.get("plugins", []) if not isinstance(p, DurableAgentsPlugin)]
    if len(plugins) == len(config.get("plugins", [])):
        return client
    return _reconnected(client, config["data_converter"], plugins)


def trusts_the_clear(settings: Settings) -> bool:
    """Whether the worker takes what it is handed in the clear as the deployment's own.
    With keys, never: only what carries them (a poller of its queue holds none). Without
    keys, only where the team said nobody else polls its namespace; otherwise the worker
    refuses to serve, in one line that names the command that makes keys."""
    if settings.encryption_on:
        return False
    if settings.namespace_is_ours_alone:
        return True
    raise PluginError(NO_KEYS)


NO_KEYS = (
    "this worker holds no keys, so it cannot tell the deployment's own hand-offs from those "
    "of anyone who may poll its task queue: make keys with `agentctl keys new k1 --file keys` "
    "and set AGENT_ENCRYPTION_KEYS_FILE=keys (the same file for every part of the deployment), "
    "or, if nobody else can start workflows in or poll this namespace, say so with "
    "AGENT_NAMESPACE_IS_OURS_ALONE=true"
)
