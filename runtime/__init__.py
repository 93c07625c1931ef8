"""What every process of ours stands on: its settings, the connection to Temporal, the
payload encryption, telemetry and worker versioning. Below activities/, worker/, the
client functions and the console: nothing here imports them."""
