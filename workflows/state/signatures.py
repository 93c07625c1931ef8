"""Signatures: which signatures the run takes and what it counted of them (the version,
the nonces used, the rules people's inputs are checked by, the keys revoked).
workflows/signed_changes.py checks a signature against it."""

from __future__ import annotations

from datetime import datetime

from durable_agents.workflows.people_inputs import KeyRevocation
from durable_agents.workflows.records import SignedUse
from durable_agents.workflows.state.audit_log import AuditLog
from durable_agents.workflows.state.record import Read, Record


class Signatures(Record):
    OWNS = frozenset({"signature_version", "signed_nonces", "people_checks", "revoked_keys"})
    signature_version = Read[int]()
    signed_nonces = Read[list[SignedUse]]()
    people_checks = Read[int]()
    revoked_keys = Read[list[str]]()

    def settle_version(self, version: int) -> None:
        self._set(signature_version=version)

    def check_people(self, rules: int) -> None:
        self._set(people_checks=rules)

    def remember_nonces(self, nonces: list[SignedUse]) -> None:
        self._set(signed_nonces=nonces)

    def take_revoked(self, key_ids: list[str]) -> None:
        """Keys the deployment revoked when the run began (kept once each, in order)."""
        self._set(revoked_keys=[*dict.fromkeys([*self._s.revoked_keys, *key_ids])])

    def revoke(self, revoked: KeyRevocation, now: datetime) -> bool:
        """Keys whose signatures count no more here; False when all were revoked already.
        Only keys this run trusts: a flood of made-up ids cannot grow the state."""
        known = self._s.revoked_keys
        trusted = self._s.policy.trusted_keys
        fresh = [k for k in revoked.key_ids if k in trusted and k not in known]
        if not fresh:
            return False
        self._set(revoked_keys=[*known, *fresh])
        detail = f"{', '.join(fresh)} {revoked.reason}".strip()
        AuditLog(self._s).log(now, revoked.by, "keys_revoked", detail)
        return True

    def forked(self) -> None:
        """Nonces were signed for the parent's identity, not the fork's."""
        self._set(signed_nonces=[])
