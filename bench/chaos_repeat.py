"""The CI-sized chaos run, again and again, under a CPU load: the proof that it never
flakes. Prints each run's verdict and a closing tally.

Usage: python -m bench.chaos_repeat [--times 20] [--load 2]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.chaos import CI_CHAOS, run_chaos

BUSY_LOOP = "while True: pass"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--times", type=int, default=20)
    parser.add_argument("--load", type=int, default=2, help="busy processes beside the run")
    args = parser.parse_args()
    load = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(args.load)]
    passed = failed = 0
    try:
        for i in range(1, args.times + 1):
            began = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="chaos-") as data_dir:
                report = asyncio.run(run_chaos(CI_CHAOS, Path(data_dir), say=lambda _: None))
            verdict = "PASS" if not report.problems else "FAIL: " + "; ".join(report.problems)
            passed, failed = passed + (not report.problems), failed + bool(report.problems)
            print(
                f"run {i:2d}: {verdict} ({time.monotonic() - began:.0f} s, {report.kills} kills, "
                f"{report.interrupted_activities} activities interrupted, "
                f"{report.server_restarts} restart)",
                flush=True,
            )
    finally:
        for process in load:
            process.kill()
    print(f"chaos: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
