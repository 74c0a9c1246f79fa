"""The loopback rule: a console without credentials is served on the loopback address only.

``is_loopback(host)`` is true for ``localhost``, ``127.0.0.0/8`` and ``::1``.
``exposure_problem(host, auth)`` is the one line refusing to start a console with no
credentials on any other address (``None`` when it may start); ``llamon serve --console``,
``llamon console`` and ``serve_agent`` all ask it. At request time, a console without
credentials also answers only requests that reached a loopback address with a loopback
``Host`` (so a web page elsewhere cannot reach it through DNS rebinding).
"""

from __future__ import annotations

import ipaddress

from llamon_agent.a2a.auth import AuthConfig

__all__ = ["exposure_problem", "is_loopback"]


def is_loopback(host: str | None) -> bool:
    """True for ``localhost``, a ``127.x.x.x`` or ``::1`` address (brackets and a port
    allowed, as in a ``Host`` header)."""
    if not host:
        return False
    name = host.strip().lower()
    if name.startswith("["):  # [::1]:8000
        name = name[1:].partition("]")[0]
    elif name.count(":") == 1:  # 127.0.0.1:8000, localhost:8000
        name = name.partition(":")[0]
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def exposure_problem(host: str, auth: AuthConfig | None) -> str | None:
    """Why a console may not be served on ``host`` with ``auth``, or ``None``."""
    if auth is not None or is_loopback(host):
        return None
    return (
        f"the console has no credentials and would listen on {host}, not on loopback; "
        "pass --api-key/--bearer-token (or LLAMON_API_KEY/LLAMON_BEARER_TOKEN), "
        "or --host 127.0.0.1"
    )
