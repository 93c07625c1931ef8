"""Deterministic embeddings for the local stack and the tests: each word (lowercased, two
characters or more) adds ±1 at a position its hash chooses, and the vector is scaled to
length 1. Texts that share words point the same way; the same text gives the same vector
on every machine. Not a language model's meaning: enough to test the path end to end."""

from __future__ import annotations

import hashlib
import math
import re

DIMENSIONS = 64
WORD = re.compile(r"[^\W_]+", re.UNICODE)


def embed(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    vector = [0.0] * dimensions
    for word in WORD.findall(text.lower()):
        if len(word) < 2:
            continue
        digest = hashlib.sha256(word.encode()).digest()
        vector[digest[0] % dimensions] += 1.0 if digest[1] % 2 == 0 else -1.0
    norm = math.sqrt(sum(v * v for v in vector))
    return [round(v / norm, 6) for v in vector] if norm else vector
