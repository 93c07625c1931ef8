"""The client functions: start and steer runs, schedules, the agents this process knows,
time travel, releases, stored texts, doctor and signing. The CLI (starters/), the console
and the public client (durable_agents.client) all call these; no rule of a run lives here."""
