"""The local users file: names and argon2 password hashes, nothing else.

A JSON object `{"users": {name: {"hash": ...}}}`, written atomically and readable by its
owner alone. `agentctl users add NAME` fills it; the console reads it at each sign-in, so
an added user can sign in without a restart.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

from durable_agents.runtime.extras import require

USER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$")
MIN_PASSWORD_CHARS = 8


@cache
def _argon2() -> Any:
    """argon2 comes with the [console] extra: `agentctl users` says so in one line."""
    return require("argon2", part="the console's users", extra="console")


@cache
def _hasher() -> Any:
    return _argon2().PasswordHasher()


@cache
def _dummy_hash() -> str:
    """Checked when a name is unknown, so a wrong name takes as long as a wrong password
    (made at the first sign-in, not at import: every `agentctl` imports this module)."""
    return str(_hasher().hash("not a password of anyone's"))


class UsersFileError(ValueError):
    """The users file or a name or password given for it is not usable (one line)."""


def check_name(name: str) -> str:
    if not USER_NAME.fullmatch(name):
        raise UsersFileError(
            f"user name {name!r}: letters, digits and . _ @ - only, up to 100 characters"
        )
    return name


def _read(path: Path) -> dict[str, dict[str, str]]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        users = data["users"]
        if not isinstance(users, dict):
            raise TypeError
        return {str(k): dict(v) for k, v in users.items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UsersFileError(f"{path}: not a users file (agentctl users add writes one)") from None


def add_user(path: Path, name: str, password: str) -> bool:
    """Add a user or set a user's password; True when the user is new."""
    check_name(name)
    if len(password) < MIN_PASSWORD_CHARS:
        raise UsersFileError(f"the password must have at least {MIN_PASSWORD_CHARS} characters")
    users = _read(path)
    new = name not in users
    users[name] = {"hash": _hasher().hash(password)}
    _write(path, users)
    return new


def _write(path: Path, users: dict[str, dict[str, str]]) -> None:
    """Atomically, readable by its owner alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.touch(mode=0o600)
    temporary.write_text(json.dumps({"users": users}, indent=2, sort_keys=True))
    os.replace(temporary, path)


def remove_user(path: Path, name: str) -> bool:
    users = _read(path)
    if users.pop(name, None) is None:
        return False
    _write(path, users)
    return True


def user_names(path: Path) -> list[str]:
    return sorted(_read(path))


def exists(path: Path, name: str) -> bool:
    """Whether the user is (still) in the file: a removed user's session ends with it."""
    return name in _read(path)


def fingerprint(path: Path, name: str) -> str | None:
    """A short digest of the user's password entry (None: no such user): a session made
    before the password changed carries another, and counts no more."""
    entry = _read(path).get(name)
    if entry is None:
        return None
    return hashlib.sha256(str(entry.get("hash", "")).encode()).hexdigest()[:24]


def verify(path: Path, name: str, password: str) -> bool:
    """Whether this name and password sign in."""
    entry = _read(path).get(name)
    try:
        return _hasher().verify(entry["hash"] if entry else _dummy_hash(), password) and bool(entry)
    except (_argon2().exceptions.VerificationError, _argon2().exceptions.InvalidHashError):
        return False
