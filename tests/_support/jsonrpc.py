"""Raw JSON-RPC over httpx, for tests about what exactly goes over the wire."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from llamon_agent.core.error_data import ProtocolErrorData

JSONRPC_MEMBERS = frozenset({"jsonrpc", "id", "result", "error"})


def text_message(text: str = "hello", **changes: Any) -> dict[str, Any]:
    """A wire ``Message`` (camelCase) with one text part; ``changes`` replace members."""
    message: dict[str, Any] = {
        "kind": "message",
        "role": "user",
        "messageId": str(uuid.uuid4()),
        "parts": [{"kind": "text", "text": text}],
    }
    message.update(changes)
    return message


def request(method: str, params: Any = None, request_id: Any = "r-1") -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


async def post(
    http: httpx.AsyncClient, url: str, body: dict[str, Any] | bytes | str
) -> dict[str, Any]:
    """POST ``body`` (a dict, or raw JSON text/bytes sent as is); the JSON reply."""
    content = json.dumps(body) if isinstance(body, dict) else body
    response = await http.post(
        url + "/", content=content, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json"), response.text
    reply: dict[str, Any] = response.json()
    return reply


async def post_stream(
    http: httpx.AsyncClient, url: str, body: dict[str, Any]
) -> list[dict[str, Any]]:
    """POST a streaming method; every SSE ``data`` event as JSON."""
    events: list[dict[str, Any]] = []
    async with http.stream("POST", url + "/", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line.removeprefix("data:").strip()))
    return events


def assert_jsonrpc_reply(reply: dict[str, Any], request_id: Any) -> None:
    """A JSON-RPC 2.0 response object: ``jsonrpc``, ``id`` always, one of result/error."""
    assert set(reply) <= JSONRPC_MEMBERS, reply
    assert reply["jsonrpc"] == "2.0", reply
    assert "id" in reply, reply
    assert reply["id"] == request_id, reply
    assert ("result" in reply) != ("error" in reply), reply
    if "error" in reply:
        error = reply["error"]
        assert set(error) <= {"code", "message", "data"}, error
        assert type(error["code"]) is int, error
        assert isinstance(error["message"], str), error


def assert_error(reply: dict[str, Any], code: int, reason: str) -> ProtocolErrorData:
    """The reply is JSON-RPC error ``code`` with ProtocolErrorData ``reason``."""
    assert "error" in reply, reply
    error = reply["error"]
    assert error["code"] == code, reply
    data = ProtocolErrorData.model_validate(error["data"])
    assert data.error_reason == reason, reply
    assert error["message"] == data.error_message
    return data
