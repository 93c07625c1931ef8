"""A simulated email provider: drafts and sent mail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from activities.providers.base import SimulatedProvider
from activities.sql import Tx


class EmailProvider(SimulatedProvider):
    name = "email"

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.operations = {"draft": self._draft, "send": self._send}

    def _draft(self, tx: Tx, run_id: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "status": "drafted", "to": params["to"]}

    def _send(self, tx: Tx, run_id: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "status": "sent", "to": params["to"]}
