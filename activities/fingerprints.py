"""One way to fingerprint a request: a hash of its canonical JSON. The model memo, the
effect ledger and the providers all compare requests by it."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any


def fingerprint(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def now_text() -> str:
    """A row's timestamp, comparable as text and by datetime.fromisoformat."""
    return datetime.now(UTC).isoformat()
