"""A team's answer model in a module of its own: the agent's module imports it (passed
through, the worker's class) and so may a workflow module as plain workflow code (the
sandbox's own copy): tests/calling/sandbox_copy.py."""

from __future__ import annotations

from pydantic import BaseModel


class Assessment(BaseModel):
    risky: bool
    score: int
