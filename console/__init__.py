"""The console: a web page for the people in the loop (docs/console.md).

Server-side pages (FastAPI and Jinja templates, a little JavaScript, no build step) over
the same updates and signals the CLI sends, under a real identity, with every decision
signed by the console's key.
"""
