"""@tool and Agent: what a user declares, and the one-line errors for what cannot run."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import BaseModel, Field, ValidationError

import durable_agents
from durable_agents import Agent, Model, RunLimits, ToolContext, ToolRisk, tool
from durable_agents.workflows.registry import AgentRegistry, load_registry
from durable_agents.workflows.tools import ToolDefinitionError

ROOT = Path(__file__).resolve().parents[2]


class Order(BaseModel):
    order_id: str = Field(pattern=r"^A-\d+$")


def test_typed_parameters_become_a_validated_argument_model():
    @tool(risk=ToolRisk.SIDE_EFFECT, timeout=5, approvers=["lead"])
    async def refund(
        ctx: ToolContext, order_id: Annotated[str, Field(pattern=r"^A-")], amount: float = 1.0
    ) -> str:
        """Refund an order.

        More text the model also reads."""
        return order_id

    assert refund.name == "refund" and refund.risk is ToolRisk.SIDE_EFFECT
    assert refund.description.startswith("Refund an order.")
    assert refund.context_param == "ctx" and refund.is_async
    assert refund.timeout is not None and refund.timeout.total_seconds() == 5
    assert set(refund.schema["properties"]) == {"order_id", "amount"}
    assert refund.schema["required"] == ["order_id"]
    with pytest.raises(ValidationError):
        refund.args_model.model_validate({"order_id": "B-1"})
    with pytest.raises(ValidationError):  # unknown fields are refused
        refund.args_model.model_validate({"order_id": "A-1", "extra": 1})


def test_one_pydantic_parameter_is_the_argument_model():
    @tool
    def look_up(order: Order) -> dict[str, str]:
        """Look an order up."""
        return {"id": order.order_id}

    assert look_up.args_model is Order and look_up.args_param == "order"
    args = Order(order_id="A-1")
    assert look_up(args) == {"id": "A-1"}  # a tool is still its function


def test_the_schema_digest_changes_with_the_arguments_only():
    def make(doc: str, kind: type) -> str:
        def f(x: int) -> int:
            return x

        f.__annotations__["x"] = kind
        f.__doc__ = doc
        return tool(name="f")(f).schema_digest

    assert make("One.", int) == make("Other words.", int)
    assert make("One.", int) != make("One.", str)


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (lambda: tool(_untyped), "parameter 'x' needs a type"),
        (lambda: tool(name="bad name!")(_documented), "a tool name is 1-64"),
        (lambda: tool(_undocumented), "write a docstring"),
        (
            lambda: tool(amount_field="price")(_documented),
            "amount_field 'price' is not an argument",
        ),
        (lambda: tool(timeout=0)(_documented), "timeout must be positive"),
        (lambda: Agent(name="a", instructions="i", tools=[_documented]), "is not a tool"),  # type: ignore[list-item]
        (lambda: Agent(name="a b", instructions="i"), "a name is letters"),
        (lambda: Agent(name="a", instructions=" "), "give it instructions"),
        (
            lambda: Agent(name="a", instructions="i", tools=[tool(name="ask_human")(_documented)]),
            "built-in tool's name",
        ),
        (
            lambda: Agent(name="a", instructions="i", tools=[tool(_documented), tool(_documented)]),
            "two tools are named",
        ),
        (
            lambda: Agent(
                name="a",
                instructions="i",
                planning=False,
                limits=RunLimits(steps_end="complete_step"),
            ),
            "steps_end applies to planning agents only",
        ),
    ],
)
def test_what_cannot_run_is_refused_in_one_line(declare, message):
    with pytest.raises(ToolDefinitionError, match=re.escape(message)) as raised:
        declare()
    assert "\n" not in str(raised.value)


def _documented(x: int) -> int:
    """Documented."""
    return x


def _untyped(x):
    """Documented."""
    return x


def _undocumented(x: int) -> int:
    return x


def test_a_model_name_is_shorthand_for_a_model():
    agent = Agent(name="a", instructions="i", model="gpt-4o-mini")
    assert agent.model == Model("gpt-4o-mini")


def test_the_registry_refuses_two_tools_or_agents_under_one_name():
    one, two = tool(name="same")(_documented), tool(name="same")(_documented)
    with pytest.raises(ToolDefinitionError, match="two different tools are named 'same'"):
        AgentRegistry().add(Agent(name="a", instructions="i", tools=[one]), two)
    with pytest.raises(ToolDefinitionError, match="two agents are named 'a'"):
        AgentRegistry().add(Agent(name="a", instructions="i"), Agent(name="a", instructions="i"))


def test_agent_modules_that_do_not_load_say_so():
    with pytest.raises(ToolDefinitionError, match=r"cannot import agent module 'no\.such'"):
        load_registry(["no.such"])
    with pytest.raises(ToolDefinitionError, match="defines no Agent"):
        load_registry(["durable_agents.examples.providers"])
    with pytest.raises(ToolDefinitionError, match="AGENT_MODULES names no module"):
        load_registry([])


def test_the_public_api_is_small_and_typed():
    assert sorted(durable_agents.__all__) == [
        "Agent", "AgentGaveNoAnswer", "AgentRegistry", "AgentRequestInvalid", "CallToReview",
        "DurableAgentsPlugin", "Evaluator", "MCPServer", "Memory", "Model", "PluginError",
        "RunBudget", "RunLimits", "RunPolicy", "RunResult", "Settings", "StartOptions",
        "Tool", "ToolContext", "ToolRisk", "Verdict", "delegate", "evaluator", "run_agent",
        "tool",
    ]  # fmt: skip
    for name in durable_agents.__all__:
        assert getattr(durable_agents, name) is not None, name
    assert (ROOT / "durable_agents" / "py.typed").exists()


def test_importing_the_package_loads_nothing_else():
    """Names load on first use: the client does not pull in the worker, and Temporal's
    sandbox meets no second copy of a model class through the package itself."""
    assert modules_loaded_by("durable_agents", "durable_agents.") == "[]"
    assert modules_loaded_by("durable_agents.client", "durable_agents.worker") == "[]"


def modules_loaded_by(module: str, prefix: str) -> str:
    """The modules starting with `prefix` that importing `module` loads, in a fresh
    process outside the clone."""
    code = (
        f"import sys, {module}; print(sorted(m for m in sys.modules if m.startswith({prefix!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/"
    )
    return done.stdout.strip()


# What the bundled examples and the docs' snippets may import of ours: the public package,
# its client, testing kit, what-if and model-client interface (and the examples one
# another).
PUBLIC_MODULES = (
    "durable_agents", "durable_agents.client", "durable_agents.testing",
    "durable_agents.whatif", "durable_agents.models",
)  # fmt: skip


def test_the_docs_snippets_import_only_the_public_package():
    fence = re.compile(r"```python\n(.*?)```", re.DOTALL)
    found = 0
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in fence.findall(doc.read_text()):
            for node in ast.walk(ast.parse(block)):
                names = []
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                for module in names:
                    if module.split(".")[0] == "durable_agents":
                        found += 1
                        assert module in PUBLIC_MODULES, f"{doc.name}: {module}"
    assert found >= 10


def test_the_examples_use_the_public_api_only():
    allowed = {"pydantic", "__future__"}
    # The knowledge-base MCP server stands for a third party's server, not an agent.
    third_party = {"kb_server.py": {"mcp"}}
    for path in (ROOT / "examples").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = node.module
            elif isinstance(node, ast.Import):
                module = node.names[0].name
            else:
                continue
            top = module.split(".")[0]
            if top == "durable_agents":
                ours = module in PUBLIC_MODULES or module.startswith("durable_agents.examples")
                assert ours, f"{path.name}: {module}"
                continue
            known = allowed | third_party.get(path.name, set())
            assert top in known or top in sys.stdlib_module_names, f"{path.name}: {top}"


def test_the_core_names_no_demo_tool():
    demo = set(load_registry(["durable_agents.examples.before_agents"]).tools)
    assert {"pay_invoice", "lookup_invoice", "issue_refund"} <= demo
    for package in ("workflows", "activities", "worker"):
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text()
            found = sorted(name for name in demo if re.search(rf"\b{name}\b", text))
            assert not found, f"{path.relative_to(ROOT)} names demo tools {found}"
