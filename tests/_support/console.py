"""A served agent with the web console, for the console's HTTP and browser tests.

``ConsoleTestAgent`` answers ``partial`` by keeping an artifact and then failing
UPSTREAM_TIMEOUT / ``timeout``, ``quota`` by failing RATE_LIMITED / ``rate_limited``,
``block`` by working until ``release`` is set, anything else by echoing it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import AgentCard, Task
from starlette.applications import Starlette

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.card import AuthSpec, build_agent_card, skill
from llamon_agent.a2a.console import ConsoleOptions
from llamon_agent.a2a.server import create_app
from llamon_agent.core.errors import ErrorCode, raise_application_error
from llamon_agent.core.events import EventBus
from tests._support.a2a_server import send, texts, user_message

KEY = "console-operator-key-7Qm2"
"""The default caller's API key."""
PARTIAL_TEXT = "Found 3 of 5 invoices before the search timed out"
TIMEOUT_ACTION = "check_timeout_paging_and_downstream_latency"
RATE_ACTION = "back_off_or_raise_quota"


class ConsoleTestAgent:
    """Fails in two mapped ways, keeps a partial artifact, or blocks until released."""

    name = "console-test"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def invoke(self, ctx: AgentContext) -> str:
        command = ctx.text.strip()
        if command == "partial":
            await ctx.add_artifact(PARTIAL_TEXT, "invoice_search")
            raise_application_error(
                ErrorCode.UPSTREAM_TIMEOUT,
                "timeout",
                message="The invoice search timed out.",
                retriable=True,
            )
        if command == "quota":
            raise_application_error(
                ErrorCode.RATE_LIMITED,
                "rate_limited",
                message="The invoice API quota is used up.",
                retriable=True,
            )
        if command == "block":
            self.started.set()
            await self.release.wait()
            return "released"
        return f"echo: {command}"


def console_card(*, auth: bool = True) -> AgentCard:
    return build_agent_card(
        name="console-test",
        description="Fails in mapped ways so the web console has something to show.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        skills=[skill("echo", "Echo", "Echoes a command, or fails as it names.")],
        auth=AuthSpec.api_key() if auth else None,
    )


def console_app(
    agent: ConsoleTestAgent,
    *,
    auth: AuthConfig | None = None,
    console: ConsoleOptions | None = None,
    events: EventBus | None = None,
) -> Starlette:
    """The served agent with the console (an API key ``KEY`` unless ``auth`` is given)."""
    config = auth if auth is not None else AuthConfig.api_key(KEY)
    return create_app(
        agent,
        console_card(),
        auth=config,
        console=console or ConsoleOptions(),
        events=events if events is not None else EventBus(),
        gc_freeze=False,
    )


@asynccontextmanager
async def agent_client(base_url: str, key: str = KEY) -> AsyncIterator[Client]:
    """a2a-sdk's client for the served agent, sending ``key``."""
    async with httpx.AsyncClient(timeout=10.0, headers={"X-API-Key": key}) as http:
        card = console_card().model_copy(update={"url": base_url + "/"})
        yield ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)


async def ask(base_url: str, text: str, key: str = KEY) -> Task:
    """Send ``text``; the task it ended as."""
    async with agent_client(base_url, key) as client:
        return await send(client, user_message(text))


async def still_answers(base_url: str, key: str = KEY) -> None:
    """The agent answers the next A2A request."""
    task = await ask(base_url, "ping", key)
    assert task.status.state.value == "completed"
    assert texts(task) == ["echo: ping"]
