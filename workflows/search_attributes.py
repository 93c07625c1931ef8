"""Search attributes the workflow keeps current, so runs can be filtered in the Web UI,
by `agentctl list --status` and by `agentctl inbox`."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

STATUS = SearchAttributeKey.for_keyword("AgentStatus")
# The step at the run's last change of status or of what it waits for: exact for a waiting
# or closed run; a running run's live step is in its current details and queries.
STEP = SearchAttributeKey.for_int("AgentStep")
WAITING_FOR = SearchAttributeKey.for_keyword("AgentWaitingFor")

ALL = (STATUS, STEP, WAITING_FOR)


def dev_server_flags() -> list[str]:
    """`temporal server start-dev` flags that register our search attributes."""
    flags: list[str] = []
    for key in ALL:
        flags += ["--search-attribute", f"{key.name}={key._metadata_type}"]
    return flags
