"""The parts a team installs only if it uses them (pyproject's extras), and the one line a
part says when its extra is missing: a worker serving agents and `agentctl` need none of
them, so the core pulls no web framework, MCP client or database driver."""

from __future__ import annotations

import importlib
from types import ModuleType

DISTRIBUTION = "durable-agents-temporal"

# What each part needs, by the extra that brings it.
EXTRAS: dict[str, tuple[str, ...]] = {
    "console": ("fastapi", "uvicorn", "jinja2", "multipart", "argon2", "itsdangerous"),
    "mcp": ("mcp",),
    "postgres": ("psycopg",),
    "local": ("fastapi", "uvicorn"),
    "testing": (),  # a binary, found by infra/binaries.py
}


class ExtraMissing(ImportError):
    """A part was used without the extra that brings it; the message names the extra."""


def install_hint(extra: str) -> str:
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def missing(part: str, extra: str) -> ExtraMissing:
    return ExtraMissing(f"{part} needs the [{extra}] extra: {install_hint(extra)}")


def require(module: str, *, part: str, extra: str) -> ModuleType:
    """Import `module`, or say in one line which extra brings it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name is None or err.name.split(".")[0] != module.split(".")[0]:
            raise  # something else is missing: not ours to explain
        raise missing(part, extra) from None


def require_all(part: str, extra: str) -> None:
    """Every module of an extra, or one line naming it (before a part starts serving)."""
    for module in EXTRAS[extra]:
        require(module, part=part, extra=extra)
