"""Deterministic workflow code only: the agent workflow, its state model, its policy."""
