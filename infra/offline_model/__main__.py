"""`python -m durable_agents.infra.offline_model --port N`: serve the scripted model."""

from __future__ import annotations

import argparse
import sys

from durable_agents.runtime.extras import ExtraMissing, require_all


def main() -> None:
    try:
        require_all("the offline model", "local")
    except ExtraMissing as err:
        sys.exit(f"error: {err}")
    import uvicorn

    from durable_agents.infra.offline_model.server import create_app

    parser = argparse.ArgumentParser(description="Serve the scripted offline model.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    print(f"offline model (scripted, not a language model) on http://{args.host}:{args.port}/v1")
    uvicorn.run(create_app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
