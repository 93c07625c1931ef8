"""What if: play recorded runs again against a changed agent, the world held still, and
read what would change (docs/your-own-agent.md, "What if").

    report = await client.what_if(
        agent="invoice", closed_within=timedelta(days=7),
        variant=Variant(instructions="... Never pay an invoice above 1,000 EUR."),
        graders=[no_payment_above_1000, ModelJudge("the vendor is told what happened")],
    )
    for run in report.failing():
        print(run.run_id, [g.reason for g in run.grades if not g.passed])

A grader is a function of one `RunComparison`: it passes by returning None or True, fails
by returning False or a text saying why, or by failing an `assert`.
"""

from durable_agents.control.whatif import Variant
from durable_agents.control.whatif_judge import ModelJudge
from durable_agents.control.whatif_report import (
    Effect,
    EffectChange,
    Grade,
    Grader,
    RunComparison,
    Side,
    WhatIfReport,
)

__all__ = [
    "Effect",
    "EffectChange",
    "Grade",
    "Grader",
    "ModelJudge",
    "RunComparison",
    "Side",
    "Variant",
    "WhatIfReport",
]
