"""bench/observability_cost.py at a small scale: each mode runs and prints its figures."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_each_mode_prints_its_figures():
    command = [sys.executable, "-m", "bench.observability_cost", "--steps", "4"]
    command += ["--concurrent", "2"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout + done.stderr
    per_step = {}
    for mode in ("plain", "encrypted", "encrypted+traced"):
        row = re.search(rf"^{re.escape(mode)}\s+([\d.]+)\s+([\d.]+)\s+([\d,]+)$", done.stdout, re.M)
        assert row is not None, done.stdout
        assert float(row.group(1)) > 0 and float(row.group(2)) > 0
        per_step[mode] = int(row.group(3).replace(",", ""))
    # Encrypted payloads are a little larger (nonce, tag, key id), never smaller.
    assert per_step["encrypted"] > per_step["plain"] > 1000
