"""The authenticated extended card: -32007 where none is declared, served only to callers
with credentials where it is.

Real servers on 127.0.0.1; raw httpx for exact codes, a2a-sdk's client (``get_card``) for
what a client sees.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import AgentCard

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.card import AuthSpec, build_agent_card, build_extended_card, skill
from llamon_agent.a2a.server import create_app
from tests._support.a2a_server import make_card, running_server
from tests._support.jsonrpc import assert_error, post, request, text_message

DEADLINE = 10.0
KEY = "extended-card-key-93c0d1f7"
ADMIN = skill("audit", "Audit", "Lists the questions echoed today.", tags=["admin"])


async def echo(ctx: AgentContext) -> str:
    return f"echo {ctx.text}"


def public_card(*, extended: bool = True) -> AgentCard:
    return build_agent_card(
        name="extended-agent",
        description="Echoes test questions back for the extended agent card suite.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        skills=[skill("echo", "Echo", "Echoes one test question.", tags=["test"])],
        auth=AuthSpec.api_key(),
        authenticated_extended_card=extended,
    )


@pytest.fixture
async def served() -> AsyncIterator[str]:
    card = public_card()
    extended = build_extended_card(card, skills=[ADMIN])
    app = create_app(echo, card, auth=AuthConfig.from_card(card, KEY), extended_card=extended)
    async with running_server(app) as url:
        yield url


async def test_without_one_the_extended_card_is_32007_and_logs_no_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with (
        running_server(create_app(echo, make_card())) as url,
        httpx.AsyncClient(timeout=DEADLINE) as http,
    ):
        with caplog.at_level(logging.WARNING):
            reply = await post(http, url, request("agent/getAuthenticatedExtendedCard", None, 3))
        data = assert_error(reply, -32007, "authenticated_extended_card_not_configured")
        assert reply["id"] == 3
        assert data.error_code == "NOT_FOUND"
        assert "supportsAuthenticatedExtendedCard" in data.error_message
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
        again = await post(http, url, request("message/send", {"message": text_message()}))
    assert again["result"]["status"]["state"] == "completed"


async def test_an_authenticated_a2a_client_gets_the_extended_card(served: str) -> None:
    async with httpx.AsyncClient(timeout=DEADLINE, headers={"X-API-Key": KEY}) as http:
        public = AgentCard.model_validate(
            (await http.get(served + "/.well-known/agent-card.json")).json()
        )
        card = public.model_copy(update={"url": served + "/"})
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        extended = await client.get_card()
        again = await post(http, served, request("message/send", {"message": text_message()}))
    assert public.supports_authenticated_extended_card is True
    assert [s.id for s in public.skills] == ["echo"]
    assert [s.id for s in extended.skills] == ["echo", "audit"]
    assert again["result"]["status"]["state"] == "completed"


@pytest.mark.parametrize("headers", [{}, {"X-API-Key": "wrong-key-0000"}], ids=["none", "wrong"])
async def test_the_extended_card_is_not_served_without_credentials(
    served: str, headers: dict[str, str]
) -> None:
    body = request("agent/getAuthenticatedExtendedCard", None, 1)
    async with httpx.AsyncClient(timeout=DEADLINE, headers=headers) as http:
        response = await http.post(served + "/", json=body)
        legacy = await http.get(served + "/agent/authenticatedExtendedCard")
    for answer in (response, legacy):
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == -32040
        assert "audit" not in answer.text


def test_build_agent_card_declares_it_only_with_auth() -> None:
    assert public_card().supports_authenticated_extended_card is True
    assert public_card(extended=False).supports_authenticated_extended_card is None
    with pytest.raises(ValueError, match="only to authenticated callers"):
        build_agent_card(
            name="n",
            description="d",
            url="http://127.0.0.1:1/",
            version="1.0.0",
            skills=[],
            authenticated_extended_card=True,
        )


def _unauthed_declaring_card() -> AgentCard:
    return make_card().model_copy(update={"supports_authenticated_extended_card": True})


@pytest.mark.parametrize(
    ("card", "kwargs", "message"),
    [
        (public_card(extended=False), {"auth": "yes", "extended": True}, "does not declare it"),
        (_unauthed_declaring_card(), {"extended": True}, "only to authenticated callers"),
    ],
    ids=["given-not-declared", "no-auth"],
)
def test_create_app_refuses_an_extended_card_it_cannot_serve_safely(
    card: AgentCard, kwargs: dict[str, Any], message: str
) -> None:
    auth = AuthConfig.from_card(card, KEY) if kwargs.get("auth") else None
    extended = build_extended_card(card, skills=[ADMIN]) if kwargs.get("extended") else None
    with pytest.raises(ValueError, match=message):
        create_app(echo, card, auth=auth, extended_card=extended)


def test_the_agent_card_doc_example_runs() -> None:
    doc = (Path(__file__).parents[3] / "docs" / "agent-card.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
    block = next(b for b in blocks if "build_extended_card(" in b)
    namespace: dict[str, object] = {}
    exec(compile(block, "agent-card.md", "exec"), namespace)  # noqa: S102
    extended = namespace["extended"]
    assert isinstance(extended, AgentCard)
    assert extended.supports_authenticated_extended_card is True


async def test_a_declaring_card_without_an_extended_one_serves_itself() -> None:
    card = public_card()
    app = create_app(echo, card, auth=AuthConfig.from_card(card, KEY))
    async with (
        running_server(app) as url,
        httpx.AsyncClient(timeout=DEADLINE, headers={"X-API-Key": KEY}) as http,
    ):
        reply = await post(http, url, request("agent/getAuthenticatedExtendedCard", None, 2))
    assert [s["id"] for s in reply["result"]["skills"]] == ["echo"]
