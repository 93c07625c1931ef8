"""Where a sub-agent's run gets its id: derived from the parent's id, step and tool call
id, and from the parent's identity, so a retried task, a crashed worker, a continue-as-new
or a reset of the parent name the same child, and a reused parent id does not."""

from __future__ import annotations

import hashlib
import re

CHILD_ID_CHARS = 200


def child_run_id(parent_id: str, parent_identity: str, step: int, tool_call_id: str) -> str:
    call = re.sub(r"[^A-Za-z0-9._:-]", "-", tool_call_id)[:60]
    mark = hashlib.sha256(f"{parent_identity}/{step}/{tool_call_id}".encode()).hexdigest()[:6]
    tail = f".{step}.{call}.{mark}"
    return parent_id[: CHILD_ID_CHARS - len(tail)] + tail
