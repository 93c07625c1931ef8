"""What a team's install costs: the wheel of a clean copy installed (not editable) into a
fresh venv, core only and with each extra, against the lock (constraints.txt): the time
pip takes, the packages it brings, and the size of site-packages. The pip cache is warm
after the first install, as on a team's machine or CI.

    python -m bench.install_footprint [--extras console,mcp,postgres,local,testing,all]

Prints the figures and writes bench/results/install_footprint.txt.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_SHIPPED = shutil.ignore_patterns(
    ".venv*", ".git", ".data", "__pycache__", "*.egg-info", "build", ".mypy_cache",
    ".ruff_cache", ".pytest_cache",
)  # fmt: skip


def install(source: Path, where: Path, extra: str | None) -> tuple[float, int, float]:
    """Seconds, packages installed (pip's own excluded) and MB of site-packages."""
    venv = where / f"venv-{extra or 'core'}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    target = f"{source}[{extra}]" if extra else str(source)
    started = time.perf_counter()
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "-c", str(source / "constraints.txt"), target],
        check=True,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze", "--exclude", "pip",
         "--exclude", "setuptools"],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    [site] = venv.glob("lib/python3*/site-packages")
    size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file()) / 1e6
    return seconds, len(listed), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extras", default="console,mcp,postgres,local,testing,all")
    args = parser.parse_args()
    lines = [f"{'install':<22} {'seconds':>8} {'packages':>9} {'MB':>7}"]
    with tempfile.TemporaryDirectory(prefix="install-footprint-") as tmp:
        source = Path(tmp) / "durable-agents"
        shutil.copytree(ROOT, source, symlinks=True, ignore=NOT_SHIPPED)
        for extra in [None, *filter(None, args.extras.split(","))]:
            seconds, packages, size = install(source, Path(tmp), extra)
            name = f"core[{extra}]" if extra else "core"
            lines.append(f"{name:<22} {seconds:>8.1f} {packages:>9} {size:>7.1f}")
            print(lines[-1], flush=True)
    out = ROOT / "bench" / "results" / "install_footprint.txt"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
