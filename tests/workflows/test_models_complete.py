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
    if name.split(".")[0] in ("workflows", "activities", "worker", "examples")
    for key, value in vars(module).items()
    if isinstance(value, type) and issubclass(value, pydantic.BaseModel)
    and value.__module__ == name and not value.__pydantic_complete__
]
print(",".join(incomplete))
"""


def test_no_model_is_left_half_built_after_import():
    """In a fresh process, as a worker starts: a half-built model (one that names a type
    defined after it) is the one that failed to decode a run's request in the sandbox."""
    done = subprocess.run(
        [sys.executable, "-c", LIST_INCOMPLETE], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == ""
