"""Files an operator names on the command line (a policy, a patch, a history to replay):
read at most a cap, then parsed. Every refusal is a ValueError of one line (too large, not
UTF-8, not valid JSON or TOML, nested too deeply), so no file reads without end (a pipe,
/dev/zero) or ends in a traceback; an OSError (missing, unreadable) passes through."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

# A policy, limits, budget or patch file is a few KB.
SMALL_FILE_BYTES = 1024 * 1024
# A history file: Temporal holds a run's history to 50 MB of protobuf, which its JSON
# export (base64 payloads) makes a few times larger.
HISTORY_FILE_BYTES = 256 * 1024 * 1024


def read_capped(path: Path, cap: int) -> bytes:
    with path.open("rb") as file:
        raw = file.read(cap + 1)
    if len(raw) > cap:
        raise ValueError(f"larger than {cap:,} bytes")
    return raw


def load_json(path: Path, cap: int = SMALL_FILE_BYTES) -> Any:
    """The JSON in `path`."""
    return _parsed(read_capped(path, cap), "JSON")


def load_json_or_toml(path: Path, cap: int = SMALL_FILE_BYTES) -> Any:
    """The JSON in `path`, or its TOML where its suffix is `.toml`."""
    return _parsed(read_capped(path, cap), "TOML" if path.suffix == ".toml" else "JSON")


def _parsed(raw: bytes, kind: str) -> Any:
    try:
        text = raw.decode()
    except UnicodeDecodeError as err:
        raise ValueError(
            f"not valid {kind}: not UTF-8 ({err.reason} at byte {err.start})"
        ) from None
    try:
        return tomllib.loads(text) if kind == "TOML" else json.loads(text)
    except RecursionError:
        raise ValueError(f"not valid {kind}: nested too deeply") from None
    except ValueError as err:  # json's and tomllib's decode errors are ValueErrors
        raise ValueError(f"not valid {kind}: {err}") from None
