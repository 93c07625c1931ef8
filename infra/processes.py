"""Background processes of the local stack: start detached, remember by pid file, stop.

Each process writes its log under <data dir>/logs and its pid under <data dir>/run,
so `agentctl down` and `agentctl stack` work from any later shell.

A pid file holds the pid and the process's start time, read at spawn: the pair names that
one process for ever (a pid is reused, never with the start time it had). So a part is
ours from the moment it is spawned, before it has exec'd and carries its marker (between
fork and exec it has our environment; during exec, none): on a busy machine `up` would
otherwise take its own part just started for a stranger.
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

# Set in each process's environment as "<part>@<data dir>", so a recycled pid, or a part of
# another stack (another data dir), is never mistaken for ours.
MARKER = "DURABLE_AGENTS_PROCESS"
# What every part inherits from our environment; nothing else unless its spec says so.
BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "VIRTUAL_ENV")


class StackError(RuntimeError):
    """The stack could not be brought up or down; the message says why and what to do."""


@dataclass(frozen=True)
class ProcessSpec:
    name: str
    argv: list[str]
    port: int | None
    env: dict[str, str]
    # Which of our own environment variables the part also inherits, by prefix ("" for
    # all): the worker needs the model key and the encryption keys, the dev server and
    # the offline model need neither.
    inherit: tuple[str, ...] = ()
    withhold: tuple[str, ...] = ()  # never passed on, whatever `inherit` says


def environment_for(spec: ProcessSpec, ours: dict[str, str], marker: str) -> dict[str, str]:
    """The part's whole environment: the base, what it inherits, its own settings."""
    env = {k: v for k, v in ours.items() if k in BASE_ENV}
    env |= {
        k: v
        for k, v in ours.items()
        if any(k.startswith(p) for p in spec.inherit) and not any(w in k for w in spec.withhold)
    }
    return env | spec.env | {MARKER: marker}


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
        """The pid from the pid file if that process is alive and still ours: the one we
        spawned (same start time), or, for a pid file without one, marked as this part."""
        try:
            pid_text, _, started = self.pid_file.read_text().strip().partition(" ")
            pid = int(pid_text)
        except (FileNotFoundError, ValueError):
            return None
        try:
            os.kill(pid, 0)
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat.rsplit(") ", 1)[-1].startswith("Z"):
                return None  # exited, waiting to be reaped
            if started:
                return pid if _start_time(stat) == started else None
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except (ProcessLookupError, PermissionError, FileNotFoundError):
            return None
        return pid if f"{MARKER}={self.marker}".encode() in environ else None

    def record(self, pid: int) -> None:
        """Write the pid file of a process just spawned (its start time beside the pid):
        before it has exec'd, it is ours already."""
        stat = Path(f"/proc/{pid}/stat").read_text()
        written = self.pid_file.with_suffix(".pid.new")
        written.write_text(f"{pid} {_start_time(stat)}")
        written.replace(self.pid_file)  # whole or not at all, for a reader in another shell

    @property
    def marker(self) -> str:
        return f"{self.name}@{self.root}"

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
    env = environment_for(spec, dict(os.environ), files.marker)
    with files.log_file.open("ab") as log:
        process = subprocess.Popen(
            [*spec.argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    files.record(process.pid)  # unreaped, the child keeps its pid: read before any wait
    return process


def _start_time(stat: str) -> str:
    """A process's start time (clock ticks after boot), from its /proc/PID/stat text: the
    22nd field, counted after the command name (which may hold spaces and parentheses)."""
    return stat.rsplit(") ", 1)[-1].split()[19]


def stop(files: ProcessFiles, timeout: float = 15.0) -> bool:
    """SIGTERM, wait, then SIGKILL. Returns whether a process was running.

    The process is held by a pidfd opened before it is checked: signals go to that very
    process, so a pid reused between the check and the kill is never signalled."""
    pid = files.running_pid()
    if pid is None:
        files.pid_file.unlink(missing_ok=True)
        return False
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        files.pid_file.unlink(missing_ok=True)
        return False
    try:
        if files.running_pid() != pid:  # checked again, now that the pidfd pins it
            return False
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and files.running_pid() == pid:
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            if files.running_pid() == pid:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)
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
        ours = f"@{root}".encode()
        marked = any(i.startswith(MARKER.encode()) and i.endswith(ours) for i in environ)
        if wanted in environ and marked:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
    return killed
