"""A simulated records service: a database the agent writes notes into."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from activities.providers.base import SimulatedProvider
from activities.sql import Tx


class RecordsProvider(SimulatedProvider):
    name = "records"

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.operations = {"note": self._note}

    def _note(self, tx: Tx, run_id: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "status": "recorded", "step": params["step"]}
