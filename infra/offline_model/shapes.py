"""Answers in shape: when a run asks for its answer as one JSON object of a schema (an
agent's declared answer type, workflows/prompts.py: answer_shape), the scripted model's
plain answer becomes the smallest object the schema accepts, with "(scripted)" in its
text fields: plainly scripted, and valid."""

from __future__ import annotations

import json
from typing import Any

from durable_agents.workflows.prompts import ANSWER_SHAPE_MARK

SCRIPTED_TEXT = "(scripted)"


def asked_schema(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The schema the run's last instruction asked the answer to follow, if any."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        _, mark, schema = str(message.get("content") or "").rpartition(ANSWER_SHAPE_MARK)
        if not mark:
            continue
        try:
            found = json.loads(schema)
        except ValueError:
            return None
        return found if isinstance(found, dict) else None
    return None


def in_shape(content: str | None, messages: list[dict[str, Any]]) -> str | None:
    """The scripted answer, made an instance of the schema asked for (kept as it is when
    nothing was asked or it is JSON already)."""
    schema = asked_schema(messages)
    if schema is None:
        return content
    try:
        json.loads(content or "")
        return content
    except ValueError:
        return json.dumps(example(schema, schema.get("$defs", {})))


def example(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> Any:
    """The simplest value of a JSON schema as pydantic writes them."""
    if depth > 20:
        return None
    if "$ref" in schema:
        return example(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for choice in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(choice, []) if o.get("type") != "null"]
        if options:
            return example(options[0], defs, depth + 1)
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: example(sub, defs, depth + 1) for name, sub in properties.items()}
    if kind == "array":
        least = int(schema.get("minItems", 0))
        return [example(schema.get("items", {}), defs, depth + 1) for _ in range(least)]
    if kind == "string":
        return SCRIPTED_TEXT
    if kind in ("integer", "number"):
        return schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1)
    if kind == "boolean":
        return True
    return None
