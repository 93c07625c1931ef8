"""Signed decisions: a person's approve, reject or answer that a run can check.

Anyone who reaches Temporal can send `approve` with any `by`. A run whose policy requires
signed decisions counts a decision only when it carries a signature, by a key the policy
trusts, over exactly this decision: who, what, which request, a digest of the arguments
(or of the answer) and when. Verifying is pure computation on public keys, so it runs in
workflow code and replays the same; the private keys live with the signers (the console,
a person's own `agentctl`), never in a workflow.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from temporalio import workflow

from workflows.contracts import RunPolicy, SignedDecision

Action = Literal["approve", "reject", "answer"]
MESSAGE_VERSION = "durable-agents/decision/v1"


def arguments_digest(arguments: dict[str, Any]) -> str:
    """The sha256 of a request's arguments, as canonical JSON: an edit changes it."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def answer_digest(answer: str) -> str:
    return hashlib.sha256(answer.encode()).hexdigest()


def _message(
    key_id: str, run: str, by: str, action: str, request_id: str, digest: str, at: str
) -> bytes:
    fields = [MESSAGE_VERSION, key_id, run, by, action, request_id, digest, at]
    return json.dumps(fields, separators=(",", ":")).encode()


def sign(
    key: Ed25519PrivateKey,
    key_id: str,
    *,
    run: str,
    by: str,
    action: Action,
    request_id: str,
    digest: str,
    at: str,
) -> SignedDecision:
    """Sign one decision (done by the console or `agentctl`, outside any workflow)."""
    signature = key.sign(_message(key_id, run, by, action, request_id, digest, at))
    return SignedDecision(
        key_id=key_id,
        run=run,
        by=by,
        action=action,
        request_id=request_id,
        digest=digest,
        at=at,
        signature=base64.b64encode(signature).decode(),
    )


def signature_error(
    policy: RunPolicy,
    signed: SignedDecision | None,
    *,
    run: str,
    by: str,
    action: Action,
    request_id: str,
    digest: str,
) -> str | None:
    """Why this decision does not count under the policy; None when it does (or when the
    policy does not ask for signatures)."""
    if not policy.require_signed_decisions:
        return None
    if signed is None:
        return f"unsigned decision by {by!r}: this run counts only signed decisions"
    trusted = policy.trusted_keys.get(signed.key_id)
    if trusted is None:
        return f"decision signed by key {signed.key_id!r}, which this run does not trust"
    wanted = {"run": run, "by": by, "action": action, "request_id": request_id, "digest": digest}
    for field, value in wanted.items():
        if getattr(signed, field) != value:
            return f"the signature is for another decision ({field} differs)"
    if trusted.signs_for and by not in trusted.signs_for:
        return f"key {signed.key_id!r} may not sign for {by!r}"
    try:
        public = Ed25519PublicKey.from_public_bytes(base64.b64decode(trusted.public_key))
        raw = base64.b64decode(signed.signature, validate=True)
        message = _message(signed.key_id, run, by, action, request_id, digest, signed.at)
        # The library's native code imports its exception class when a check fails; in the
        # workflow sandbox that import must reach the module already loaded, not a copy.
        with workflow.unsafe.imports_passed_through():
            public.verify(raw, message)
    except (InvalidSignature, binascii.Error, ValueError):
        return f"forged signature: key {signed.key_id!r} did not sign this decision"
    return None


def new_key() -> tuple[Ed25519PrivateKey, str]:
    """A fresh signing key and its public half (base64), for a policy's trusted_keys."""
    key = Ed25519PrivateKey.generate()
    return key, public_key_of(key)


def public_key_of(key: Ed25519PrivateKey) -> str:
    return base64.b64encode(key.public_key().public_bytes_raw()).decode()


def private_key_text(key: Ed25519PrivateKey) -> str:
    return base64.b64encode(key.private_bytes_raw()).decode()


def load_private_key(text: str) -> Ed25519PrivateKey:
    """A key as `private_key_text` wrote it; ValueError in one line otherwise."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
        return Ed25519PrivateKey.from_private_bytes(raw)
    except (binascii.Error, ValueError):
        raise ValueError("not an Ed25519 private key (32 bytes, base64)") from None
