"""The client side: functions that wrap the Temporal client, and the agentctl CLI on top."""
