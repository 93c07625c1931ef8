"""Who is asking: a signed session cookie (local users) or a header set by a trusted
reverse proxy; and the CSRF token every state-changing request must carry.

The session cookie holds the user's name and the session's CSRF token, signed with the
console's secret (itsdangerous), HttpOnly and SameSite=Strict. A GET never changes
anything; every POST must send the token back (form field `csrf` or header
`X-CSRF-Token`), so another site cannot post in a signed-in user's name.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import Request, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from console import users
from worker.settings import Settings

SESSION_COOKIE = "da_console"
CSRF_FIELD = "csrf"
CSRF_HEADER = "X-CSRF-Token"


@dataclass
class Session:
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    user: str | None = None
    fresh: bool = True  # not read from a cookie (or changed): the response must set it
    flash: str | None = None  # a message for the next page (after a form's redirect)


def console_secret(settings: Settings) -> str:
    """The setting, else a secret made once and kept in the data dir (owner-readable)."""
    if settings.console_secret is not None:
        return settings.console_secret.get_secret_value()
    return _kept_secret(settings.data_dir.resolve() / "console-secret")


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
                if isinstance(data, dict) and isinstance(data.get("csrf"), str):
                    user, flash = data.get("user"), data.get("flash")
                    session = Session(
                        csrf=data["csrf"],
                        user=user if isinstance(user, str) else None,
                        fresh=False,
                        flash=flash if isinstance(flash, str) else None,
                    )
            except BadSignature:
                pass
        request.state.session = session
        return session

    def user(self, request: Request) -> str | None:
        """The signed-in user: from the session, or (proxy mode) from the proxy's header,
        believed only when the request comes from a configured proxy address."""
        if not self.uses_proxy:
            user = self.session(request).user
            if user is None or not users.exists(self.settings.console_users_path, user):
                return None
            return user
        peer = request.client.host if request.client else None
        if peer is None or peer not in self.settings.console_trusted_proxies:
            return None
        name = request.headers.get(self.settings.console_proxy_header, "").strip()
        return name[:100] or None

    def sign_in(self, request: Request, user: str) -> Session:
        """A new session for the user: a new CSRF token too, so one from before sign-in
        (seen by whoever watched that page) is worth nothing after it."""
        session = Session(user=user)
        request.state.session = session
        return session

    def sign_out(self, request: Request) -> Session:
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
            {"csrf": session.csrf, "user": session.user, "flash": session.flash}
        )
        response.set_cookie(
            SESSION_COOKIE,
            value,
            max_age=self.max_age,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
