"""CPU time and memory of processes, from the kernel's own accounting (Linux /proc), so a
benchmark charges each process what it spent, not what the wall clock says."""

from __future__ import annotations

import gc
import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def own_cpu_seconds() -> float:
    """User and system CPU of this process, every thread (the SDK's Rust core included)."""
    times = os.times()
    return times.user + times.system


def process_cpu_seconds(pid: int) -> float:
    """User and system CPU of another process (and of its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime: fields 14 and 15


def own_rss_bytes() -> int:
    """Resident memory now, after a collection, so garbage does not count as kept."""
    gc.collect()
    return int(Path("/proc/self/statm").read_text().split()[1]) * _PAGE


def child_pid(program: str, argument: str) -> int | None:
    """The pid of this process's child running `program` with `argument` on its command
    line (the dev server a `WorkflowEnvironment` started, by its port)."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        words = [word.decode(errors="replace") for word in command]
        if parent == me and words and words[0].endswith(program) and argument in words:
            return int(entry.name)
    return None
