"""Signed changes: a person's decision, answer or change to a run that the run can check.

Anyone who reaches Temporal can send `approve`, `pause` or `raise_budget` with any `by`. A
run whose policy requires signed decisions counts a change only when it carries a
signature, by a key the policy trusts, over exactly this change: the run's identity, who,
which action, what it applies to (a request's id, or a fresh nonce for a change to the
run itself), a digest of what it says (a decision's tool, step, arguments and comment; an
answer's text; a budget's figures; an edit's patch; a reason), and when it was signed.
Verifying is pure computation on public keys, so it runs in workflow code and replays the
same; the private keys live with the signers (the console, a person's own `agentctl`),
never in a workflow.

Three versions: v1 signed decisions and answers only, over the arguments alone (runs from
before the `every-change-signed` patch keep it on replay); v2 signs every change, binds a
decision to its tool, step and comment, and is refused when it was made before the request
existed or, for a change named by a nonce, when it is stale or used already; a signer binds
a v2 change's nonce to the run's latest moment it saw (`bound_nonce`). v3 is a v2 decision
or answer bound the same way: the moment is a field of its own (the request's id stays the
request's), and it counts only while the run holds that very moment (`moment_error`), so a
copy sent after a rewind does not. Runs that take v3 take v2 too (a change, or an older
signer's decision); only a v3 signature is checked for its moment, so no recorded history
replays otherwise.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from temporalio import workflow

from durable_agents.workflows.contracts import RunPolicy
from durable_agents.workflows.people_inputs import ON_REQUESTS, SignedDecision
from durable_agents.workflows.people_inputs import Action as Action
from durable_agents.workflows.records import RunEvent

MESSAGE_V1 = "durable-agents/decision/v1"
MESSAGE_V2 = "durable-agents/change/v2"
MESSAGE_V3 = "durable-agents/change/v3"
# The version a run takes from the `decisions-bound-to-their-moment` patch on (RunState.
# signature_version), which tells its signers to bind a decision or answer (v3).
NEWEST = 3
# A signer's clock may run this far ahead of the worker's (or behind a request's time).
CLOCK_SKEW = timedelta(minutes=5)
# A change named by a nonce counts only this long after it was signed: the run keeps the
# nonces it used for this long, so a copy sent again later finds its nonce used or stale.
FRESH_FOR = timedelta(days=1)


def moment_mark(event: RunEvent) -> str:
    """What names one moment of one timeline: its number, time and kind. A rewound run
    numbers its moments again from the one it went back to, at other times."""
    return hashlib.sha256(
        f"{event.offset}|{event.at.isoformat()}|{event.kind}".encode()
    ).hexdigest()[:16]


def moment_tag(moment: RunEvent) -> str:
    """What a signature says of the moment its signer saw: its number and its mark."""
    return f"m{moment.offset}.{moment_mark(moment)}"


def bound_nonce(fresh: str, moment: RunEvent | None) -> str:
    """A change's nonce, bound to the latest moment its signer saw (when they saw one)."""
    return fresh if moment is None else f"{fresh}.{moment_tag(moment)}"


def binding_error(nonce: str, kept: list[RunEvent]) -> str | None:
    """Why a change whose nonce is bound to a moment does not count in this run
    (`moment_error`). A change bound to nothing (an older signer) is not checked here."""
    parts = nonce.split(".")
    if len(parts) != 3:
        return None
    return moment_error(f"{parts[1]}.{parts[2]}", kept, unbound_counts=True)


def versions_taken(version: int, action: Action) -> tuple[int, ...]:
    """The signature versions a run that takes `version` counts for this action: a v3 run
    takes decisions and answers bound to a moment (v3) only, and changes as v2 (their
    nonce carries the moment): a v2 decision, bound to no moment, would count again after
    a rewind (v3 runs: patch `decisions-bound-to-their-moment`)."""
    if version < NEWEST:
        return (version,)
    return (3,) if action in ON_REQUESTS else (2,)


def moment_error(
    tag: str | None, kept: list[RunEvent], *, unbound_counts: bool = False
) -> str | None:
    """Why a signature bound to a moment (`moment_tag`) does not count in this run: the run
    has no such moment (rewound to before it, or it is older than the moments the run
    keeps), or its moment of that number is another (the run was rewound past it and went
    on). `unbound_counts`: a tag that names no moment is not checked (a v2 nonce)."""
    head, _, mark = (tag or "").partition(".")
    if not (head.startswith("m") and head[1:].isdigit()):
        return None if unbound_counts else "the signature names no moment of the run"
    offset = int(head[1:])
    found = next((event for event in kept if event.offset == offset), None)
    if found is None:
        return f"the signature was made for moment {offset}, which this run does not hold now"
    if moment_mark(found) != mark:
        return f"the signature was made for another moment {offset} (the run was rewound)"
    return None


def digest_of(value: Any) -> str:
    """The sha256 of a value as canonical JSON: what a signature says the change says."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def arguments_digest(arguments: dict[str, Any]) -> str:
    """v1's digest of a decision: the request's arguments alone."""
    return digest_of(arguments)


def answer_digest(answer: str) -> str:
    """v1's digest of an answer: its text."""
    return hashlib.sha256(answer.encode()).hexdigest()


def decision_digest(tool: str, step: int, arguments: dict[str, Any], comment: str) -> str:
    """v2: a decision covers what it approves and the words the model reads with it."""
    return digest_of({"tool": tool, "step": step, "arguments": arguments, "comment": comment})


def answer_v2_digest(question: str, step: int, answer: str) -> str:
    return digest_of({"question": question, "step": step, "answer": answer})


def _message(
    version: int,
    key_id: str,
    run: str,
    by: str,
    action: str,
    request_id: str,
    digest: str,
    at: str,
    moment: str | None = None,
) -> bytes:
    head = {2: MESSAGE_V2, 3: MESSAGE_V3}.get(version, MESSAGE_V1)
    fields = [head, key_id, run, by, action, request_id, digest, at]
    if version >= 3:
        fields.append(moment or "")
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
    version: int = 2,
    moment: str | None = None,
) -> SignedDecision:
    """Sign one change (done by the console or `agentctl`, outside any workflow).
    `moment`: v3's `moment_tag` of the moment the signer saw."""
    message = _message(version, key_id, run, by, action, request_id, digest, at, moment)
    return SignedDecision(
        v=version,
        key_id=key_id,
        run=run,
        by=by,
        action=action,
        request_id=request_id,
        digest=digest,
        at=at,
        signature=base64.b64encode(key.sign(message)).decode(),
        moment=moment,
    )


@dataclass(frozen=True)
class Expected:
    """What a signature must say to count for the change at hand."""

    runs: tuple[str, ...]  # the run's identity (and, in a sub-agent, its parent's)
    by: str
    action: Action
    request_id: str | None  # None: any nonce the run has not used
    digest: str
    # v2 only: when the request began (a signature from before it is for another), the
    # workflow's time now, and the nonces the run has used.
    not_before: datetime | None = None
    # The request's deadline: a decision signed, or arriving, after it counts no more.
    not_after: datetime | None = None
    now: datetime | None = None
    used: frozenset[str] = frozenset()


def signature_error(
    policy: RunPolicy, signed: SignedDecision | None, wanted: Expected, *, version: int
) -> str | None:
    """Why this change does not count under the policy; None when it does (or when the
    policy does not ask for signatures). `version`: the signature version the run takes."""
    if not policy.require_signed_decisions:
        return None
    if signed is None:
        return f"unsigned {wanted.action} by {wanted.by!r}: this run counts only signed changes"
    if signed.v not in (taken := versions_taken(version, wanted.action)):
        counted = " or ".join(f"v{v}" for v in taken)
        return f"a v{signed.v} signature: this run counts only {counted} signatures"
    trusted = policy.trusted_keys.get(signed.key_id)
    if trusted is None:
        return f"signed by key {signed.key_id!r}, which this run does not trust"
    if signed.run not in wanted.runs:
        return "the signature is for another change (run differs)"
    fields: dict[str, Any] = {"by": wanted.by, "action": wanted.action, "digest": wanted.digest}
    if wanted.request_id is not None:
        fields["request_id"] = wanted.request_id
    for field, value in fields.items():
        if getattr(signed, field) != value:
            return f"the signature is for another change ({field} differs)"
    if trusted.signs_for and wanted.by not in trusted.signs_for:
        return f"key {signed.key_id!r} may not sign for {wanted.by!r}"
    if version >= 2 and (error := _freshness_error(signed, wanted)) is not None:
        return error
    if not signed_by(trusted.public_key, signed):
        return f"forged signature: key {signed.key_id!r} did not sign this change"
    return None


def signed_by(public_key: str, signed: SignedDecision) -> bool:
    """Whether the key (raw Ed25519, base64) made this signature over what it says."""
    try:
        public = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key))
        raw = base64.b64decode(signed.signature, validate=True)
        message = _message(
            signed.v,
            signed.key_id,
            signed.run,
            signed.by,
            signed.action,
            signed.request_id,
            signed.digest,
            signed.at,
            signed.moment,
        )
        # The library's native code imports its exception class when a check fails; in the
        # workflow sandbox that import must reach the module already loaded, not a copy.
        with workflow.unsafe.imports_passed_through():
            public.verify(raw, message)
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


def _freshness_error(signed: SignedDecision, wanted: Expected) -> str | None:
    try:
        at = datetime.fromisoformat(signed.at)
    except ValueError:
        return f"the signature's time {signed.at!r} is not an ISO 8601 time"
    if at.tzinfo is None:
        return f"the signature's time {signed.at!r} has no time zone"
    now = wanted.now
    if now is not None and at > now + CLOCK_SKEW:
        return f"the signature is dated {signed.at}, in the future"
    if wanted.not_before is not None and at < wanted.not_before - CLOCK_SKEW:
        return f"the signature ({signed.at}) is older than the request it names"
    if wanted.not_after is not None:
        ends = wanted.not_after + CLOCK_SKEW
        if at > ends or (now is not None and now > ends):
            return f"the request's deadline ({wanted.not_after.isoformat()}) has passed"
    if wanted.request_id is None:  # named by a nonce: fresh, and used once
        if now is not None and at < now - FRESH_FOR:
            return f"the signature ({signed.at}) is stale: a change counts within a day"
        if signed.request_id in wanted.used:
            return "the signature was used already (a copy sent again)"
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
