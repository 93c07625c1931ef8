"""AES-GCM encryption of every payload and of our stores, with rotating keys.

Keys are "id=base64key" entries, comma- or newline-separated; the first encrypts, every
one decrypts, so a new key goes first and old data stays readable. Each encrypted payload
and each sealed store value names its key id.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

if TYPE_CHECKING:
    from durable_agents.runtime.settings import Settings

ENCODING = b"binary/encrypted"
# What a worker's codec hands on for a payload it cannot decrypt, or (sealed inputs
# required) for one not sealed at all: the payload converter refuses both (REFUSED_ENCODINGS).
UNDECODABLE = b"binary/undecodable"
UNSEALED = b"binary/unsealed"
REFUSED_ENCODINGS = (UNDECODABLE, UNSEALED)
KEY_ID = "encryption-key-id"
# Set by a worker's codec on every payload it decodes: the key id it opened the payload
# with, or empty for one that came in the clear (whatever the sender put there is
# replaced). What the payload converter reads as "this carries the deployment's key"
# (runtime/refused_payloads.py); a process without keys sets nothing, and nobody without
# a key can make a payload read as sealed.
SEALED_WITH = "durable-agents-sealed-with"
IN_THE_CLEAR = b""
NONCE_BYTES = 12


class KeyringError(ValueError):
    """A key list that cannot be used, or data sealed with a key we do not hold."""


@dataclass(frozen=True)
class Keyring:
    """Named AES-256-GCM keys; `active` encrypts."""

    keys: dict[str, bytes]
    active: str

    @classmethod
    def parse(cls, text: str) -> Keyring:
        keys: dict[str, bytes] = {}
        order: list[str] = []
        for entry in text.replace("\n", ",").split(","):
            entry = entry.strip()
            if not entry or entry.startswith("#"):
                continue
            key_id, sep, encoded = entry.partition("=")
            key_id = key_id.strip()
            if not sep or not key_id:
                raise KeyringError(f"encryption key entry {key_id!r}: expected id=base64key")
            try:
                key = base64.b64decode(encoded.strip(), validate=True)
            except binascii.Error as err:
                raise KeyringError(f"encryption key {key_id!r}: not base64 ({err})") from err
            if len(key) != 32:
                raise KeyringError(
                    f"encryption key {key_id!r}: {len(key)} bytes, AES-256 needs 32 "
                    "(make one with `agentctl keys new`)"
                )
            if key_id in keys:
                raise KeyringError(f"encryption key id {key_id!r} appears twice")
            keys[key_id] = key
            order.append(key_id)
        if not order:
            raise KeyringError("no encryption key given")
        return cls(keys=keys, active=order[0])

    def encrypt(self, plaintext: bytes, bound_to: bytes | None = None) -> tuple[str, bytes]:
        """`bound_to` (associated data) ties the ciphertext to where it is stored: moved
        elsewhere, it no longer decrypts."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = AESGCM(self.keys[self.active]).encrypt(nonce, plaintext, bound_to)
        return self.active, nonce + sealed

    def decrypt(self, key_id: str, data: bytes, bound_to: bytes | None = None) -> bytes:
        key = self.keys.get(key_id)
        if key is None:
            raise KeyringError(
                f"data was encrypted with key {key_id!r}, which is not among the configured "
                f"keys ({', '.join(self.keys)}); add it back to AGENT_ENCRYPTION_KEYS"
            )
        if len(data) <= NONCE_BYTES:
            raise KeyringError(f"data under key {key_id!r} is too short to be encrypted data")
        try:
            return AESGCM(key).decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], bound_to)
        except (InvalidTag, ValueError) as err:
            raise KeyringError(
                f"data under key {key_id!r} does not decrypt: altered, moved from another "
                "row, or a different key now carries that id"
            ) from err


def key_text(settings: Settings) -> str | None:
    """The key list from AGENT_ENCRYPTION_KEYS, else from AGENT_ENCRYPTION_KEYS_FILE."""
    try:
        return settings.encryption_key_text
    except OSError as err:
        raise KeyringError(
            f"AGENT_ENCRYPTION_KEYS_FILE={settings.encryption_keys_file}: {err.strerror}"
        ) from err


def keyring_from(settings: Settings) -> Keyring | None:
    """The configured keys, or None when encryption is off."""
    text = key_text(settings)
    return Keyring.parse(text) if text is not None else None


def new_key() -> str:
    return base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()


class EncryptionCodec(PayloadCodec):
    """Every payload, whole (metadata and data), encrypted with the active key.

    A worker's codec is `tolerant`: a payload it cannot decrypt (a key id it does not
    hold, altered or truncated data), and with `require_sealed` one that is not sealed at
    all, becomes a marker payload instead of failing the whole workflow activation; the
    payload converter refuses the marker (runtime/refused_payloads.py), so the SDK drops
    that one signal, refuses that one update, fails that one start or activity, and the
    run goes on (invariant 8). Clients stay strict: they say which key is missing, and
    read what was written before encryption was on.
    """

    def __init__(
        self, keyring: Keyring, *, tolerant: bool = False, require_sealed: bool = False
    ) -> None:
        self.keyring = keyring
        self.tolerant = tolerant
        self.require_sealed = require_sealed

    def as_worker(self) -> EncryptionCodec:
        """The codec as a worker reads: a replay must drop what the worker dropped."""
        return EncryptionCodec(self.keyring, tolerant=True, require_sealed=self.require_sealed)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for payload in payloads:
            payload = _without_seal(payload)
            key_id, data = self.keyring.encrypt(payload.SerializeToString())
            out.append(Payload(metadata={"encoding": ENCODING, KEY_ID: key_id.encode()}, data=data))
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for payload in payloads:
            if payload.metadata.get("encoding") != ENCODING:
                if self.tolerant and self.require_sealed:
                    out.append(_marker(UNSEALED, "an input not sealed with this deployment's key"))
                elif self.tolerant:
                    out.append(_in_the_clear(payload))  # written before encryption was on
                else:
                    out.append(_without_seal(payload))  # a mark its sender set means nothing
                continue
            try:
                opened = self._decrypt(payload)
                if self.tolerant:  # a worker's, or a replay's: the run's code reads the mark
                    opened.metadata[SEALED_WITH] = payload.metadata.get(KEY_ID, b"")
                out.append(opened)
            except KeyringError as err:
                if not self.tolerant:
                    raise
                out.append(_marker(UNDECODABLE, str(err)))
        return out

    def _decrypt(self, payload: Payload) -> Payload:
        key_id = payload.metadata.get(KEY_ID, b"").decode("utf-8", errors="replace")
        plain = self.keyring.decrypt(key_id, payload.data)
        try:
            return Payload.FromString(plain)
        except DecodeError as err:
            raise KeyringError(f"data under key {key_id!r} is not a payload") from err


def _without_seal(payload: Payload) -> Payload:
    """The payload without a seal mark: only this codec's decrypting sets one."""
    if SEALED_WITH not in payload.metadata:
        return payload
    bare = Payload()
    bare.CopyFrom(payload)
    del bare.metadata[SEALED_WITH]
    return bare


def _in_the_clear(payload: Payload) -> Payload:
    """A payload that came unsealed, marked so (any mark its sender set is replaced)."""
    marked = Payload()
    marked.CopyFrom(payload)
    marked.metadata[SEALED_WITH] = IN_THE_CLEAR
    return marked


def _marker(encoding: bytes, reason: str) -> Payload:
    return Payload(metadata={"encoding": encoding, "reason": reason.encode()}, data=b"")
