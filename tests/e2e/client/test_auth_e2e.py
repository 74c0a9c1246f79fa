"""Credentials against a real llamon server that requires them: the API key goes in the
header the card names, a refused credential is ``RemoteAuthRequiredError`` with the
server's error data, and a refreshed bearer token is accepted (127.0.0.1)."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.card import AuthSpec, build_agent_card, skill
from llamon_agent.a2a.server import create_app
from llamon_agent.client import (
    AgentClient,
    ApiKey,
    Bearer,
    RemoteAuthRequiredError,
    clear_card_cache,
)
from llamon_agent.core.codes import ErrorCode
from tests._support.a2a_server import running_server

KEY = "team-key-0b7d41c2e9a85f36"
TOKEN = "token-3f9e2a7c51d84b60"


async def echo(ctx: AgentContext) -> str:
    return f"echo {ctx.text}"


def _app(auth: AuthSpec, secret: str) -> Starlette:
    card = build_agent_card(
        name="guarded",
        description="Echoes test questions for callers that authenticate.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        skills=[skill("echo", "Echo", "Echoes one test question.", tags=["test"])],
        auth=auth,
    )
    return create_app(echo, card, auth=AuthConfig.from_card(card, secret))


@pytest.fixture(autouse=True)
def _fresh_cards() -> None:
    clear_card_cache()


async def test_an_api_key_goes_in_the_header_the_card_names() -> None:
    app = _app(AuthSpec.api_key("X-Team-Key"), KEY)
    async with running_server(app) as url:
        async with AgentClient(url, auth=ApiKey("wrong")) as refused:
            with pytest.raises(RemoteAuthRequiredError) as caught:
                await refused.send("hi")
        async with AgentClient(url, auth=ApiKey(KEY)) as agent:
            result = await agent.send("hi")
    error = caught.value
    assert error.http_status == 401
    assert error.data is not None
    assert error.data.error_code is ErrorCode.AUTH_REQUIRED
    assert error.reason == error.data.error_reason
    assert KEY not in str(error)
    assert result.text == "echo hi"


async def test_a_refreshed_bearer_token_is_accepted() -> None:
    renewed: list[str] = []

    async def renew() -> str:
        renewed.append(TOKEN)
        return TOKEN

    app = _app(AuthSpec.bearer(), TOKEN)
    async with running_server(app) as url:
        credential = Bearer("expired", refresh=renew)
        async with AgentClient(url, auth=credential) as agent:
            result = await agent.send("hi")  # 401, one refresh, then the new token
            following = await agent.send("again")
    assert result.text == "echo hi"
    assert following.text == "echo again"
    assert renewed == [TOKEN]
