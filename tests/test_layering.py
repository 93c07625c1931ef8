"""The packages' layers, read from the imports themselves (every import statement, those
inside functions too): each package imports only the ones below it, so no import runs back
up and no two packages need each other (docs/architecture.md, "Layers")."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent
# What each package may import, besides itself and third-party packages.
MAY_IMPORT: dict[str, set[str]] = {
    "workflows": set(),
    "runtime": set(),
    "activities": {"workflows", "runtime"},
    "worker": {"workflows", "runtime", "activities"},
    "infra": {"workflows", "runtime", "worker"},
    "control": {"workflows", "runtime", "activities", "infra"},
    "console": {"workflows", "runtime", "activities", "control"},
    "durable_agents": {"workflows", "runtime", "activities", "worker", "infra", "control"},
    "starters": {"workflows", "runtime", "activities", "worker", "infra", "control", "console"},
    "examples": {"durable_agents"},
}
OURS = set(MAY_IMPORT) | {"bench", "tests"}


def layer_of(module: str) -> str:
    """The layer a module name belongs to: `durable_agents.workflows.agent` is workflows,
    `durable_agents.client` the public package (everything is under durable_agents)."""
    parts = module.split(".")
    if parts[0] == "durable_agents" and len(parts) > 1 and parts[1] in MAY_IMPORT:
        return parts[1]
    return parts[0]


def imports_of(path: Path) -> set[str]:
    """The layers of ours that a module imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {layer_of(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(layer_of(node.module))
    return found & OURS


def test_every_import_of_ours_names_the_one_package():
    """Inside the clone the card's folders are importable by their own names too; an import
    that used one would load a second copy of every module under it."""
    short = {name for name in MAY_IMPORT if name != "durable_agents"}
    wrong = [
        f"{path.relative_to(ROOT)}: {module}"
        for folder in (*MAY_IMPORT, "bench", "tests")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "fixtures" not in path.parts  # the previous release's code writes those
        for module in _modules_named(path)
        if module.split(".")[0] in short
    ]
    assert wrong == []


def _modules_named(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_every_package_imports_only_the_layers_below_it():
    wrong = [
        f"{path.relative_to(ROOT)} imports {target}"
        for package, allowed in MAY_IMPORT.items()
        for path in sorted((ROOT / package).rglob("*.py"))
        for target in sorted(imports_of(path) - allowed - {package})
    ]
    assert wrong == []


def test_the_layers_have_no_cycle():
    """Each package's allowed imports are below it: an order exists (a topological sort)."""
    placed: list[str] = []
    left = dict(MAY_IMPORT)
    while left:
        ready = [p for p, allowed in left.items() if allowed <= set(placed)]
        assert ready, f"a cycle among {sorted(left)}"
        placed += sorted(ready)
        for package in ready:
            del left[package]
    assert placed[:2] == ["runtime", "workflows"]


def test_every_package_of_ours_has_its_layer():
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert packages - {"bench", "tests"} == set(MAY_IMPORT)


def _workflow_imports() -> dict[str, set[str]]:
    """Each module of workflows/ and the modules of workflows/ it imports (under
    TYPE_CHECKING too: a cycle hidden there is still one to read)."""
    root = Path(__file__).parent.parent / "workflows"
    found: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        name = ".".join(("durable_agents.workflows", *path.relative_to(root).with_suffix("").parts))
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
        found[name.removesuffix(".__init__")] = names
    return {module: (names & set(found)) - {module} for module, names in found.items()}


def test_workflows_modules_import_one_another_without_a_cycle():
    imports = _workflow_imports()
    records = imports["durable_agents.workflows.agent_records"]
    assert "durable_agents.workflows.agents" not in records
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, " -> ".join((*path, module))
        if module in done:
            return
        for imported in sorted(imports[module]):
            visit(imported, (*path, module))
        done.add(module)

    for module in sorted(imports):
        visit(module, ())
