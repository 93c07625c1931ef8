"""Who a run may be about: a deployment that sets AGENT_SUBJECT_KEYS counts a run's
subject (and so its memory namespace) only when a grant signed by one of those keys names
the run and that subject, and the namespace matches one of the key's patterns. Otherwise
anyone who may start a workflow could read, or poison, any customer's memories.

A grant names the run's workflow id, or `schedule:ID` for every run a Schedule starts (the
run asks the Schedule itself whether it started it: the `TemporalScheduledById` search
attribute can be set by any starter). Checked in workflow code on public keys only, like
every signature (workflows/signing.py); a key taken out of the setting grants nothing to
runs started after.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from fnmatch import fnmatchcase

from durable_agents.workflows.contracts import Subject, SubjectKey
from durable_agents.workflows.people_inputs import SignedDecision
from durable_agents.workflows.signing import CLOCK_SKEW, digest_of, signed_by

SCHEDULE_PREFIX = "schedule:"


def grant_digest(subject: Mapping[str, str]) -> str:
    """What a grant says: the subject, as the start request gives it."""
    return digest_of({"subject": dict(subject)})


def grant_error(
    grant: SignedDecision | None,
    *,
    subject: Subject | None,
    namespace: str,
    keys: Mapping[str, SubjectKey],
    run_id: str,
    scheduled_by: str | None,  # the Schedule that says it started this run
    now: datetime,
    delegated_by: str | None = None,
) -> str | None:
    """Why this run may not be about its subject; None when a trusted grant says it may.
    `delegated_by`: the run that started this one as its sub-agent (Temporal says so, and
    our activities check that it runs on our queue), whose grant counts here too."""
    if grant is None:
        return f"the run is about {namespace}, and no grant says it may be (AGENT_SUBJECT_KEYS)"
    key = keys.get(grant.key_id)
    if key is None:
        return f"the subject's grant is signed by key {grant.key_id!r}, which grants nothing here"
    # A run named like a Schedule's grant is no Schedule's run.
    granted_for = set() if run_id.startswith(SCHEDULE_PREFIX) else {run_id}
    granted_for |= {SCHEDULE_PREFIX + scheduled_by} if scheduled_by else set()
    granted_for |= {delegated_by} if delegated_by else set()
    if grant.run not in granted_for:
        return f"the subject's grant is for {grant.run!r}, not this run"
    if grant.action != "subject" or grant.digest != grant_digest(subject or {}):
        return "the subject's grant is for another subject"
    try:
        at = datetime.fromisoformat(grant.at)
    except ValueError:
        return f"the subject's grant has no time ({grant.at!r})"
    if at.tzinfo is None or at > now + CLOCK_SKEW:
        return f"the subject's grant is dated {grant.at}, in the future or with no zone"
    if not any(fnmatchcase(namespace, pattern) for pattern in key.namespaces):
        return f"key {grant.key_id!r} may not grant {namespace}"
    if not signed_by(key.public_key, grant):
        return f"forged grant: key {grant.key_id!r} did not sign it"
    return None
