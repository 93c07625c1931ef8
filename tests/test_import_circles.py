"""No import circle among the package's own modules: each module's imports, read with
`ast`, make a graph with no cycle, so every module can be read (and loaded) after the
ones it needs, never half-initialised.

The imports counted are those that run when the module is loaded: at its top, under an
`if` or `try`, inside a `with` (Temporal's `workflow.unsafe.imports_passed_through()`
included) and in class bodies. An import inside a function runs later, and one under
`if TYPE_CHECKING:` never runs: neither is counted. tests/test_layering.py holds the
packages in layers; this test holds the modules inside a package, where the layers say
nothing."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "durable_agents"
# The folders linked into durable_agents/ (pyproject.toml, "One import package").
FOLDERS = sorted(p.name for p in (ROOT / PACKAGE).iterdir() if p.is_symlink() and p.is_dir())


def module_files() -> dict[str, Path]:
    """Every module of the package's own source, by its import name."""
    found: dict[str, Path] = {}
    paths = [*(ROOT / PACKAGE).glob("*.py")]
    paths += [path for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))]
    for path in paths:
        relative = path.relative_to(ROOT)
        parts = relative.with_suffix("").parts
        if parts[0] != PACKAGE:
            parts = (PACKAGE, *parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return ast.unparse(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def loaded_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when a module is loaded (see the module's doc)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from loaded_imports(node.body)
            yield from loaded_imports(node.orelse)
        elif isinstance(node, ast.Try | ast.TryStar):
            for block in (node.body, node.orelse, node.finalbody):
                yield from loaded_imports(block)
            for handler in node.handlers:
                yield from loaded_imports(handler.body)
        elif isinstance(node, ast.With | ast.AsyncWith | ast.ClassDef):
            yield from loaded_imports(node.body)


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def import_graph() -> dict[str, set[str]]:
    """Each module, and the modules of ours it loads."""
    files = module_files()
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        targets: set[str] = set()
        is_package = path.name == "__init__.py"
        for node in loaded_imports(ast.parse(path.read_text(), str(path)).body):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                source = _absolute(module, node, is_package)
                names = [source, *(f"{source}.{alias.name}" for alias in node.names)]
            for name in names:
                # The module itself, or the package an attribute of it is read from.
                while name and name not in files:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    targets.add(name)
        graph[module] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_a_cycle_in(group, graph) for group in groups]


def _a_cycle_in(group: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest way round from the group's first module back to itself."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & group):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a strong group always has one


def test_the_graph_reads_the_package():
    graph = import_graph()
    assert "durable_agents.workflows.agent" in graph
    assert "durable_agents.console.web" in graph["durable_agents.console.app"]
    # An import passed through the workflow sandbox counts.
    options = graph["durable_agents.workflows.activity_options"]
    assert "durable_agents.workflows.contracts" in options


def test_what_runs_at_load_time_counts_and_nothing_else():
    source = """
import a
if TYPE_CHECKING:
    import b
with workflow.unsafe.imports_passed_through():
    import c
try:
    import d
except ImportError:
    import e
class K:
    import f
def later():
    import g
"""
    found = [alias.name for node in loaded_imports(ast.parse(source).body) for alias in node.names]
    assert found == ["a", "c", "d", "e", "f"]


def test_the_finder_finds_a_cycle():
    found = cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert found == [["a", "b", "c", "a"]]


def test_no_module_of_ours_imports_itself_round_a_circle():
    found = [" -> ".join(cycle) for cycle in cycles(import_graph())]
    assert not found, "import circles:\n" + "\n".join(found)
