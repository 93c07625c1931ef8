"""The chaos run at CI size: 10 runs; every worker SIGKILLed three times while model calls
are in flight (by construction: the offline model holds them), runs held at their
approvals until the dev server has restarted, random kills after. Nothing lost, nothing
done twice, no model answer paid for twice."""

from __future__ import annotations

from bench.chaos import CI_CHAOS, run_chaos


async def test_chaos_at_ci_size(tmp_path):
    report = await run_chaos(CI_CHAOS, tmp_path / "chaos", say=lambda _: None)
    print("\n".join(report.lines()))
    assert report.kills_in_flight == 3, report.lines()
    assert report.interrupted_activities >= 3, report.lines()
    assert report.server_restarts == 1
    assert (report.completed, report.failed, report.lost) == (10, 0, 0)
    assert report.effects == 30 and report.duplicate_effects == 0
    assert report.runs_missing_effects == 0
    assert report.model_calls_paid_twice == 0
    assert report.problems == []
