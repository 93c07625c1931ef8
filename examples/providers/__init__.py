"""Simulated third-party providers (payments, email, records). Each keeps its own
database, apart from ours, as a real provider would: so the crash windows between
"the provider acted" and "we recorded it" are real, and effects are counted on the
provider's side, not in our logs."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durable_agents.examples.providers.base import ProviderConflict, SimulatedProvider
from durable_agents.examples.providers.email import EmailProvider
from durable_agents.examples.providers.payments import PaymentsProvider
from durable_agents.examples.providers.records import RecordsProvider

__all__ = ["ProviderConflict", "Providers", "SimulatedProvider", "providers_at"]


@dataclass(frozen=True)
class Providers:
    payments: PaymentsProvider
    email: EmailProvider
    records: RecordsProvider

    @classmethod
    def open(cls, data_dir: Path) -> Providers:
        root = data_dir / "providers"
        return cls(PaymentsProvider(root), EmailProvider(root), RecordsProvider(root))

    def effects(self, run_id: str) -> list[dict[str, Any]]:
        """Every effect the providers really performed for a run, oldest first."""
        rows = [
            effect | {"provider": provider.name}
            for provider in (self.payments, self.email, self.records)
            for effect in provider.effects(run_id)
        ]
        return sorted(rows, key=lambda row: str(row["created_at"]))


@functools.cache
def providers_at(data_dir: Path) -> Providers:
    """The providers under a worker's data dir, opened once per process."""
    return Providers.open(data_dir)
