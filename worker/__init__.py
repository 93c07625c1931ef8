"""Process wiring: settings, the Temporal client, the worker entry point."""
