"""The bundled agents, written only with the public API (`durable_agents`): the proof
that it suffices. One file per agent; `examples.providers` holds the simulated
third-party services their tools call."""
