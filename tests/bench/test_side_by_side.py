"""`make bench`'s machinery at a small scale: each system in its own process against one
dev server, the table, the results file. The peers are an optional extra, so the suite
runs raw Temporal and ours; the table's handling of a peer that fails is checked on
figures of the shape a peer reports."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import cost_report, scale
from bench.report import render
from bench.side_by_side import arguments

REPO = Path(__file__).resolve().parents[2]


def test_side_by_side_runs_each_system_and_writes_the_table(tmp_path):
    command = [sys.executable, "-m", "bench.side_by_side", "--only", "raw,ours"]
    command += ["--steps", "3", "--concurrent", "2", "--size-steps", "3,6"]
    command += ["--fail-steps", "6", "--rebuild-steps", "6", "--results", str(tmp_path)]
    command += ["--cost-runs", "6x1,3x2", "--waiting-runs", "3", "--travel-steps", "6"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {
        r["system"]: r for r in json.loads((tmp_path / "side-by-side.json").read_text())["rows"]
    }
    assert set(rows) == {"raw Temporal", "durable-agents"}
    ours = rows["durable-agents"]
    assert ours["steps_per_s_1"] > 0 and ours["steps_per_s_many"] > 0
    assert set(ours["bytes_per_step"]) == {"3", "6"}
    assert 1000 < ours["bytes_per_step"]["6"] < 8000
    assert ours["fails_at"]["steps"] is None
    # Every moment of the 6-step run rebuilt: a model and a tool call per step at least.
    assert ours["rebuild"]["seconds"] > 0 and int(ours["rebuild"]["note"].split()[0]) > 12
    assert rows["raw Temporal"]["rebuild"]["seconds"] is None
    table = (tmp_path / "side-by-side.md").read_text()
    assert "| durable-agents |" in table and table in done.stdout
    # The cost per step over 6 + 2x3 steps, beside raw's with the ratio; each target judged.
    for row in rows.values():
        assert row["cost"]["steps"] == 12 and row["cost"]["actions"] >= 2, row["cost"]
        assert row["waiting"]["runs"] == 3
    assert "12 steps over 3 runs (one of 6 steps alone, then 2 of 3 at once)" in table
    assert "| raw Temporal | " + f"{rows['raw Temporal']['cost']['actions']:.3f} (1.00x)" in table
    assert table.count("- target ") == 4
    # `agentctl history --step K` timed at the first, quarter, half, three quarters and last.
    travel = ours["travel"]
    assert travel["chain_steps"] == 6 and travel["rebuilt_states"] > 12
    last = travel["chain_moments"]
    assert set(travel["step_seconds"]) == {
        str(k) for k in (1, last // 4, last // 2, 3 * last // 4, last)
    }
    assert "`agentctl history RUN --step K` on a 6-step chain" in table
    has_chart = (tmp_path / "history-bytes.png").exists()
    assert has_chart == (importlib.util.find_spec("matplotlib") is not None)


def test_a_peer_that_hits_the_history_limit_shows_where_and_why():
    meta = {"machine": "m", "when": "w", "steps": 100, "concurrent": 20}
    ours = _row("durable-agents", {10: 3400, 200: 3100}, None)
    peer = _row("peer", {10: 25000, 100: 150000}, 191)
    text = render([ours, peer], meta)
    assert "| peer | 5.0 | 10.0 | - | 25,000 | - | 150,000 | fails | 191 |" in text
    assert "peer failed after 191 steps (52.7 MB of history): TerminatedError" in text
    assert "peer stores 89x the bytes per step of durable-agents at 191 steps" in text


def test_a_peer_that_fails_in_one_phase_keeps_its_other_figures():
    """A peer past the history limit in the cost phase: said there, its row still shown."""
    meta = {"machine": "m", "when": "w", "steps": 100, "concurrent": 20}
    peer = _row("peer", {10: 25000, 100: 150000}, None) | {
        "failed_phases": {"cost": "WorkflowFailureError: history size exceeds the limit"}
    }
    text = render([_row("durable-agents", {10: 3400}, None), peer], meta)
    assert "| peer | 5.0 | 10.0 | - | 25,000 | - | 150,000 |" in text
    assert (
        "- peer failed in its cost phase (its other figures are kept): "
        "WorkflowFailureError: history size exceeds the limit" in text
    )


def _row(name: str, sizes: dict[int, float], fails: int | None) -> dict[str, Any]:
    failure: dict[str, Any] = {"steps": None, "error": None, "tried": 400}
    if fails is not None:
        failure = {"steps": fails, "error": "TerminatedError: limit", "history_bytes": 52_700_000}
    return {
        "system": name,
        "steps_per_s_1": 5.0,
        "steps_per_s_many": 10.0,
        "bytes_per_step": {str(k): v for k, v in sizes.items()},
        "fails_at": failure,
        "rebuild": {"seconds": None, "note": "no per-step state to rebuild"},
        "peak_rss_mb": 100.0,
    }


def test_a_malformed_scale_stops_before_anything_starts(capsys: pytest.CaptureFixture[str]):
    """The command itself once (its exit code and last line), then each bad value through
    the same parser in this process: a new interpreter per value cost 8 s of the suite."""
    command = [sys.executable, "-m", "bench.side_by_side", "--cost-runs", "abc"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith("side_by_side.py: error: argument --cost-runs:") and "abc" in last
    for flag, bad in (
        ("--cost-runs", "5x0"),
        ("--cost-runs", "200x1,"),
        ("--waiting-runs", "0"),
        ("--travel-steps", "-5"),
        ("--steps", "many"),
        ("--phases", "cost,travle"),
    ):
        last = refused(arguments(), [flag, bad], capsys)
        assert last.startswith(f"side_by_side.py: error: argument {flag}:"), last
        assert bad.rpartition(",")[2] in last, last  # the value at fault is named


@pytest.mark.parametrize(
    ("flag", "bad", "says"),
    [
        ("--at-once", "-1", "must be 0 or more"),
        ("--steps", "0", "must be 1 or more"),
        ("--cache", "many", "not a whole number"),
        ("--kill-every", "0", "must be 0.5 or more"),
        ("--kill-every", "nan", "must be 0.5 or more"),
    ],
)
def test_a_malformed_scale_bench_flag_is_one_line(
    flag: str, bad: str, says: str, capsys: pytest.CaptureFixture[str]
):
    last = refused(scale.arguments(), [flag, bad], capsys)
    assert last.startswith(f"scale.py: error: argument {flag}:") and says in last, last


def refused(
    parser: argparse.ArgumentParser, args: list[str], capsys: pytest.CaptureFixture[str]
) -> str:
    """The last line a parser says when it refuses these arguments (exit 2)."""
    with pytest.raises(SystemExit) as stopped:
        parser.parse_args(args)
    assert stopped.value.code == 2
    return capsys.readouterr().err.splitlines()[-1]


def test_a_target_not_met_is_printed_with_where_its_breakdown_is():
    raw = {"actions": 2.0, "bytes": 1000.0, "worker_cpu_ms": 10.0, "server_cpu_ms": 10.0}
    ours = {"actions": 2.01, "bytes": 2000.0, "worker_cpu_ms": 12.0, "server_cpu_ms": 10.0}
    lines = {line.split(" <=")[0]: line for line in cost_report.verdicts(ours, raw)}
    assert "NOT met, 2,000 (why: " in lines["- target stored bytes"]
    assert 'README, "What a step costs"' in lines["- target stored bytes"]
    assert lines["- target worker CPU-ms"].endswith("met, 12.00")
    assert "why" not in lines["- target billable actions"]


def test_the_fleet_counts_every_charge_beyond_a_runs_first_as_a_duplicate():
    """The provider's own journal, as the scale bench reads it: a run charged three times
    across its chain is two duplicates; a refund is no charge."""
    journal = [
        {"operation": "charge", "run_id": "run-a@1"},
        {"operation": "charge", "run_id": "run-a@2"},
        {"operation": "charge", "run_id": "run-a@1"},
        {"operation": "charge", "run_id": "run-b@1"},
        {"operation": "refund", "run_id": "run-b@1"},
        {"operation": "charge", "run_id": "run-c"},
    ]
    by_run = scale.charges_per_run(journal)
    assert by_run == {"run-a": 3, "run-b": 1, "run-c": 1}
    assert scale.duplicate_charges(by_run) == 2
    assert scale.duplicate_charges(scale.charges_per_run(journal[3:])) == 0
