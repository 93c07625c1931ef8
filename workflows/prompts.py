"""The fixed texts the workflow writes into the conversation.

The offline model recognises the step instruction by its `Step K/N:` prefix, the
way a real model reads it: from the conversation, not from a side channel.
"""

from __future__ import annotations

from durable_agents.workflows.tools import ASK_HUMAN, COMPLETE_STEP, SUBMIT_PLAN

# How a planning agent works, said before its own instructions.
PLANNING_PROTOCOL = (
    "You are a careful agent that plans, then executes one plan step at a time with tools. "
    f"First call {SUBMIT_PLAN} with short step titles. For each step, call tools as needed, "
    f"then finish the step by replying without tool calls or by calling {COMPLETE_STEP}."
)
# How a plain tool loop works.
LOOP_PROTOCOL = (
    "Call tools as needed to reach the goal; when you are done, reply with your final "
    f"answer and no tool call. Call {ASK_HUMAN} when only a person can tell you something."
)
LOOP_STEP_TITLE = "Reach the goal"


def system_prompt(instructions: str, *, planning: bool) -> str:
    """The system message: our protocol, then the agent's own instructions."""
    protocol = PLANNING_PROTOCOL if planning else LOOP_PROTOCOL
    return f"{protocol} {instructions.strip()}"


def goal_message(goal: str) -> str:
    return f"Goal: {goal}\nMake a plan."


def task_message(goal: str) -> str:
    """A plain loop's opening message."""
    return f"Goal: {goal}"


STEP_PATTERN = r"^Step (\d+)/(\d+):"


def step_message(index: int, total: int, title: str) -> str:
    return f"Step {index}/{total}: {title}"


FINAL_MESSAGE = "All steps are done. Write the final answer for the user."


def final_message(recap: list[str]) -> str:
    """The final instruction; with a step-scoped context it recalls what the steps found."""
    if not recap:
        return FINAL_MESSAGE
    return FINAL_MESSAGE + "\nWhat the steps found:\n" + "\n".join(recap)


# What precedes the schema in answer_shape (the offline model reads the schema after it).
ANSWER_SHAPE_MARK = "Its JSON schema: "


def answer_shape(name: str, schema: str) -> str:
    """What an agent with a declared answer type is told its answer must be."""
    return f"\nAnswer with one JSON object, a {name}, and nothing else. {ANSWER_SHAPE_MARK}{schema}"


def answer_again(name: str, error: str) -> str:
    return f"That answer is not a valid {name} ({error}). Answer again: the JSON object only."


# Real endpoints cut replies short (finish_reason "length" or "content_filter"): such a
# reply is not an answer, so the turn goes on.
CUT_SHORT = (
    "Your reply was cut short ({reason}) before you finished. Go on from where you "
    "stopped: call the tool you meant to call, or finish the step."
)
END_WITH_COMPLETE_STEP = "This step ends only when you call complete_step with a summary."
FINAL_CUT_SHORT = "Your answer was cut short ({reason}). Go on from where you stopped."


PLAN_ACCEPTED = "Plan accepted."
STEP_MARKED_DONE = "Step marked as done."


def argument_error(tool: str, error: str) -> str:
    return f"error: invalid arguments for {tool}: {error}"


def unknown_tool(tool: str, known: list[str]) -> str:
    return f"error: unknown tool {tool!r}; available tools: {', '.join(known)}"


def denied(tool: str, rule: str, reason: str) -> str:
    return f"denied by rule {rule}: {reason} (the {tool} call was not executed)"


def tool_failed(tool: str, error: str) -> str:
    return f"error: {tool} failed: {error}"


def rejected(tool: str, by: str, comment: str) -> str:
    suffix = f": {comment}" if comment else ""
    return f"rejected by {by}{suffix} (the {tool} call was not executed)"


def delegate_result(agent: str, status: str, answer: str | None) -> str:
    """What the model reads as a delegate's result: the sub-agent's answer, or its end."""
    if status == "completed":
        return answer or f"(the {agent} agent gave an empty answer)"
    why = f": {answer}" if answer else ""
    return f"error: the {agent} agent's run {status}{why}"
