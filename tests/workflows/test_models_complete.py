"""Every model the workflow code uses is whole once imported: a worker that shares the
agent workflow's module with its sandbox cannot finish one inside it (issue 18)."""

from __future__ import annotations

import subprocess
import sys

LIST_INCOMPLETE = """
import sys
import pydantic
import durable_agents.worker.main  # what a worker process imports before it starts a run
incomplete = [
    f"{name}.{key}"
    for name, module in list(sys.modules.items())
    if name.startswith("durable_agents.")
    for key, value in vars(module).items()
    if isinstance(value, type) and issubclass(value, pydantic.BaseModel)
    and value.__module__ == name and not value.__pydantic_complete__
]
checked = sum(1 for name in sys.modules if name.startswith("durable_agents.workflows."))
print(",".join(incomplete) + "|" + str(checked))
"""


def test_no_model_is_left_half_built_after_import():
    """In a fresh process, as a worker starts: a half-built model (one that names a type
    defined after it) is the one that failed to decode a run's request in the sandbox."""
    done = subprocess.run(
        [sys.executable, "-c", LIST_INCOMPLETE], capture_output=True, text=True, check=True
    )
    incomplete, _, checked = done.stdout.strip().rpartition("|")
    assert incomplete == ""
    assert int(checked) >= 20  # the workflow's modules were looked at, not none of them
