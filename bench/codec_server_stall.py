"""The codec server under the request that stalled it (issue 52): 8 MB of empty payloads,
about 2.8 million, on the Web UI's decode path; then under the largest request it accepts
(MAX_PAYLOADS sealed payloads, MAX_PAYLOAD_BYTES in all); then under one payload with as
many metadata entries as MAX_JSON_VALUES lets in. For each, prints /health's
latency while it is in flight (the slowest of the probes), and the server's memory (RSS,
with any processes it started) at start, at peak and after.

    python -m bench.codec_server_stall

The server is the real one, started as `agentctl up` starts it, over real HTTP. Figures
only: it never exits non-zero.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from durable_agents.infra.offline_model.embedded import free_port
from durable_agents.runtime.encryption import ENCODING, KEY_ID, Keyring, new_key
from durable_agents.worker.codec_server import (
    MAX_BODY_BYTES,
    MAX_JSON_VALUES,
    MAX_PAYLOAD_BYTES,
    MAX_PAYLOADS,
    ui_token,
)

TOKEN = "codec-bench-token-of-32-bytes-or-more-0123"


def rss_mb(pid: int) -> float:
    """The resident memory of `pid` and of every process under it, in MB."""
    total = 0
    pids = [pid]
    while pids:
        current = pids.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            for task in Path(f"/proc/{current}/task").iterdir():
                pids += [int(child) for child in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def attack_body() -> bytes:
    """The largest body the server reads, all empty payloads: {"payloads":[{},{},...]}."""
    head, tail = b'{"payloads":[', b"{}]}"
    count = (MAX_BODY_BYTES - len(head) - len(tail)) // 3
    return head + b"{}," * count + tail


def one_wide_payload() -> bytes:
    """One payload with as many metadata entries as MAX_JSON_VALUES lets in: the costliest
    shape to parse and convert of what passes that cap."""
    entries = ",".join(f'"{n:x}":""' for n in range(MAX_JSON_VALUES // 2 - 2))
    return ('{"payloads":[{"metadata":{' + entries + "}}]}").encode()


def sealed(keyring: Keyring, size: int) -> Payload:
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b"x" * size)
    key_id, data = keyring.encrypt(plain.SerializeToString())
    return Payload(metadata={"encoding": ENCODING, KEY_ID: key_id.encode()}, data=data)


def largest_body(keyring: Keyring) -> bytes:
    """MAX_PAYLOADS sealed payloads, MAX_PAYLOAD_BYTES in all (or just under)."""
    size = MAX_PAYLOAD_BYTES // MAX_PAYLOADS
    while Payloads(payloads=[sealed(keyring, size)]).ByteSize() * MAX_PAYLOADS > MAX_PAYLOAD_BYTES:
        size -= 1
    payloads = [sealed(keyring, size) for _ in range(MAX_PAYLOADS)]
    return json_format.MessageToJson(Payloads(payloads=payloads), indent=None).encode()


def start(data_dir: str, keys: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        "AGENT_ENCRYPTION_KEYS": keys,
        "AGENT_CODEC_TOKEN": TOKEN,
        "AGENT_CODEC_PORT": str(port),
        "AGENT_DATA_DIR": data_dir,
        "PATH": "/usr/bin:/bin",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "durable_agents.worker.codec_server"], env=env
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            httpx.get(f"{url}/health", timeout=1).raise_for_status()
            return process, url
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the codec server did not start")


def measure(url: str, pid: int, path: str, body: bytes, headers: dict[str, str]) -> None:
    outcome: dict[str, object] = {}

    def send() -> None:
        began = time.perf_counter()
        try:
            response = httpx.post(f"{url}{path}", content=body, headers=headers, timeout=600)
            outcome["status"] = response.status_code
            outcome["says"] = response.text[:120] if response.status_code != 200 else "decoded"
        except httpx.HTTPError as err:
            outcome["status"], outcome["says"] = "error", repr(err)
        outcome["seconds"] = time.perf_counter() - began

    time.sleep(1)
    start_rss = peak = rss_mb(pid)
    sender = threading.Thread(target=send)
    sender.start()
    probes: list[float] = []
    with httpx.Client(timeout=600) as http:
        while sender.is_alive():
            began = time.perf_counter()
            http.get(f"{url}/health")
            if sender.is_alive():  # answered while the request was still in flight
                probes.append(time.perf_counter() - began)
            peak = max(peak, rss_mb(pid))
            time.sleep(0.05)
    sender.join()
    peak = max(peak, rss_mb(pid))
    time.sleep(2)
    after = rss_mb(pid)
    print(
        f"  {path.split('/')[-1]} of {len(body):,} bytes: {outcome['status']} in "
        f"{outcome['seconds']:.2f} s ({outcome['says']})"
    )
    slowest = f"{max(probes) * 1000:.0f} ms" if probes else "n/a (answered before a probe)"
    print(f"  /health while in flight: slowest {slowest} of {len(probes)} probes")
    print(f"  RSS: start {start_rss:.0f} MB, peak {peak:.0f} MB, after {after:.0f} MB")


def main() -> None:
    keys = f"k1={new_key()}"
    largest = largest_body(Keyring.parse(keys))
    with tempfile.TemporaryDirectory() as data_dir:
        process, url = start(data_dir, keys)
        try:
            print("8 MB of empty payloads on the Web UI's decode path (the attack):")
            measure(url, process.pid, f"/ui/{ui_token(TOKEN)}/decode", attack_body(), {})
            print(f"the largest request it accepts ({MAX_PAYLOADS:,} sealed payloads):")
            auth = {"Authorization": f"Bearer {TOKEN}"}
            measure(url, process.pid, "/decode", largest, auth)
            print(f"one payload with {MAX_JSON_VALUES // 2 - 2:,} metadata entries:")
            measure(url, process.pid, "/decode", one_wide_payload(), auth)
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
