"""Who is asking: a signed session cookie (local users) or a header set by a trusted
reverse proxy; and the CSRF token every state-changing request must carry.

The session cookie holds the session's id, the user's name, a fingerprint of their
password entry and the session's CSRF token, signed with the console's secret
(itsdangerous), HttpOnly and SameSite=Strict (and Secure over HTTPS, or behind a
TLS-terminating proxy with AGENT_CONSOLE_SECURE_COOKIES). A cookie counts only while the
server has not ended its session (sign-out, console/sessions.py), the user is in the users
file and their password is the one it was made with. A GET never changes anything; every
POST must send the token back (form field `csrf` or header `X-CSRF-Token`), so another
site cannot post in a signed-in user's name.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import Request, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from durable_agents.activities.stores import open_database
from durable_agents.console import users
from durable_agents.console.sessions import SignedOutSessions
from durable_agents.runtime.settings import Settings

SESSION_COOKIE = "da_console"
CSRF_FIELD = "csrf"
CSRF_HEADER = "X-CSRF-Token"


@dataclass
class Session:
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    user: str | None = None
    fresh: bool = True  # not read from a cookie (or changed): the response must set it
    flash: str | None = None  # a message for the next page (after a form's redirect)
    sid: str = field(default_factory=lambda: secrets.token_urlsafe(18))
    password: str | None = None  # users.fingerprint of the user's entry at sign-in


# A shorter secret can be guessed or was typed by hand: refused at start, in one line.
MIN_SECRET_BYTES = 32


class SecretTooShort(ValueError):
    pass


def console_secret(settings: Settings) -> str:
    """The setting, else a secret made once and kept in the data dir (owner-readable);
    one shorter than MIN_SECRET_BYTES is refused (an empty one would let anyone sign)."""
    if settings.console_secret is not None:
        secret = settings.console_secret.get_secret_value()
        where = "AGENT_CONSOLE_SECRET"
    else:
        path = settings.data_dir.resolve() / "console-secret"
        secret, where = _kept_secret(path), str(path)
    if len(secret.encode()) < MIN_SECRET_BYTES:
        raise SecretTooShort(
            f"{where}: the console secret must be at least {MIN_SECRET_BYTES} bytes "
            "(python -c 'import secrets; print(secrets.token_urlsafe(32))' makes one)"
        )
    return secret


def _kept_secret(path: Path) -> str:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(32))
    return path.read_text().strip()


class Identity:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._cookies = URLSafeTimedSerializer(console_secret(settings), salt="console-session")
        self.max_age = int(settings.console_session_hours * 3600)
        self.signed_out = SignedOutSessions(open_database(settings))

    @property
    def uses_proxy(self) -> bool:
        return self.settings.console_auth == "proxy"

    def session(self, request: Request) -> Session:
        """The request's session (cached on it); a new one when the cookie is missing,
        altered or expired."""
        cached = getattr(request.state, "session", None)
        if isinstance(cached, Session):
            return cached
        session = Session()
        raw = request.cookies.get(SESSION_COOKIE)
        if raw:
            try:
                data = self._cookies.loads(raw, max_age=self.max_age)
            except BadSignature:  # altered, forged, or expired (SignatureExpired)
                data = None
            if isinstance(data, dict) and all(
                isinstance(data.get(k), str) for k in ("csrf", "sid")
            ):
                user, flash, password = data.get("user"), data.get("flash"), data.get("pw")
                session = Session(
                    csrf=data["csrf"],
                    sid=data["sid"],
                    user=user if isinstance(user, str) else None,
                    fresh=False,
                    flash=flash if isinstance(flash, str) else None,
                    password=password if isinstance(password, str) else None,
                )
        request.state.session = session
        return session

    def user(self, request: Request) -> str | None:
        """The signed-in user: from the session, or (proxy mode) from the proxy's header,
        believed only when the request comes from a configured proxy address."""
        if not self.uses_proxy:
            session = self.session(request)
            if session.user is None or session.password is None:
                return None
            path = self.settings.console_users_path
            if users.fingerprint(path, session.user) != session.password:
                return None  # removed, or their password changed since
            if self.signed_out.ended(session.sid):
                return None
            return session.user
        peer = request.client.host if request.client else None
        if peer is None or peer not in self.settings.console_trusted_proxies:
            return None
        name = request.headers.get(self.settings.console_proxy_header, "").strip()
        return name[:100] or None

    def sign_in(self, request: Request, user: str) -> Session:
        """A new session for the user: a new CSRF token too, so one from before sign-in
        (seen by whoever watched that page) is worth nothing after it."""
        fingerprint = users.fingerprint(self.settings.console_users_path, user)
        session = Session(user=user, password=fingerprint)
        request.state.session = session
        return session

    def sign_out(self, request: Request) -> Session:
        """End the session on the server too: a copy of its cookie is worth nothing."""
        ended = self.session(request)
        if ended.user is not None:
            self.signed_out.end(ended.sid, self.max_age)
        session = Session()
        request.state.session = session
        return session

    def flash(self, request: Request, message: str) -> None:
        session = self.session(request)
        session.flash, session.fresh = message[:500], True

    def take_flash(self, request: Request) -> str | None:
        session = self.session(request)
        message = session.flash
        if message is not None:
            session.flash, session.fresh = None, True
        return message

    def csrf_ok(self, request: Request, sent: str | None) -> bool:
        token = sent or request.headers.get(CSRF_HEADER) or ""
        return hmac.compare_digest(token.encode(), self.session(request).csrf.encode())

    def keep(self, request: Request, response: Response) -> None:
        """Set the session cookie on a response when the session is new or changed."""
        session = self.session(request)
        if not session.fresh:
            return
        value = self._cookies.dumps(
            {
                "csrf": session.csrf,
                "sid": session.sid,
                "user": session.user,
                "pw": session.password,
                "flash": session.flash,
            }
        )
        response.set_cookie(
            SESSION_COOKIE,
            value,
            max_age=self.max_age,
            httponly=True,
            samesite="strict",
            secure=self.settings.console_secure_cookies or request.url.scheme == "https",
        )
