"""A part used without its extra says, in one line, which extra to install; a module
missing for another reason (a broken install of the extra itself) is not disguised."""

from __future__ import annotations

import sys

import pytest

from durable_agents.runtime.extras import EXTRAS, ExtraMissing, require, require_all


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


def test_each_extra_declares_the_distributions_of_its_modules():
    """EXTRAS and pyproject's extras agree: each module an extra's part asks for comes from
    a distribution that extra (or [all]) brings."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement

    declared: dict[str, set[str]] = {}
    for line in metadata.requires("durable-agents-temporal") or []:
        requirement = Requirement(line)
        marker = str(requirement.marker or "")
        for extra in EXTRAS:
            if f'extra == "{extra}"' in marker:
                declared.setdefault(extra, set()).add(_normal(requirement.name))
    owners = metadata.packages_distributions()
    for extra, modules in EXTRAS.items():
        for module in modules:
            brought = {_normal(d) for d in owners.get(module, [])}
            assert brought & declared.get(extra, set()), (extra, module, brought)


def _normal(name: str) -> str:
    return name.lower().replace("_", "-")
