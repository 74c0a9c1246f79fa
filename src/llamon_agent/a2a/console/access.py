"""Who may use the console: the agent's own credentials, operators only, sessions.

What a request sees (``ConsoleAccess.caller``):

* No ``AuthConfig`` (a server without credentials): every request that reached a loopback
  address with a loopback ``Host`` header is let in; any other is refused (see
  ``exposure``).
* With an ``AuthConfig``: a request carrying the agent's header (``X-API-Key`` or
  ``Authorization: Bearer``) with a secret of an operator is let in (for scripts and
  curl); otherwise the session cookie must be one this console issued, unexpired, to a
  caller who is still an operator. Operators: the caller of the positional secrets and
  the named callers in ``ConsoleOptions.operators``.
* ``sign_in(credential)`` is how the login form checks what was typed: the operator's
  name, or ``None`` (an unknown secret and a non-operator's secret look the same).
"""

from __future__ import annotations

import time

from starlette.requests import HTTPConnection

from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.console.exposure import is_loopback
from llamon_agent.a2a.console.options import ConsoleOptions
from llamon_agent.a2a.console.session import COOKIE_NAME, SessionKeys
from llamon_agent.core.settings import console_secret_setting

__all__ = ["ConsoleAccess"]


class ConsoleAccess:
    """The console's sign-in rules for ``auth`` (``None``: loopback only) and ``options``.

    ``ValueError`` when ``options.operators`` names a caller ``auth`` does not know.
    """

    def __init__(self, auth: AuthConfig | None, options: ConsoleOptions) -> None:
        self.auth = auth
        named = frozenset(name.strip() for name in options.operators)
        if auth is not None:
            unknown = sorted(named - set(auth.principals))
            if unknown:
                raise ValueError(
                    f"ConsoleOptions operators {unknown} are not callers of the AuthConfig; "
                    "name callers given in AuthConfig(principals=...)"
                )
        self.operators = frozenset({"", *named})
        self.keys = SessionKeys(options.secret or console_secret_setting())
        self.lifetime = options.session_seconds

    @property
    def needs_sign_in(self) -> bool:
        """True when the server checks credentials (else: loopback only, no sign-in)."""
        return self.auth is not None

    def caller(self, request: HTTPConnection) -> str | None:
        """The operator making ``request`` (``""`` for the default caller), or ``None``."""
        if self.auth is None:
            server = request.scope.get("server") or ("", 0)
            local = is_loopback(str(server[0])) and is_loopback(request.headers.get("host"))
            return "" if local else None
        credential = self.auth.credential(request)
        if credential is not None:
            return self.sign_in(credential)
        cookie = request.cookies.get(COOKIE_NAME)
        return self.keys.caller_of(cookie, self.operators, time.time())

    def sign_in(self, credential: str | None) -> str | None:
        """The operator ``credential`` belongs to, or ``None`` (constant time)."""
        if self.auth is None:
            return None
        name = self.auth.principal(credential.strip() if credential else None)
        return name if name is not None and name in self.operators else None

    def session_cookie(self, caller: str) -> str:
        """A new session cookie value for ``caller``."""
        return self.keys.issue(caller, time.time(), self.lifetime)
