"""agentctl starts without loading what only one verb needs: `history --step K` and every
other verb a person types pay for their own imports, not for the what-if's shadows (the
model client alone doubled agentctl's start, docs/benchmark.md)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_agentctl_starts_without_the_model_client():
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, starters.cli; print(json.dumps(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    modules = set(json.loads(loaded))
    assert "openai" not in modules
    assert "durable_agents.starters.whatif_play" not in modules
    assert "durable_agents.starters.cli_whatif" in modules  # the verb is there, its work is not
