"""A simulated email provider: drafts and sent mail."""

from __future__ import annotations

from pathlib import Path
from sqlite3 import Connection
from typing import Any

from durable_agents.examples.providers.base import SimulatedProvider


class EmailProvider(SimulatedProvider):
    name = "email"

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.operations = {"draft": self._draft, "send": self._send}

    def _draft(self, conn: Connection, run_id: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "status": "drafted", "to": params["to"]}

    def _send(self, conn: Connection, run_id: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "status": "sent", "to": params["to"]}
