"""Who signs decisions outside the workflow: the console with its key, a person's
`agentctl` with theirs (workflows/signing.py checks them inside the run)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from workflows.contracts import SignedDecision
from workflows.signing import (
    answer_digest,
    arguments_digest,
    load_private_key,
    new_key,
    private_key_text,
    public_key_of,
    sign,
)
from workflows.state import ApprovalRequest, Question


@dataclass(frozen=True)
class Signer:
    key: Ed25519PrivateKey
    key_id: str

    @property
    def public_key(self) -> str:
        return public_key_of(self.key)

    def approval(
        self, run: str, by: str, approved: bool, request: ApprovalRequest
    ) -> SignedDecision:
        """Sign a decision on this very run, request and arguments (`run`: the run's
        identity, RunState.store_key)."""
        return sign(
            self.key,
            self.key_id,
            run=run,
            by=by,
            action="approve" if approved else "reject",
            request_id=request.request_id,
            digest=arguments_digest(request.arguments),
            at=_now(),
        )

    def answer(self, run: str, by: str, question: Question, text: str) -> SignedDecision:
        return sign(
            self.key,
            self.key_id,
            run=run,
            by=by,
            action="answer",
            request_id=question.question_id,
            digest=answer_digest(text),
            at=_now(),
        )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


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
