"""A part used without its extra says, in one line, which extra to install; a module
missing for another reason (a broken install of the extra itself) is not disguised."""

from __future__ import annotations

import importlib.metadata as metadata
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from durable_agents.runtime.extras import (
    DISTRIBUTION,
    EXTRAS,
    NOT_PARTS,
    ExtraMissing,
    require,
    require_all,
)


def test_a_missing_part_names_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if the [mcp] extra were not installed
    with pytest.raises(ExtraMissing) as missing:
        require("mcp", part="MCP tools", extra="mcp")
    assert str(missing.value) == (
        "MCP tools needs the [mcp] extra: pip install 'durable-agents-temporal[mcp]'"
    )


def test_every_module_of_an_extra_is_asked_for(monkeypatch):
    for extra, modules in EXTRAS.items():
        for module in modules:
            monkeypatch.setitem(sys.modules, module, None)
            with pytest.raises(ExtraMissing, match=rf"\[{extra}\] extra"):
                require_all("a part", extra)
            monkeypatch.delitem(sys.modules, module)


def test_a_module_missing_inside_the_extra_is_not_taken_for_the_extra(monkeypatch, tmp_path):
    (tmp_path / "brokenpart.py").write_text("import not_a_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as raised:
        require("brokenpart", part="a part", extra="console")
    assert not isinstance(raised.value, ExtraMissing)
    assert raised.value.name == "not_a_module_anywhere"


ROOT = Path(__file__).resolve().parents[2]


def declared_extras() -> dict[str, set[str]]:
    """pyproject's extras, each as the distributions it brings: an extra naming another of
    ours ([all], [local]'s [console]) brings that one's too."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]

    def brought(extra: str) -> set[str]:
        found: set[str] = set()
        for line in extras[extra]:
            requirement = Requirement(line)
            if _normal(requirement.name) == DISTRIBUTION:
                for inner in requirement.extras:
                    found |= brought(inner)
            else:
                found.add(_normal(requirement.name))
        return found

    return {extra: brought(extra) for extra in extras}


def modules_of(distribution: str) -> set[str]:
    """The top-level modules an installed distribution brings (none: a binary's wheel)."""
    metadata.distribution(distribution)  # raises when it is not installed here
    return {
        module
        for module, owners in metadata.packages_distributions().items()
        if distribution in {_normal(owner) for owner in owners} and not module.startswith("_")
    }


def test_every_extra_of_pyproject_is_a_row_or_named_as_no_part():
    declared = declared_extras()
    assert set(declared) == set(EXTRAS) | set(NOT_PARTS)
    assert not set(EXTRAS) & set(NOT_PARTS)


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_each_row_is_its_extras_distributions_both_ways(extra):
    """Each module a row asks for comes from a distribution its extra brings, and each
    distribution the extra brings that has modules has one in the row: a part asks for
    every distribution it would miss, and for none its extra does not install."""
    brought = declared_extras()[extra]
    by_distribution = {distribution: modules_of(distribution) for distribution in brought}
    for module in EXTRAS[extra]:
        owners = {_normal(d) for d in metadata.packages_distributions().get(module, [])}
        assert owners & brought, f"[{extra}] asks for {module}, which none of {brought} brings"
    for distribution, modules in by_distribution.items():
        if modules:
            assert modules & set(EXTRAS[extra]), (
                f"[{extra}] brings {distribution} ({', '.join(sorted(modules))}), "
                "which its row never asks for"
            )


def _normal(name: str) -> str:
    return name.lower().replace("_", "-")
