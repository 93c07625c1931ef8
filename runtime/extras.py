"""The parts a team installs only if it uses them (pyproject's extras), and the one line a
part says when its extra is missing: a worker serving agents and `agentctl` need none of
them, so the core pulls no web framework, MCP client or database driver."""

from __future__ import annotations

import importlib
from types import ModuleType

DISTRIBUTION = "durable-agents-temporal"

# The console's server-side pages, form posts, hashed passwords and signed session cookies
# (and the codec server, on the same web framework).
_CONSOLE = ("fastapi", "uvicorn", "jinja2", "python_multipart", "argon2", "itsdangerous")

# What each part needs, by the extra that brings it: every module its distributions bring
# that we import (tests/runtime/test_extras.py holds this to pyproject's extras both ways).
EXTRAS: dict[str, tuple[str, ...]] = {
    "console": _CONSOLE,
    "mcp": ("mcp",),
    "postgres": ("psycopg",),
    # `agentctl up` starts the console and the codec server beside the dev server (a
    # binary, found by infra/binaries.py) and the offline model: [local] brings [console],
    # so the extra `up` asks for is all it needs.
    "local": _CONSOLE,
    "testing": (),  # a binary, found by infra/binaries.py
}
# pyproject's other extras bring no part of their own: [all] is every extra above; [test],
# [dev] and [bench] are for working on this repository.
NOT_PARTS = ("all", "test", "dev", "bench")


class ExtraMissing(ImportError):
    """A part was used without the extra that brings it; the message names the extra."""


def install_hint(extra: str) -> str:
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def missing(part: str, extra: str) -> ExtraMissing:
    return ExtraMissing(f"{part} needs the [{extra}] extra: {install_hint(extra)}")


def _ours(err: ModuleNotFoundError, modules: tuple[str, ...]) -> bool:
    """Whether `err` is the absence of one of `modules` (not of something they import)."""
    return err.name is not None and err.name.split(".")[0] in {m.split(".")[0] for m in modules}


def require(module: str, *, part: str, extra: str) -> ModuleType:
    """Import `module`, or say in one line which extra brings it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if not _ours(err, (module,)):
            raise  # something else is missing: not ours to explain
        raise missing(part, extra) from None


def require_all(part: str, extra: str) -> None:
    """Every module of an extra, or one line naming it (before a part starts serving)."""
    for module in EXTRAS[extra]:
        require(module, part=part, extra=extra)


def require_all_or_exit(part: str, extra: str) -> None:
    """For a `python -m` entry point, before it imports what the extra brings: every
    module of the extra, or the one line on stderr and exit code 1 (no traceback)."""
    try:
        require_all(part, extra)
    except ExtraMissing as err:
        raise SystemExit(f"error: {err}") from None


def import_failed(err: ModuleNotFoundError, run_as: str, *, part: str, extra: str) -> BaseException:
    """What a module's own import of its extra's modules, failed with `err`, raises: run as
    a program (`run_as` is its `__name__`, "__main__"), the one line and exit code 1; imported,
    ExtraMissing (one line in agentctl). A module missing for another reason is `err` itself."""
    if not _ours(err, EXTRAS[extra]):
        return err
    if run_as == "__main__":
        return SystemExit(f"error: {missing(part, extra)}")
    return missing(part, extra)
