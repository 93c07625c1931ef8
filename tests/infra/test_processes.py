"""The local stack's processes: each part gets only the environment it needs, and a pid
is ours only when its marker names the part and our data dir."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest

from durable_agents.infra.processes import (
    MARKER,
    ProcessFiles,
    ProcessSpec,
    environment_for,
    spawn,
    stop,
)
from durable_agents.infra.stack import part_specs
from durable_agents.runtime.settings import Settings

OURS = {
    "PATH": "/usr/bin",
    "HOME": "/root",
    "OPENAI_API_KEY": "sk-never-leaves-the-worker",
    "AGENT_OPENAI_API_KEY": "sk-alias",
    "AGENT_ENCRYPTION_KEYS": "k1=secret",
    "AWS_SECRET_ACCESS_KEY": "unrelated",
}


def specs(tmp_path: Path) -> dict[str, ProcessSpec]:
    settings = Settings(data_dir=tmp_path, encryption_keys="k1=" + "A" * 43 + "=")
    return {spec.name: spec for spec in part_specs(settings)}


def test_each_part_gets_only_what_it_needs(tmp_path):
    parts = specs(tmp_path)
    temporal = environment_for(parts["temporal"], OURS, "m")
    model = environment_for(parts["model"], OURS, "m")
    codec = environment_for(parts["codec"], OURS, "m")
    worker = environment_for(parts["worker"], OURS, "m")
    console = environment_for(parts["console"], OURS, "m")
    # The console decodes with the keys and reads the stores; the model key never reaches it.
    assert console["AGENT_ENCRYPTION_KEYS"] == "k1=secret"
    assert not any(k in console for k in ("OPENAI_API_KEY", "AGENT_OPENAI_API_KEY"))
    assert "AWS_SECRET_ACCESS_KEY" not in console
    for env in (temporal, model):
        assert not any("secret" in v or v.startswith("sk-") for v in env.values()), env
        assert "AGENT_CODEC_TOKEN" not in env
    assert codec["AGENT_ENCRYPTION_KEYS"] == "k1=secret" and "AGENT_CODEC_TOKEN" in codec
    assert not any(k in codec for k in ("OPENAI_API_KEY", "AGENT_OPENAI_API_KEY"))
    assert "AWS_SECRET_ACCESS_KEY" not in codec
    assert worker["OPENAI_API_KEY"] == "sk-never-leaves-the-worker"
    assert "AGENT_CODEC_TOKEN" not in worker
    assert all(env["PATH"] == "/usr/bin" for env in (temporal, model, codec, worker))


def test_a_spawned_part_does_not_receive_the_model_key(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-spawn-marker")
    spec = ProcessSpec(
        name="sleeper",
        argv=[sys.executable, "-c", "import time; time.sleep(60)"],
        port=None,
        env={},
    )
    files = ProcessFiles(tmp_path, "sleeper")
    process = spawn(spec, files)
    try:
        environ = Path(f"/proc/{process.pid}/environ").read_bytes()
        assert b"sk-spawn-marker" not in environ
        assert files.running_pid() == process.pid
        # The same part name under another data dir is another stack's, never ours.
        assert ProcessFiles(tmp_path / "other", "sleeper").running_pid() is None
        stranger = ProcessFiles(tmp_path / "other", "sleeper")
        stranger.pid_file.parent.mkdir(parents=True)
        stranger.pid_file.write_text(str(process.pid))
        assert stranger.running_pid() is None and stop(stranger) is False
        assert process.poll() is None  # untouched by the other stack's stop
    finally:
        assert stop(files) is True
    assert process.wait(timeout=10) is not None


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs Linux pidfds")
def test_stop_of_a_dead_pid_signals_nothing(tmp_path):
    files = ProcessFiles(tmp_path, "gone")
    files.pid_file.parent.mkdir(parents=True)
    files.pid_file.write_text("999999999")
    assert stop(files) is False and not files.pid_file.exists()


def test_a_part_is_ours_before_it_has_execd(tmp_path):
    """Between its fork and its exec a part has its spawner's environment, not its marker
    (on a busy machine that lasts): the start time its pid file holds makes it ours all the
    same, so `up` never takes the part it just started for a stranger's process."""
    files = ProcessFiles(tmp_path, "slow")
    files.pid_file.parent.mkdir(parents=True)
    held, release = os.pipe()
    pid = os.fork()
    if pid == 0:  # the part, held between its fork and its exec until the test lets go
        try:
            os.close(release)
            os.read(held, 1)
            argv = [sys.executable, "-c", "import time; time.sleep(60)"]
            os.execve(sys.executable, argv, {MARKER: files.marker})
        finally:
            os._exit(1)
    os.close(held)
    try:
        files.record(pid)  # what spawn does once the child exists
        assert f"{MARKER}=".encode() not in Path(f"/proc/{pid}/environ").read_bytes()
        assert files.running_pid() == pid
        # The same pid with another start time is a recycled pid: never ours.
        recycled = ProcessFiles(tmp_path, "recycled")
        recycled.pid_file.write_text(f"{pid} 1")
        assert recycled.running_pid() is None and stop(recycled) is False
        assert stop(files) is True and not files.pid_file.exists()
    finally:
        os.close(release)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_the_keys_up_made_reach_the_parts_that_read_payloads_alone(tmp_path):
    """With the keys `up` made in the data dir, the worker, the console and the codec
    server are told where they are; the dev server and the offline model are not."""
    (tmp_path / "keys").write_text("k1=" + "A" * 43 + "=\n")
    parts = {spec.name: spec for spec in part_specs(Settings(data_dir=tmp_path))}
    told = {name for name, spec in parts.items() if "AGENT_ENCRYPTION_KEYS_FILE" in spec.env}
    assert told == {"worker", "console", "codec"}
    assert parts["worker"].env["AGENT_ENCRYPTION_KEYS_FILE"] == str(tmp_path / "keys")
