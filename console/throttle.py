"""Sign-in attempts, limited per client address, and failures per name from each client:
guessing a password costs the guesser time, and a flood of sign-ins is refused before it
reaches the (deliberately slow) password check. A flood of wrong passwords for a name
locks that name out for the clients that sent them, never for the person who has the
right one elsewhere. Behind a reverse proxy the client is the address the proxy says it
forwarded for (`client_address`). In memory: a console restart forgets, which costs a
guesser only what the limits allow again."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Window:
    """At most `limit` events in any `seconds`."""

    limit: int
    seconds: float
    seen: dict[str, deque[float]] = field(default_factory=dict)

    def wait_for(self, key: str, now: float) -> float:
        """Seconds until `key` may try again (0: now)."""
        times = self.seen.get(key)
        if times is None:
            return 0.0
        while times and times[0] <= now - self.seconds:
            times.popleft()
        if not times:
            del self.seen[key]
            return 0.0
        return 0.0 if len(times) < self.limit else times[0] + self.seconds - now

    def note(self, key: str, now: float) -> None:
        self.seen.setdefault(key, deque()).append(now)
        if len(self.seen) > MAX_KEYS:  # a flood of names: forget the oldest
            self.seen.pop(next(iter(self.seen)))


MAX_KEYS = 100_000


class SignInThrottle:
    def __init__(self, per_address_per_minute: int, failures_per_name: int) -> None:
        self.addresses = Window(per_address_per_minute, 60.0)
        self.names = Window(failures_per_name, 15 * 60.0)

    def refusal(self, name: str, address: str) -> str | None:
        """Why this attempt is refused now, without checking the password; None: go on.
        Every attempt counts against its address; failed ones against the name, from that
        address."""
        now = time.monotonic()
        wait = max(
            self.addresses.wait_for(address, now),
            self.names.wait_for(_name_from(name, address), now),
        )
        if wait > 0:
            return f"too many sign-in attempts: try again in {int(wait) + 1} s"
        self.addresses.note(address, now)
        return None

    def failed(self, name: str, address: str) -> None:
        self.names.note(_name_from(name, address), time.monotonic())


def _name_from(name: str, address: str) -> str:
    return f"{address} {name}"


def client_address(peer: str | None, forwarded_for: str | None, trusted: Sequence[str]) -> str:
    """Who signs in: the peer, or, where the peer is a proxy we trust, the address it says
    it forwarded for (the last X-Forwarded-For entry: the one it added itself)."""
    if peer is None:
        return "?"
    if peer in trusted and forwarded_for:
        last = forwarded_for.split(",")[-1].strip()
        if last:
            return last[:100]
    return peer


class OpenStreams:
    """Live streams each person holds open: each polls its run every 0.2 s, so one person
    (or one stolen session) may not open hundreds."""

    def __init__(self, per_user: int) -> None:
        self.per_user = per_user
        self.open: dict[str, int] = {}

    def refusal(self, user: str) -> str | None:
        if self.open.get(user, 0) >= self.per_user:
            return (
                f"{user} has {self.per_user} live streams open already: close a run page "
                "(or wait for one to end)"
            )
        return None

    @contextmanager
    def held_by(self, user: str) -> Iterator[None]:
        self.open[user] = self.open.get(user, 0) + 1
        try:
            yield
        finally:
            self.open[user] -= 1
            if not self.open[user]:
                del self.open[user]
