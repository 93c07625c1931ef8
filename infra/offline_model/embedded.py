"""The offline model served from a thread of the current process, over real HTTP.

For tests and benchmarks, which want the server on a free port without a child process.
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from durable_agents.infra.offline_model.server import create_app


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmbeddedModelServer:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        config = uvicorn.Config(create_app(), host="127.0.0.1", port=self.port, log_level="error")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True, name="offline-model")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 10.0) -> None:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"offline model did not start on port {self.port}")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)
