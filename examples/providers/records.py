"""A simulated records service: a database the agent writes notes into."""

from __future__ import annotations

from pathlib import Path
from sqlite3 import Connection
from typing import Any

from durable_agents.examples.providers.base import SimulatedProvider


class RecordsProvider(SimulatedProvider):
    name = "records"

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.operations = {"note": self._note}

    def _note(self, conn: Connection, run_id: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "status": "recorded", "step": params["step"]}
