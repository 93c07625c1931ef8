"""The `claim_signature` activity: a signature that starts something counts for one run.

A run's own state cannot remember what started it across a terminate-and-restart under
the same id, so the nonce is taken in the stores, with the run it started
(EffectLedger.claim): a subject's grant copied from a closed run's history into a new
start under that id is refused.
"""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities.ledger import EffectLedger
from durable_agents.workflows.activity_io import SignatureClaim


class SignatureClaims:
    def __init__(self, ledger: EffectLedger) -> None:
        self.ledger = ledger

    @activity.defn(name="claim_signature")
    async def claim_signature(self, claim: SignatureClaim) -> None:
        await take_signature(self.ledger, claim)


async def take_signature(ledger: EffectLedger, claim: SignatureClaim) -> None:
    """Take the nonce for the run, or refuse (non-retryable) when another run took it."""
    first = await asyncio.to_thread(ledger.claim, claim.nonce, claim.run_id)
    if first is not None:
        raise ApplicationError(
            f"refused: this {claim.what} was used already, by run {first}",
            type="SignatureUsed",
            non_retryable=True,
        )
