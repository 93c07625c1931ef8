"""agentctl, the command line: typer verbs, one module per group, each calling one client
function of control/; how runs look on a terminal."""
