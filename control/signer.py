"""Who signs decisions outside the workflow: the console with its key, a person's
`agentctl` with theirs (workflows/signing.py checks them inside the run)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from durable_agents.runtime.settings import Settings
from durable_agents.workflows.people_inputs import ON_REQUESTS, SignedDecision
from durable_agents.workflows.records import ApprovalRequest, Question, RunEvent
from durable_agents.workflows.signing import (
    NEWEST,
    Action,
    answer_digest,
    answer_v2_digest,
    arguments_digest,
    bound_nonce,
    decision_digest,
    digest_of,
    load_private_key,
    moment_tag,
    new_key,
    private_key_text,
    public_key_of,
    sign,
)
from durable_agents.workflows.subject_grants import grant_digest


@dataclass(frozen=True)
class Signer:
    key: Ed25519PrivateKey
    key_id: str

    @property
    def public_key(self) -> str:
        return public_key_of(self.key)

    def approval(
        self,
        run: str,
        by: str,
        approved: bool,
        request: ApprovalRequest,
        comment: str = "",
        version: int = 2,
        moment: RunEvent | None = None,
    ) -> SignedDecision:
        """Sign a decision on this very run, request, tool, step, arguments and comment
        (`run`: the run's identity, RunState.store_key; `version`: the one the run takes,
        RunState.signature_version). `moment`: the run's latest moment as the signer saw
        it (control/runs.latest_moment); a run taking v3 then counts the decision only in
        that timeline, never again after a rewind to before it."""
        if version == 1:
            digest = arguments_digest(request.arguments)
        else:
            digest = decision_digest(request.tool, request.step, request.arguments, comment)
        action: Action = "approve" if approved else "reject"
        return self._sign(run, by, action, request.request_id, digest, version, moment)

    def answer(
        self,
        run: str,
        by: str,
        question: Question,
        text: str,
        version: int = 2,
        moment: RunEvent | None = None,
    ) -> SignedDecision:
        """Sign an answer to this very question (`version`, `moment`: as `approval`)."""
        if version == 1:
            digest = answer_digest(text)
        else:
            digest = answer_v2_digest(question.question, question.step, text)
        return self._sign(run, by, "answer", question.question_id, digest, version, moment)

    def change(
        self, run: str, by: str, action: Action, says: Any, moment: RunEvent | None = None
    ) -> SignedDecision:
        """Sign a change to the run itself (a budget, an edit, a pause...) under a fresh
        nonce: the run counts it once, within a day. `moment`: the run's latest moment as
        the signer saw it (control/runs.signing_point); the change then counts only in
        that timeline, never again after a rewind to before it."""
        nonce = bound_nonce(secrets.token_hex(16), moment)
        return self._sign(run, by, action, nonce, digest_of(says), 2)

    def subject_grant(self, run: str, subject: Mapping[str, str]) -> SignedDecision:
        """Say that run `run` (a workflow id, or `schedule:ID` for a Schedule's runs) may
        be about `subject` (workflows/subject_grants.py), in this key's name."""
        return self._sign(
            run, self.key_id, "subject", secrets.token_hex(16), grant_digest(subject), 2
        )

    def _sign(
        self,
        run: str,
        by: str,
        action: Action,
        request_id: str,
        digest: str,
        version: int,
        moment: RunEvent | None = None,
    ) -> SignedDecision:
        """v3 (bound to `moment`) where the run takes it and the signer saw a moment;
        else v2 (a run on an older build takes no v3), or v1 for a run that takes v1. A
        decision or answer for a run that takes v3 is signed only bound: the run counts
        no other (one bound to no moment would count again after a rewind)."""
        bound = version >= NEWEST and moment is not None
        if version >= NEWEST and moment is None and action in ON_REQUESTS:
            raise ValueError(
                "the run's latest moment could not be read, and its decisions count only "
                "signed for one: try again"
            )
        return sign(
            self.key,
            self.key_id,
            run=run,
            by=by,
            action=action,
            request_id=request_id,
            digest=digest,
            at=_now(),
            version=NEWEST if bound else min(version, 2),
            moment=moment_tag(moment) if bound and moment is not None else None,
        )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def settings_signer(settings: Settings, default_id: str) -> Signer | None:
    """The person's own key (AGENT_SIGNING_KEY_FILE, named AGENT_SIGNING_KEY_ID or
    `default_id`), when they have one; ValueError in one line when it cannot be read."""
    if settings.signing_key_file is None:
        return None
    return read_signer(settings.signing_key_file, settings.signing_key_id or default_id)


def read_signer(path: Path, key_id: str) -> Signer:
    """The key in a file; ValueError in one line when it is missing or not a key."""
    try:
        text = path.read_text()
    except OSError as err:
        raise ValueError(f"signing key {path}: {err.strerror}") from None
    try:
        return Signer(load_private_key(text), key_id)
    except ValueError as err:
        raise ValueError(f"signing key {path}: {err}") from None


def kept_signer(path: Path, key_id: str) -> Signer:
    """The key in the file, made there first (owner-readable) when there is none."""
    if not path.exists():
        write_new_key(path)
    return read_signer(path, key_id)


def write_new_key(path: Path) -> str:
    """A new private key written to `path` (mode 600); returns its public half."""
    key, public = new_key()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=False)
    path.write_text(private_key_text(key) + "\n")
    return public
