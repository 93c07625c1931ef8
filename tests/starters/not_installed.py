"""Run one of our programs as if some distributions were not installed: a sitecustomize,
first on PYTHONPATH, puts a finder ahead of all others that finds none of their modules
and says so as Python does for a module nobody installed (ModuleNotFoundError, named)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

SITECUSTOMIZE = """
import os
import sys

_GONE = set(filter(None, os.environ.get("TEST_MODULES_NOT_INSTALLED", "").split(",")))


class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _GONE:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
"""


def env_without(modules: Iterable[str], folder: Path, env: dict[str, str]) -> dict[str, str]:
    """`env` for a program that finds none of `modules` (the sitecustomize in `folder`).
    The stack's parts get none of it: they inherit neither variable (infra/processes.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
    return env | {"PYTHONPATH": path, "TEST_MODULES_NOT_INSTALLED": ",".join(modules)}
