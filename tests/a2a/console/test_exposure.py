"""The loopback rule: a console without credentials is served on loopback only, decided
in one place for ``llamon serve --console``, ``llamon console`` and ``serve_agent``; and
at request time, a request that did not reach it on loopback is refused (403)."""

from __future__ import annotations

import httpx
import pytest

from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.console import ConsoleOptions, exposure_problem, is_loopback
from llamon_agent.a2a.serve import ServeOptions, serve_agent
from llamon_agent.a2a.server import create_app
from tests._support.a2a_server import running_server
from tests._support.console import ConsoleTestAgent, console_card

ANY = "0.0.0.0"  # noqa: S104 - the address an open console must refuse


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]:8000", True),
        ("localhost", True),
        ("localhost:8000", True),
        ("127.0.0.1:8000", True),
        (ANY, False),
        ("::", False),
        ("10.0.0.5", False),
        ("example.com", False),
        ("127.0.0.1.example.com", False),
        ("", False),
    ],
)
def test_which_hosts_are_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_without_credentials_only_loopback_may_serve_the_console() -> None:
    assert exposure_problem("127.0.0.1", None) is None
    assert exposure_problem(ANY, AuthConfig.api_key("k")) is None
    problem = exposure_problem(ANY, None)
    assert problem == (
        "the console has no credentials and would listen on 0.0.0.0, not on loopback; "
        "pass --api-key/--bearer-token (or LLAMON_API_KEY/LLAMON_BEARER_TOKEN), "
        "or --host 127.0.0.1"
    )


async def test_serve_agent_refuses_before_listening() -> None:
    options = ServeOptions(host=ANY, port=0, store="memory", console=ConsoleOptions())
    with pytest.raises(ValueError, match=r"would listen on 0\.0\.0\.0, not on loopback"):
        await serve_agent(ConsoleTestAgent(), console_card(auth=False), options)


async def test_an_open_console_answers_loopback_requests_only() -> None:
    app = create_app(
        ConsoleTestAgent(), console_card(auth=False), console=ConsoleOptions(), gc_freeze=False
    )
    async with running_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        assert (await client.get("/console")).status_code == 200
        # a page elsewhere reaching it through DNS rebinding sends its own Host
        rebound = await client.get("/console", headers={"Host": "attacker.example:80"})
        assert rebound.status_code == 403
        assert "answers on the loopback address only" in rebound.text
        # no sign-in form on an open console
        login = await client.get("/console/login")
        assert (login.status_code, login.headers["location"]) == (303, "/console")
