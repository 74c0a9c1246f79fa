"""An agent whose card does not declare push: one answer, -32003, for all four methods.

``tasks/pushNotificationConfig/{set,get,list,delete}`` each answer the A2A specification's
``PushNotificationNotSupportedError`` (-32003) with ProtocolErrorData, over raw httpx and
a2a-sdk's own client, and the agent keeps answering.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from a2a.client.errors import A2AClientJSONRPCError
from a2a.types import (
    GetTaskPushNotificationConfigParams,
    PushNotificationConfig,
    TaskPushNotificationConfig,
    TaskState,
)

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from tests._support.a2a_server import a2a_client, make_card, running_server, send, user_message
from tests._support.jsonrpc import assert_error, post, request, text_message

DEADLINE = 10.0
HOOK = {"url": "https://hooks.example.com/a2a", "token": "t"}
MESSAGE = (
    "This agent does not support push notifications (its card does not declare the "
    "pushNotifications capability)."
)


async def echo(ctx: AgentContext) -> str:
    return f"echo {ctx.text}"


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with running_server(create_app(echo, make_card(push=False))) as base:
        yield base


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tasks/pushNotificationConfig/set", {"pushNotificationConfig": HOOK}),
        ("tasks/pushNotificationConfig/get", {}),
        ("tasks/pushNotificationConfig/list", {}),
        ("tasks/pushNotificationConfig/delete", {"pushNotificationConfigId": "h"}),
    ],
)
async def test_every_push_config_method_answers_not_supported(
    url: str, method: str, params: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        sent = await post(http, url, request("message/send", {"message": text_message()}))
        task_id = sent["result"]["id"]
        key = "taskId" if method.endswith("/set") else "id"
        with caplog.at_level(logging.ERROR):
            reply = await post(http, url, request(method, {key: task_id, **params}, 41))
        data = assert_error(reply, -32003, "push_notification_not_supported")
        assert reply["id"] == 41
        assert data.error_code == "INVALID_INPUT"
        assert data.error_message == MESSAGE
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        again = await post(http, url, request("tasks/get", {"id": task_id}))
    assert again["result"]["status"]["state"] == "completed"


async def test_a2a_client_gets_not_supported_on_set_and_get(url: str) -> None:
    async with a2a_client(url) as client:
        task = await send(client, user_message("hi"))
        hook = PushNotificationConfig(url=HOOK["url"], token="t")
        with pytest.raises(A2AClientJSONRPCError) as on_set:
            await client.set_task_callback(
                TaskPushNotificationConfig(task_id=task.id, push_notification_config=hook)
            )
        with pytest.raises(A2AClientJSONRPCError) as on_get:
            await client.get_task_callback(GetTaskPushNotificationConfigParams(id=task.id))
        again = await send(client, user_message("next"))
    for caught in (on_set, on_get):
        assert caught.value.error.code == -32003
        assert caught.value.error.data is not None
        assert caught.value.error.data["errorReason"] == "push_notification_not_supported"
    assert again.status.state is TaskState.completed
