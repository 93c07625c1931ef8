"""A run's effects as the providers recorded them (not as our logs say)."""

from __future__ import annotations

from typing import Any

from activities.providers import Providers
from worker.settings import Settings


def run_effects(settings: Settings, run_id: str) -> list[dict[str, Any]]:
    return Providers.open(settings.data_dir).effects(run_id)
