"""The chaos run at CI size: 10 runs, workers SIGKILLed at random, one dev-server restart.
Nothing lost, nothing done twice, no model answer paid for twice."""

from __future__ import annotations

from bench.chaos import ChaosConfig, run_chaos


async def test_chaos_at_ci_size(tmp_path):
    config = ChaosConfig(runs=10, kill_every=(0.5, 1.5), seed=11, drain_timeout=300)
    report = await run_chaos(config, tmp_path / "chaos", say=lambda _: None)
    print("\n".join(report.lines()))
    assert report.kills_in_flight >= 3, report.lines()
    assert report.server_restarts == 1
    assert (report.completed, report.failed, report.lost) == (10, 0, 0)
    assert report.effects == 30 and report.duplicate_effects == 0
    assert report.model_calls_paid_twice == 0
    assert report.problems == []
