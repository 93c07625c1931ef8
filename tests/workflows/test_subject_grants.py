"""Who a run may be about (workflows/subject_grants.py), on the grant alone: signed by a
key the deployment trusts for that namespace, for this run (or the Schedule that started
it) and this subject; anything else is refused with the reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from durable_agents.control.signer import Signer
from durable_agents.workflows.contracts import SubjectKey
from durable_agents.workflows.signing import new_key
from durable_agents.workflows.subject_grants import grant_error

JANE = {"customer": "jane"}


def deployment() -> tuple[Signer, dict[str, SubjectKey]]:
    key, public = new_key()
    return Signer(key, "ops"), {"ops": SubjectKey(public_key=public, namespaces=["customer/*"])}


def check(grant, keys, *, subject=JANE, namespace="customer/jane", run="run-1", scheduled=None):
    return grant_error(
        grant,
        subject=subject,
        namespace=namespace,
        keys=keys,
        run_id=run,
        scheduled_by=scheduled,
        now=datetime.now(UTC) + timedelta(seconds=1),
    )


def test_a_grant_counts_for_its_run_its_subject_and_its_keys_namespaces():
    ops, keys = deployment()
    grant = ops.subject_grant("run-1", JANE)
    assert check(grant, keys) is None
    assert "no grant says it may be" in str(check(None, keys))
    assert "for 'run-1', not this run" in str(check(grant, keys, run="run-2"))
    assert "another subject" in str(check(grant, keys, subject={"customer": "mallory"}))
    vip = ops.subject_grant("run-1", {"vip": "jane"})
    assert "may not grant vip/jane" in str(
        check(vip, keys, subject={"vip": "jane"}, namespace="vip/jane")
    )


def test_only_the_deployments_keys_grant_and_a_forgery_is_caught():
    ops, keys = deployment()
    stranger_key, _ = new_key()
    stranger = Signer(stranger_key, "stranger")
    assert "key 'stranger', which grants nothing here" in str(
        check(stranger.subject_grant("run-1", JANE), keys)
    )
    posing = Signer(stranger_key, "ops").subject_grant("run-1", JANE)
    assert "forged grant" in str(check(posing, keys))
    later = ops.subject_grant("run-1", JANE).model_copy(
        update={"at": (datetime.now(UTC) + timedelta(hours=1)).isoformat()}
    )
    assert "in the future" in str(check(later, keys))


def test_a_schedules_grant_counts_for_the_runs_that_schedule_starts():
    ops, keys = deployment()
    grant = ops.subject_grant("schedule:nightly", JANE)
    assert check(grant, keys, run="nightly-2026-12-06T00:00:00Z", scheduled="nightly") is None
    assert "not this run" in str(check(grant, keys, run="nightly-x", scheduled="other"))
    assert "not this run" in str(check(grant, keys, run="nightly-x"))
    # A run named like the grant is not the Schedule's run.
    assert "not this run" in str(check(grant, keys, run="schedule:nightly"))
