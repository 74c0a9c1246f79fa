"""Every reply is a JSON-RPC 2.0 response object clients can parse.

``jsonrpc: "2.0"``, an ``id`` member always (``null`` when the request's id is missing,
null or unusable) and exactly one of ``result``/``error`` -- for every method, success and
error alike, over raw httpx against a real server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.card import AuthSpec, build_agent_card, build_extended_card, skill
from llamon_agent.a2a.push_policy import PushPolicy
from llamon_agent.a2a.server import create_app
from tests._support.a2a_server import make_card, running_server
from tests._support.jsonrpc import (
    assert_error,
    assert_jsonrpc_reply,
    post,
    post_stream,
    request,
    text_message,
)

DEADLINE = 10.0
KEY = "shape-test-key-4b7e91c2"
HOOK = {"id": "hook-1", "url": "http://127.0.0.1:9/a2a", "token": "t"}
"""A loopback port nothing listens on (allowed below): no test traffic leaves 127.0.0.1."""


async def echo(ctx: AgentContext) -> str:
    return f"echo {ctx.text}"


def _card() -> Any:
    card = build_agent_card(
        name="shape-agent",
        description="Echoes test questions back for the JSON-RPC reply shape suite.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        skills=[skill("echo", "Echo", "Echoes one test question.", tags=["test"])],
        push_notifications=True,
        auth=AuthSpec.api_key(),
        authenticated_extended_card=True,
    )
    return card, build_extended_card(card, skills=[skill("admin", "Admin", "Admin echo.")])


async def test_every_method_answers_in_the_json_rpc_2_shape() -> None:
    card, extended = _card()
    app = create_app(
        echo,
        card,
        auth=AuthConfig.from_card(card, KEY),
        extended_card=extended,
        push_policy=PushPolicy(allow=["127.0.0.1/32"]),
    )
    headers = {"X-API-Key": KEY}
    async with (
        running_server(app) as url,
        httpx.AsyncClient(timeout=DEADLINE, headers=headers) as http,
    ):
        replies: list[tuple[str, Any, dict[str, Any]]] = []

        async def call(label: str, body: dict[str, Any] | str, request_id: Any) -> dict[str, Any]:
            reply = await asyncio.wait_for(post(http, url, body), DEADLINE)
            replies.append((label, request_id, reply))
            return reply

        sent = await call("send", request("message/send", {"message": text_message()}, 1), 1)
        task_id = sent["result"]["id"]
        config = {"taskId": task_id, "pushNotificationConfig": HOOK}
        by_config = {"id": task_id, "pushNotificationConfigId": "hook-1"}
        successes = [
            ("get", request("tasks/get", {"id": task_id}, "g")),
            ("push set", request("tasks/pushNotificationConfig/set", config, 2)),
            ("push get", request("tasks/pushNotificationConfig/get", by_config, 3)),
            ("push list", request("tasks/pushNotificationConfig/list", {"id": task_id}, 4)),
            ("push delete", request("tasks/pushNotificationConfig/delete", by_config, 5)),
            ("extended card", request("agent/getAuthenticatedExtendedCard", None, 6)),
        ]
        errors = [
            ("send invalid", request("message/send", {"message": {"kind": "message"}}, 10)),
            ("get unknown", request("tasks/get", {"id": "no-such-task"}, 11)),
            ("cancel finished", request("tasks/cancel", {"id": task_id}, 12)),
            ("cancel unknown", request("tasks/cancel", {"id": "no-such-task"}, 13)),
            ("push get unknown", request("tasks/pushNotificationConfig/get", {"id": "x"}, 14)),
            ("method unknown", request("tasks/nothing", {}, 15)),
            ("params not an object", request("tasks/get", [], 16)),
        ]
        for label, body in successes + errors:
            await call(label, body, body["id"])
        no_id: dict[str, Any] = {"jsonrpc": "2.0", "method": "tasks/get", "params": {"id": task_id}}
        unusable_ids: list[tuple[str, dict[str, Any] | str]] = [
            ("id missing", no_id),
            ("id null", {**no_id, "id": None}),
            ("id a float", {**no_id, "id": 1.5}),
            ("id an object", {**no_id, "id": {"a": 1}}),
            ("not json", "{not json"),
            ("not an object", "[]"),
            ("jsonrpc missing", {"id": 99, "method": "tasks/get", "params": {"id": "x"}}),
        ]
        for label, raw in unusable_ids:
            await call(label, raw, 99 if label == "jsonrpc missing" else None)

        stream_body = request("message/stream", {"message": text_message()}, "s")
        events = await post_stream(http, url, stream_body)
        resubscribe_body = request("tasks/resubscribe", {"id": task_id}, "r")
        resubscribe = await post_stream(http, url, resubscribe_body)
        stream_error = await post_stream(
            http, url, request("message/stream", {"message": text_message(parts=[])}, "e")
        )

    for label, request_id, reply in replies:
        try:
            assert_jsonrpc_reply(reply, request_id)
        except AssertionError as exc:
            raise AssertionError(f"{label}: {json.dumps(reply)}") from exc
    by_label = {label: reply for label, _, reply in replies}
    assert by_label["push delete"]["result"] is None
    for label, _ in successes:
        assert "result" in by_label[label], label
    for label, _ in errors:
        assert "error" in by_label[label], label
    assert events
    for event in events:
        assert_jsonrpc_reply(event, "s")
    assert events[-1]["result"]["status"]["state"] == "completed"
    # A finished task cannot be resubscribed to: a2a-sdk answers invalid params.
    assert [e.get("error", {}).get("code") for e in resubscribe] == [-32602]
    assert_jsonrpc_reply(resubscribe[0], "r")
    [refused] = stream_error
    assert_jsonrpc_reply(refused, "e")
    assert refused["error"]["code"] == -32602


async def test_message_stream_without_the_capability_is_one_error_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = create_app(echo, make_card(streaming=False))
    async with running_server(app) as url, httpx.AsyncClient(timeout=DEADLINE) as http:
        with caplog.at_level(logging.WARNING):
            events = await post_stream(
                http, url, request("message/stream", {"message": text_message()}, 8)
            )
        again = await post(http, url, request("message/send", {"message": text_message()}))
    [event] = events
    assert_jsonrpc_reply(event, 8)
    data = assert_error(event, -32004, "unsupported_operation")
    assert "does not declare the streaming capability" in data.error_message
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert again["result"]["status"]["state"] == "completed"
