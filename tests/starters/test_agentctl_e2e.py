"""agentctl end to end, as a person types it: up, run, approve, show, down, up again."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import re
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from durable_agents.infra.processes import MARKER
from durable_agents.runtime.encryption import ENCODING, Keyring
from tests import temporal_cli

AGENTCTL = str(Path(sys.executable).parent / "agentctl")
# Ports for the stack's servers, below Linux's ephemeral range (32768-60999): a port the
# OS hands out for outgoing connections, or to the dev server's own internal services,
# can be taken between choosing it here and the server binding it (seen: the Web UI's).
STACK_PORTS = range(20_000, 32_000)
_ports_given: set[int] = set()


def stack_port() -> int:
    while True:
        port = random.choice(STACK_PORTS)
        if port in _ports_given:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _ports_given.add(port)
        return port


class Stack:
    def __init__(self, data_dir: Path) -> None:
        self.env = {
            **os.environ,
            "AGENT_DATA_DIR": str(data_dir),
            "AGENT_TEMPORAL_PORT": str(stack_port()),
            "AGENT_TEMPORAL_UI_PORT": str(stack_port()),
            "AGENT_OFFLINE_MODEL_PORT": str(stack_port()),
            "AGENT_METRICS_PORT": str(stack_port()),
            "AGENT_CODEC_PORT": str(stack_port()),
            "AGENT_CONSOLE_PORT": str(stack_port()),
            "COLUMNS": "200",
        }
        for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
            self.env.pop(key, None)

    def __call__(
        self,
        *args: str,
        check: bool = True,
        env: dict[str, str] | None = None,
        stdin: str | None = None,
    ):
        done = subprocess.run(
            [AGENTCTL, *args],
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=180,
            input=stdin,
            stdin=subprocess.DEVNULL if stdin is None else None,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"agentctl {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done

    def show(self, run_id: str) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(self("show", run_id, "--json").stdout)
        return state

    def wait_status(self, run_id: str, status: str, within: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + within
        while True:
            state = self.show(run_id)
            if state["status"] == status:
                return state
            if time.monotonic() > deadline:
                raise AssertionError(f"{run_id} is {state['status']}, not {status}")
            time.sleep(0.3)


@pytest.fixture
def stack(tmp_path):
    stack = Stack(tmp_path / "data")
    yield stack
    stack("down", check=False)


def test_pay_invoice_through_approval_and_across_a_restart(stack):
    up = stack("up")
    assert "retention 7 days, daily prune schedule 'durable-agents-prune'" in up.stdout
    assert f"Console: http://127.0.0.1:{stack.env['AGENT_CONSOLE_PORT']}" in up.stdout
    listing = stack("stack").stdout
    # Keys by default: the codec server runs beside the other four.
    assert listing.count("running") == 5 and "the console" in listing
    address = f"127.0.0.1:{stack.env['AGENT_TEMPORAL_PORT']}"
    schedule = temporal_cli.run(
        address, "default", "schedule", "describe", "--schedule-id", "durable-agents-prune",
        "-o", "json",
    )  # fmt: skip
    assert schedule.returncode == 0, schedule.stderr
    assert "PruneWorkflow" in schedule.stdout

    started = json.loads(
        stack(
            "run",
            "Pay INV-1001",
            "--agent",
            "before-agents",
            "--label",
            "pay-invoice",
            "--id",
            "e2e-1",
            "--json",
        ).stdout
    )
    assert started["run_id"] == "e2e-1" and started["status"] in {"planning", "running"}
    waiting = stack.wait_status("e2e-1", "awaiting_approval")
    assert waiting["approvals"][0]["tool"] == "pay_invoice"
    _console_shows_it_waiting(stack, "e2e-1")

    stack("approve", "e2e-1", "--as", "carol", "--comment", "looks right")
    done = stack.wait_status("e2e-1", "completed")
    assert set(done) >= {"run_id", "status", "plan", "usage"}
    assert done["approvals"][0]["decided_by"] == "carol"
    assert all(step["status"] == "done" for step in done["plan"])
    # Beside the final answer, what the run performed, from the ledger.
    assert done["effects"]["total"] == 3
    assert [e["tool"] for e in done["effects"]["recent"]] == [
        "draft_email",
        "pay_invoice",
        "send_email",
    ]

    effects = json.loads(stack("effects", "e2e-1", "--json").stdout)
    # From the effect ledger, our store: readable wherever the store is.
    assert [e["tool"] for e in effects] == ["draft_email", "pay_invoice", "send_email"]
    assert all(e["idempotency_key"].startswith("e2e-1@") for e in effects)
    assert all(e["result"]["ok"] for e in effects)
    assert "pay_invoice" in stack("effects", "e2e-1").stdout

    watched = stack("watch", "e2e-1")
    assert "completed" in watched.stdout and "is paid" in watched.stdout

    again = stack("approve", "e2e-1", check=False)
    assert again.returncode == 1
    assert (
        again.stderr.strip() == "error: run e2e-1 is closed (completed); it takes no more actions"
    )

    kept = stack("prune", "--older-than", "30d", "--dry-run").stdout
    assert kept.startswith("would prune 0 runs")
    # An open run is kept whatever its age; the closed one goes at age zero.
    stack(
        "run",
        "stays open",
        "--agent",
        "before-agents",
        "--id",
        "e2e-open",
        "--label",
        "pay-invoice",
    )
    stack.wait_status("e2e-open", "awaiting_approval")
    # No age below the deployment's retention deletes anything (tests/integration/
    # test_pruning.py prunes through a worker whose retention is shorter).
    refused = stack("prune", "--older-than", "0s", check=False)
    assert refused.returncode == 1 and refused.stderr.strip() == (
        "error: nothing deleted: the age asked (0 s) is below this deployment's retention "
        "of 7 days (AGENT_RETENTION_DAYS): ask for 7d or more"
    )
    report = json.loads(stack("prune", "--older-than", "7d", "--dry-run", "--json").stdout)
    assert report["pruned"] == [] and report["kept_open"] == 1 and report["kept_recent"] >= 1
    stack("cancel", "e2e-open")
    stack.wait_status("e2e-open", "cancelled")

    listed = stack("list", "--status", "completed", "--json").stdout
    assert [r["run_id"] for r in json.loads(listed)] == ["e2e-1"]

    stack("down")
    assert stack("stack").stdout.count("stopped") == 5

    stack("up")
    assert stack.show("e2e-1")["status"] == "completed"  # the run survived down and up

    demo = stack("demo")
    assert "approving as demo-auto-approver" in demo.stdout
    assert "/namespaces/default/workflows/demo-" in demo.stdout


def up_with_port_taken(stack, setting):
    """`agentctl up` while another process listens on the port `setting` names."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        return port, stack("up", check=False, env={**stack.env, setting: str(port)})


def test_a_taken_port_is_a_clear_error(stack):
    port, result = up_with_port_taken(stack, "AGENT_TEMPORAL_PORT")
    assert result.returncode == 1
    assert f"temporal: port {port} is already in use" in result.stderr
    assert "AGENT_TEMPORAL_PORT" in result.stderr


def test_a_failed_up_stops_what_it_started(stack):
    """The console cannot start (its port is taken): `up` stops the four parts it started
    before it, removes their pid files, and says why in one line."""
    port, result = up_with_port_taken(stack, "AGENT_CONSOLE_PORT")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"error: console: port {port} is already in use by another process; stop it or "
        "choose another port (AGENT_CONSOLE_PORT)"
    ]
    data = Path(stack.env["AGENT_DATA_DIR"]).resolve()
    assert processes_of(data) == []
    assert list((data / "run").iterdir()) == []
    for part in ("temporal", "codec", "model", "worker"):
        assert f"{part}: starting" in result.stdout
        assert f"{part}: stopped (up did not finish)" in result.stdout
    assert "running" not in stack("stack").stdout.replace("not running", "")


def processes_of(data: Path) -> list[str]:
    """The live processes marked as a part of the stack whose data dir is `data`."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):
            marked = [v for v in environ.read_bytes().split(b"\0") if v.startswith(MARKER.encode())]
            if any(v.endswith(f"@{data}".encode()) for v in marked):
                found.append(environ.parent.name)
    return found


def test_up_makes_the_keys_and_a_run_started_from_the_cli_is_sealed(stack):
    """A fresh data dir: `up` makes the keys (readable by their owner alone), every part
    that reads payloads gets them, and `agentctl run` beside the stack finds them: the
    start's input in the server's history is ciphertext."""
    data = Path(stack.env["AGENT_DATA_DIR"]).resolve()
    up = stack("up")
    keys = data / "keys"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600
    made = keys.read_text()
    assert Keyring.parse(made).active == "k1"
    assert f"keys: made {keys}" in up.stdout
    for part in ("worker", "console", "codec"):
        pid = (data / "run" / f"{part}.pid").read_text().split()[0]
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"AGENT_ENCRYPTION_KEYS_FILE={keys}".encode() in environ, part

    stack("run", "Pay INV-1001", "--agent", "before-agents", "--label", "pay-invoice",
          "--id", "sealed-1")  # fmt: skip
    address = f"127.0.0.1:{stack.env['AGENT_TEMPORAL_PORT']}"
    shown = temporal_cli.run(address, "default", "workflow", "show", "-w", "sealed-1", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    start = json.loads(shown.stdout)["events"][0]["workflowExecutionStartedEventAttributes"]
    encodings = {base64.b64decode(p["metadata"]["encoding"]) for p in start["input"]["payloads"]}
    assert encodings == {ENCODING}
    stack.wait_status("sealed-1", "awaiting_approval")  # the worker opened it: same keys

    stack("down")
    stack("up")
    assert keys.read_text() == made  # made once: the runs stay readable


def test_commands_fail_with_one_line_when_no_stack_runs(stack):
    result = stack("show", "anything", check=False)
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot reach Temporal")
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_process_that_dies_on_start_shows_the_tail_of_its_log(stack):
    port, result = up_with_port_taken(stack, "AGENT_TEMPORAL_UI_PORT")
    assert result.returncode == 1
    assert result.stderr.startswith("error: temporal exited with code 1 while starting")
    assert f"can't set UI port {port}" in result.stderr  # the log's own words
    assert "running" not in stack("stack").stdout.replace("not running", "")


def test_people_verbs_from_the_command_line(stack):
    stack("up")
    stack("run", "ask", "--agent", "before-agents", "--label", "ask-human", "--id", "q-1")
    stack(
        "run",
        "long",
        "--agent",
        "before-agents",
        "--label",
        "long",
        "--steps",
        "300",
        "--id",
        "l-1",
    )
    stack.wait_status("q-1", "awaiting_input")
    inbox = json.loads(stack("inbox", "--json").stdout)
    assert {(i["run_id"], i["waiting_for"]) for i in inbox} >= {("q-1", "input")}

    wrong = stack("answer", "q-1", "INV-7", "--as", "dan", check=False)
    assert wrong.returncode == 1
    assert wrong.stderr.strip() == "error: refused: answer must be one of INV-1001, INV-1002"
    stack("answer", "q-1", "INV-1002", "--as", "dan")
    assert stack.wait_status("q-1", "completed")["questions"][0]["answered_by"] == "dan"

    stack("pause", "l-1", "--as", "eve", "--reason", "inspect")
    stack.wait_status("l-1", "paused")
    bad = stack("edit", "l-1", "--set", "pending_steps=7", "--as", "eve", check=False)
    assert bad.returncode == 1 and bad.stderr.startswith("error: invalid input: pending_steps")
    stack("edit", "l-1", "--set", 'pending_steps=["Wrap up"]', "--as", "eve")
    assert stack.show("l-1")["plan"][-1]["title"] == "Wrap up"
    stack("resume", "l-1", "--as", "eve")
    stack.wait_status("l-1", "completed")

    stack("run", "pay", "--agent", "before-agents", "--label", "pay-invoice", "--id", "c-1")
    stack.wait_status("c-1", "awaiting_approval")
    stack("cancel", "c-1", "--as", "fay", "--reason", "disputed")
    cancelled = stack.wait_status("c-1", "cancelled")
    assert cancelled["cancel_requested_by"] == "fay"


def test_time_travel_from_the_command_line(stack, tmp_path):
    stack("up")
    stack("run", "pay", "--agent", "before-agents", "--label", "pay-invoice", "--id", "tt-1")
    stack.wait_status("tt-1", "awaiting_approval")
    stack("approve", "tt-1", "--as", "alice")
    final = stack.wait_status("tt-1", "completed")

    moments = json.loads(stack("history", "tt-1", "--json").stdout)
    assert [m["step"] for m in moments] == list(range(1, len(moments) + 1))
    assert moments[-1]["kind"] == "completed"
    assert any(m["kind"] == "tool" and "pay_invoice" in m["detail"] for m in moments)
    assert any("submit_plan" in m["outcome"] for m in moments)  # texts from the transcript
    last = json.loads(stack("history", "tt-1", "--step", str(len(moments)), "--json").stdout)
    assert last == final
    asked = next(m["step"] for m in moments if m["kind"] == "approval requested")
    approved = next(m["step"] for m in moments if m["kind"] == "approved")
    changes = json.loads(stack("history", "tt-1", "--diff", str(approved), "--json").stdout)
    assert {"path": "approvals[0].decided_by", "old": None, "new": "alice"} in changes

    exported = tmp_path / "tt-1.json"
    stack("export", "tt-1", "-o", str(exported))
    assert "replays cleanly" in stack("replay", str(exported)).stdout

    stack("fork", "tt-1", "--from-step", str(asked), "--id", "tt-1-fork")
    stack.wait_status("tt-1-fork", "awaiting_approval")
    stack("approve", "tt-1-fork", "--as", "bob")
    forked = stack.wait_status("tt-1-fork", "completed")
    assert forked["parent"] == {"run_id": "tt-1", "moment": asked}
    charges = [e for e in json.loads(stack("effects", "tt-1-fork", "--json").stdout)]
    assert [e["tool"] for e in charges] == ["pay_invoice", "send_email"]

    beyond = stack("rewind", "tt-1", "--to-step", "999", check=False)
    assert beyond.returncode == 1
    assert (
        beyond.stderr.strip()
        == f"error: run tt-1 has steps 1 to {len(moments)}; there is no step 999"
    )
    nothing = stack("history", "tt-1", "--step", "0", check=False)
    assert nothing.returncode == 2 and "Invalid value for '--step'" in nothing.stderr


def test_an_encrypted_stack_runs_the_demo_and_the_web_ui_decodes(stack):
    from durable_agents.runtime.encryption import new_key

    stack.env["AGENT_ENCRYPTION_KEYS"] = f"k1={new_key()}"
    demo = stack("demo")
    assert not (Path(stack.env["AGENT_DATA_DIR"]) / "keys").exists()  # the keys given are used
    assert "approving as demo-auto-approver" in demo.stdout
    assert "codec: starting" in demo.stdout
    assert stack("stack").stdout.count("running") == 5
    found = re.search(r"run (demo-[\d-]+)", demo.stdout)
    assert found is not None
    run_id = found.group(1)
    address = f"127.0.0.1:{stack.env['AGENT_TEMPORAL_PORT']}"

    # The server holds ciphertext: its own export of the history has no goal text.
    shown = temporal_cli.run(address, "default", "workflow", "show", "-w", run_id, "-o", "json")
    assert shown.returncode == 0, shown.stderr
    raw = shown.stdout
    payloads = list(payloads_in(json.loads(raw)))
    encodings = {base64.b64decode(p["metadata"]["encoding"]) for p in payloads}
    assert b"binary/encrypted" in encodings
    assert not any(b"INV-1001" in base64.b64decode(p.get("data", "")) for p in payloads)

    # The Web UI is wired to the codec server and can decode what it shows.
    ui = f"http://127.0.0.1:{stack.env['AGENT_TEMPORAL_UI_PORT']}"
    endpoint = httpx.get(f"{ui}/api/v1/settings", timeout=10).json()["Codec"]["Endpoint"]
    assert endpoint.startswith(f"http://127.0.0.1:{stack.env['AGENT_CODEC_PORT']}/ui/")
    start = json.loads(raw)["events"][0]["workflowExecutionStartedEventAttributes"]
    decoded = httpx.post(
        f"{endpoint}/decode",
        json={"payloads": start["input"]["payloads"]},
        headers={"Origin": ui, "X-Namespace": "default"},
        timeout=10,
    )
    assert decoded.status_code == 200
    assert decoded.headers["access-control-allow-origin"] == ui
    [payload] = decoded.json()["payloads"]
    assert "INV-1001" in base64.b64decode(payload["data"]).decode()
    # Without the token, nothing is decoded.
    base = endpoint.split("/ui/")[0]
    refused = httpx.post(f"{base}/decode", json={"payloads": start["input"]["payloads"]})
    assert refused.status_code == 401

    # The codec server's own token is in no process's command line (the UI's is).
    token = (Path(stack.env["AGENT_DATA_DIR"]) / "codec-token").read_text().strip()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            assert token.encode() not in cmdline.read_bytes(), cmdline

    # `down` stops the codec server even when the keys are no longer set.
    plain = {k: v for k, v in stack.env.items() if k != "AGENT_ENCRYPTION_KEYS"}
    assert "codec: stopped" in stack("down", env=plain).stdout
    assert "codec: not running" in stack("down").stdout


def payloads_in(node):
    """Every payload ({"metadata", "data"}) anywhere in a JSON history."""
    if isinstance(node, dict):
        if "metadata" in node and "encoding" in node["metadata"]:
            yield node
        for value in node.values():
            yield from payloads_in(value)
    elif isinstance(node, list):
        for value in node:
            yield from payloads_in(value)


def _console_shows_it_waiting(stack: Stack, run_id: str) -> None:
    """`agentctl up` started the console: a user added from the CLI signs in and finds the
    run waiting in the inbox."""
    added = stack("users", "add", "carol", "--password-stdin", stdin="carol-password\n")
    assert added.stdout.startswith("added carol")
    with httpx.Client(base_url=f"http://127.0.0.1:{stack.env['AGENT_CONSOLE_PORT']}") as web:
        token = re.search(r'name="csrf" value="([^"]+)"', web.get("/login").text)
        assert token is not None
        form = {"csrf": token.group(1), "name": "carol", "password": "carol-password"}
        assert web.post("/login", data=form).status_code == 303
        inbox = web.get("/").text
    assert f'data-run="{run_id}"' in inbox and "pay_invoice" in inbox
