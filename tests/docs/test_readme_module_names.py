"""The README's Python files shadow nothing a team has installed: a file named `agents.py`
in a project folder is imported in place of the OpenAI Agents SDK's `agents` package (and
`tools.py`, `models.py`, `config.py` of many others), so a copied example breaks code that
has nothing to do with it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILE_NAME = re.compile(r"```python\n# (\w+)\.py\n")

# Top-level import names of common distributions (the OpenAI Agents SDK's `agents`
# first), and names projects often give a module of their own.
COMMON = {"agents", "tools", "models", "utils", "config", "types", "test", "tests", "app"}


def readme_modules() -> list[str]:
    return FILE_NAME.findall((ROOT / "README.md").read_text())


def test_the_readme_names_its_python_files():
    # The own-project section's files at least (tests/install/test_own_project.py runs them).
    assert {"workflows", "activities", "worker", "billing_agents"} <= set(readme_modules())


def test_no_readme_module_shadows_a_common_or_standard_module():
    shadowing = [
        name for name in readme_modules() if name in COMMON or name in sys.stdlib_module_names
    ]
    assert not shadowing, f"README modules shadow an installed package: {shadowing}"
