"""Background processes of the local stack: start detached, remember by pid file, stop.

Each process writes its log under <data dir>/logs and its pid under <data dir>/run,
so `agentctl down` and `agentctl stack` work from any later shell.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

# Set in each process's environment so a recycled pid is never mistaken for ours.
MARKER = "DURABLE_AGENTS_PROCESS"


class StackError(RuntimeError):
    """The stack could not be brought up or down; the message says why and what to do."""


@dataclass(frozen=True)
class ProcessSpec:
    name: str
    argv: list[str]
    port: int | None
    env: dict[str, str]


@dataclass(frozen=True)
class ProcessFiles:
    root: Path
    name: str

    @property
    def pid_file(self) -> Path:
        return self.root / "run" / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.root / "logs" / f"{self.name}.log"

    def running_pid(self) -> int | None:
        """The pid from the pid file if that process is alive and still ours."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        try:
            os.kill(pid, 0)
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (ProcessLookupError, PermissionError, FileNotFoundError):
            return None
        if stat.rsplit(") ", 1)[-1].startswith("Z"):
            return None  # exited, waiting to be reaped
        marker = f"{MARKER}={self.name}".encode()
        return pid if marker in environ else None

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def spawn(spec: ProcessSpec, files: ProcessFiles) -> subprocess.Popen[bytes]:
    files.pid_file.parent.mkdir(parents=True, exist_ok=True)
    files.log_file.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **spec.env}
    env[MARKER] = spec.name
    with files.log_file.open("ab") as log:
        process = subprocess.Popen(
            [*spec.argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    files.pid_file.write_text(str(process.pid))
    return process


def stop(files: ProcessFiles, timeout: float = 15.0) -> bool:
    """SIGTERM, wait, then SIGKILL. Returns whether a process was running."""
    pid = files.running_pid()
    if pid is None:
        files.pid_file.unlink(missing_ok=True)
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and files.running_pid() == pid:
        time.sleep(0.1)
    if files.running_pid() == pid:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    files.pid_file.unlink(missing_ok=True)
    return True


def stop_strays(root: Path) -> list[int]:
    """SIGKILL every process of ours whose data dir is `root`, pid file or not: the last
    sweep after a chaos run, where a part may be killed while another is starting."""
    wanted = f"AGENT_DATA_DIR={root}".encode()
    killed = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in environ and any(item.startswith(MARKER.encode()) for item in environ):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
    return killed
