"""Whether a worker has a model to call, and, when it has none, what to set: one line.

With no OPENAI_BASE_URL and no OPENAI_API_KEY a worker calls the offline model on
127.0.0.1:AGENT_OFFLINE_MODEL_PORT, which `agentctl up` starts. A team that runs its own
Temporal and its own worker has neither set nor started anything: its first run would fail
with "model endpoint … unreachable" and no word of the settings. The worker says it once
when it starts (`model_setup_hint`, wired into the plugin's worker start), the model
call's error carries the same line, and `agentctl doctor` tells the team what to set
rather than to start a second stack.
"""

from __future__ import annotations

import socket

from durable_agents.runtime.settings import Settings

MODEL_SETTINGS = (
    "set OPENAI_BASE_URL and OPENAI_API_KEY in the worker's environment "
    "(AGENT_MODEL for the model's name)"
)
OFFLINE_MODEL_ALONE = "python -m durable_agents.infra.offline_model --port {port}"  # [local]


def no_model_line(settings: Settings) -> str:
    """The line a worker with no model prints, whoever runs its Temporal."""
    return (
        f"durable-agents: no model configured: {MODEL_SETTINGS}, or run the offline model "
        f"with `agentctl up` (beside a Temporal of your own: "
        f"`{OFFLINE_MODEL_ALONE.format(port=settings.offline_model_port)}`, [local] extra)"
    )


def model_setup_hint(settings: Settings) -> str | None:
    """None when the worker has a model: a real endpoint is configured, or the offline
    model answers on its port; else the one line that says what to set."""
    if not settings.uses_offline_model or offline_model_listens(settings):
        return None
    return no_model_line(settings)


# The offline model is on this machine: a refused connection is answered at once.
CONNECT_TIMEOUT_SECONDS = 1.0


def offline_model_listens(settings: Settings) -> bool:
    """Something accepts connections on the offline model's port (a TCP connect only:
    cheap enough for a worker's start and a failed model call)."""
    try:
        with socket.create_connection(
            ("127.0.0.1", settings.offline_model_port), timeout=CONNECT_TIMEOUT_SECONDS
        ):
            return True
    except OSError:
        return False
