"""Push notifications over real HTTP: the agent POSTs each task update to a receiver.

Both the agent and the receiver run on 127.0.0.1 in the test's event loop; the agent's
push policy lets loopback in (``PushPolicy(allow=["127.0.0.1/32"])``), which the default
policy refuses. The client
registers the receiver's URL with the message (``MessageSendConfiguration``); the
receiver records every POST and sets an ``asyncio.Event`` per task on a terminal state.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.base_client import BaseClient
from a2a.client.errors import A2AClientJSONRPCError
from a2a.server.tasks import InMemoryPushNotificationConfigStore
from a2a.types import (
    AgentCard,
    DataPart,
    GetTaskPushNotificationConfigParams,
    MessageSendConfiguration,
    PushNotificationConfig,
    Task,
    TaskState,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.push_policy import PushPolicy
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import Stores, open_stores
from llamon_agent.core.error_data import ApplicationErrorData
from llamon_agent.exceptions import ComponentInvokeError
from tests._support.a2a_server import a2a_client, make_card, running_server, texts, user_message

TOKEN = "t"
TERMINAL = frozenset({"completed", "failed", "canceled", "rejected"})
WAIT_SECONDS = 10.0
LOOPBACK = PushPolicy(allow=["127.0.0.1/32"])


@dataclass(frozen=True)
class Post:
    """One notification the receiver got: the JSON body and its token header."""

    payload: dict[str, Any]
    token: str | None


class Receiver:
    """A webhook at ``/hook`` that records POSTed tasks and signals terminal states."""

    def __init__(self, status_code: int = 204) -> None:
        self.status_code = status_code
        self.posts: list[Post] = []
        self._terminal: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.app = Starlette(routes=[Route("/hook", self._hook, methods=["POST"])])

    async def _hook(self, request: Request) -> Response:
        payload = await request.json()
        self.posts.append(Post(payload, request.headers.get("X-A2A-Notification-Token")))
        if payload.get("status", {}).get("state") in TERMINAL:
            self._terminal[payload["id"]].set()
        return Response(status_code=self.status_code)

    async def wait_terminal(self, task_id: str) -> Task:
        """The last task pushed for ``task_id`` once a terminal state arrived."""
        await asyncio.wait_for(self._terminal[task_id].wait(), timeout=WAIT_SECONDS)
        return Task.model_validate(self.for_task(task_id)[-1].payload)

    def for_task(self, task_id: str) -> list[Post]:
        return [post for post in self.posts if post.payload.get("id") == task_id]


async def scripted(ctx: AgentContext) -> str:
    if ctx.text == "upstream":
        raise ComponentInvokeError("MCP down at 10.0.0.7")
    return f"echo {ctx.text}"


@pytest.fixture(params=["memory", "sqlite"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    opened = await open_stores(request.param, home=tmp_path)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    hook = Receiver()
    async with running_server(hook.app) as url:
        yield hook, url + "/hook"


@pytest.fixture
async def agent_url(stores: Stores) -> AsyncIterator[str]:
    app = create_app(
        scripted,
        make_card(push=True),
        task_store=stores.task_store,
        push_config_store=stores.push_config_store,
        push_policy=LOOPBACK,
    )
    async with running_server(app) as url:
        yield url


def push_config(url: str) -> PushNotificationConfig:
    return PushNotificationConfig(url=url, token=TOKEN)


async def send_with_push(
    base_url: str, text: str, hook_url: str, *, streaming: bool, per_call: bool = False
) -> Task:
    """Send ``text`` registering ``hook_url``; the task as the client last saw it.

    ``per_call`` passes ``MessageSendConfiguration`` to ``send_message``; otherwise the
    config is the client's default (``ClientConfig.push_notification_configs``), which
    a2a-sdk 0.3.26 serializes without a pydantic warning (see ``per_call`` below).
    """
    async with httpx.AsyncClient(timeout=10.0) as http:
        card_json = (await http.get(f"{base_url}/.well-known/agent-card.json")).json()
        card = AgentCard.model_validate(card_json).model_copy(update={"url": base_url + "/"})
        defaults = [] if per_call else [push_config(hook_url)]
        config = ClientConfig(
            streaming=streaming, httpx_client=http, push_notification_configs=defaults
        )
        client = ClientFactory(config).create(card)
        # ``configuration=`` is on BaseClient, not on the abstract Client (a2a-sdk 0.3.26).
        assert isinstance(client, BaseClient)
        configuration = (
            MessageSendConfiguration(push_notification_config=push_config(hook_url))
            if per_call
            else None
        )
        last: Task | None = None
        async for event in client.send_message(user_message(text), configuration=configuration):
            assert isinstance(event, tuple), event
            last = event[0]
    assert last is not None
    return last


@pytest.mark.parametrize("streaming", [False, True], ids=["send", "stream"])
async def test_completed_task_is_pushed(
    agent_url: str, receiver: tuple[Receiver, str], streaming: bool
) -> None:
    hook, hook_url = receiver
    task = await send_with_push(agent_url, "hi", hook_url, streaming=streaming)
    pushed = await hook.wait_terminal(task.id)
    assert pushed.status.state == TaskState.completed
    assert pushed.context_id == task.context_id
    assert texts(pushed) == ["echo hi"]
    posts = hook.for_task(task.id)
    assert [post.token for post in posts] == [TOKEN] * len(posts)
    assert all(post.payload["kind"] == "task" for post in posts)
    assert "contextId" in posts[-1].payload


@pytest.mark.parametrize("streaming", [False, True], ids=["send", "stream"])
async def test_failed_task_is_pushed_with_error_data(
    agent_url: str, receiver: tuple[Receiver, str], streaming: bool
) -> None:
    hook, hook_url = receiver
    task = await send_with_push(agent_url, "upstream", hook_url, streaming=streaming)
    pushed = await hook.wait_terminal(task.id)
    assert pushed.status.state == TaskState.failed
    assert pushed.status.message is not None
    datas = [p.root.data for p in pushed.status.message.parts if isinstance(p.root, DataPart)]
    assert len(datas) == 1
    data = ApplicationErrorData.model_validate(datas[0])
    assert data.error_code == "UPSTREAM_UNAVAILABLE"
    assert data.error_reason == "component_invoke_error"
    assert data.retriable is True
    assert [post.token for post in hook.for_task(task.id)] == [TOKEN] * len(hook.for_task(task.id))


async def test_push_config_get_returns_the_registered_config(
    agent_url: str, receiver: tuple[Receiver, str]
) -> None:
    hook, hook_url = receiver
    task = await send_with_push(agent_url, "hi", hook_url, streaming=False)
    await hook.wait_terminal(task.id)
    async with a2a_client(agent_url) as client:
        by_task = await client.get_task_callback(GetTaskPushNotificationConfigParams(id=task.id))
        by_id = await client.get_task_callback(
            GetTaskPushNotificationConfigParams(id=task.id, push_notification_config_id=task.id)
        )
    for answer in (by_task, by_id):
        assert answer.task_id == task.id
        config = answer.push_notification_config
        # the token is never read back in clear; the webhook still receives it (above)
        assert (config.url, config.token, config.id) == (hook_url, "***", task.id)


async def test_without_the_capability_push_config_is_unsupported(
    receiver: tuple[Receiver, str],
) -> None:
    hook, hook_url = receiver
    app = create_app(scripted, make_card(push=False), push_policy=LOOPBACK)
    async with running_server(app) as url:
        task = await send_with_push(url, "hi", hook_url, streaming=False)
        async with a2a_client(url) as client:
            with pytest.raises(A2AClientJSONRPCError) as caught:
                await client.get_task_callback(GetTaskPushNotificationConfigParams(id=task.id))
    assert task.status.state == TaskState.completed
    assert caught.value.error.code == -32003
    assert caught.value.error.data is not None
    assert caught.value.error.data["errorReason"] == "push_notification_not_supported"
    assert hook.posts == []


# a2a-sdk 0.3.26's BaseClient.send_message merges ``configuration`` with
# ``model_copy(update=model_dump(...))``, leaving a plain dict where a
# PushNotificationConfig belongs: the request is still right, pydantic warns.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
async def test_per_call_message_send_configuration_registers_the_hook(
    agent_url: str, receiver: tuple[Receiver, str]
) -> None:
    hook, hook_url = receiver
    task = await send_with_push(agent_url, "hi", hook_url, streaming=False, per_call=True)
    pushed = await hook.wait_terminal(task.id)
    assert pushed.status.state == TaskState.completed
    assert [post.token for post in hook.for_task(task.id)][-1] == TOKEN


async def test_a_failing_webhook_does_not_fail_the_task(agent_url: str) -> None:
    hook = Receiver(status_code=500)
    async with running_server(hook.app) as url:
        task = await send_with_push(agent_url, "hi", url + "/hook", streaming=False)
        pushed = await hook.wait_terminal(task.id)
    assert task.status.state == TaskState.completed
    assert pushed.status.state == TaskState.completed
    assert texts(task) == ["echo hi"]


async def test_a_passed_store_does_not_turn_push_on_without_the_capability(
    receiver: tuple[Receiver, str],
) -> None:
    hook, hook_url = receiver
    app = create_app(
        scripted,
        make_card(push=False),
        push_config_store=InMemoryPushNotificationConfigStore(),
        push_policy=LOOPBACK,
    )
    async with running_server(app) as url:
        task = await send_with_push(url, "hi", hook_url, streaming=False)
    assert task.status.state == TaskState.completed
    # Without the capability there is no sender: nothing was queued, nothing is on its way.
    assert app.state.llamon_push_sender is None
    assert hook.posts == []
