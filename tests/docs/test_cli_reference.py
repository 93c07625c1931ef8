"""docs/cli.md names every verb agentctl has, groups' verbs included."""

from __future__ import annotations

from pathlib import Path

import typer.main

from durable_agents.starters.cli import app

CLI_DOC = (Path(__file__).parent.parent.parent / "docs" / "cli.md").read_text()


def test_every_verb_is_in_the_reference():
    command = typer.main.get_command(app)
    missing = []
    for name, verb in command.commands.items():  # type: ignore[attr-defined]
        subverbs = getattr(verb, "commands", {})
        for full in [f"{name} {sub}" for sub in subverbs] or [name]:
            _, _, sub = full.partition(" ")
            written = (f"`{full}", f"`agentctl {full}", *([f"/ `{sub}"] if sub else []))
            if not any(form in CLI_DOC for form in written):
                missing.append(full)
    assert missing == []
