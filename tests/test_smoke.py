import asyncio

from starters import runs
from tests.conftest import eventually, run_id
from workflows.contracts import Decision, RunRequest


async def test_pay_invoice_smoke(dev_env, worker, settings):
    rid = run_id("smoke")
    await runs.start_run(
        dev_env.client, settings, RunRequest(goal="Pay INV-1001", scenario="pay-invoice"), rid
    )

    async def waiting():
        s = await runs.get_summary(dev_env.client, rid)
        return s if s.pending_approvals else None

    summary = await eventually(waiting)
    print(summary)
    await runs.approve(dev_env.client, rid, Decision(by="alice"))
    result = await asyncio.wait_for(runs.wait_result(dev_env.client, rid), 30)
    print(result)
    state = await runs.get_state(dev_env.client, rid)
    print(state.model_dump_json(indent=1)[:3000])
