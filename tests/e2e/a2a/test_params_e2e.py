"""Bad input is refused up front with -32602 naming the field path, never the value.

A real server on 127.0.0.1; raw httpx JSON-RPC for exact wire input (lone surrogate
escapes, parts without ``kind``), a2a-sdk's client where a client can send it. After every
refusal the next request is still answered.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.client.errors import A2AClientJSONRPCError
from a2a.types import TaskIdParams, TaskQueryParams, TaskState

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from tests._support.a2a_server import a2a_client, make_card, running_server, send, user_message
from tests._support.jsonrpc import assert_error, post, post_stream, request, text_message

DEADLINE = 10.0
SECRET = "s3cr3t-value-7c1d"
"""Put next to every bad value: it must never come back in a reply."""


async def echo(ctx: AgentContext) -> str:
    return f"echo {ctx.text}"


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with running_server(create_app(echo, make_card())) as base:
        yield base


async def assert_still_answering(http: httpx.AsyncClient, url: str) -> None:
    reply = await post(http, url, request("message/send", {"message": text_message("next")}))
    assert reply["result"]["status"]["state"] == "completed", reply


# --------------------------------------------------------------------------- lone surrogates

LONE = "\\ud800"
"""A lone high surrogate, as the six characters of its JSON escape."""


def _raw(message_changes: str = "", params_extra: str = "", request_id: str = '"r-1"') -> bytes:
    """A message/send body written by hand, so lone surrogate escapes reach the server."""
    message = (
        '{"kind": "message", "role": "user", "messageId": "m-1", '
        f'"parts": [{{"kind": "text", "text": "hi"}}]{message_changes}}}'
    )
    return (
        f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "message/send", '
        f'"params": {{"message": {message}{params_extra}}}}}'
    ).encode()


SURROGATE_CASES = {
    "messageId": (
        _raw().replace(b'"m-1"', f'"m-{SECRET}{LONE}"'.encode()),
        "params.message.messageId",
    ),
    "contextId": (_raw(f', "contextId": "c-{SECRET}{LONE}"'), "params.message.contextId"),
    "taskId": (_raw(f', "taskId": "{LONE}{SECRET}"'), "params.message.taskId"),
    "text": (
        _raw().replace(b'"text": "hi"', f'"text": "{SECRET}\\udfff"'.encode()),
        "params.message.parts[0].text",
    ),
    "metadata value": (
        _raw(f', "metadata": {{"k": ["ok", "{SECRET}{LONE}"]}}'),
        "params.message.metadata.k[1]",
    ),
    "metadata key": (
        _raw(f', "metadata": {{"{SECRET}{LONE}": 1}}'),
        "params.message.metadata",
    ),
    "file name": (
        _raw().replace(
            b'{"kind": "text", "text": "hi"}',
            (
                '{"kind": "file", "file": {"name": "'
                + SECRET
                + LONE
                + '.txt", "mimeType": "text/plain", "bytes": "aGk="}}'
            ).encode(),
        ),
        "params.message.parts[0].file.name",
    ),
    "params metadata": (
        _raw(params_extra=f', "metadata": {{"x": "{LONE}"}}'),
        "params.metadata.x",
    ),
}


@pytest.mark.parametrize("case", list(SURROGATE_CASES))
async def test_a_lone_surrogate_anywhere_is_refused_naming_the_field(url: str, case: str) -> None:
    body, path = SURROGATE_CASES[case]
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        reply = await asyncio.wait_for(post(http, url, body), DEADLINE)
        data = assert_error(reply, -32602, "invalid_unicode")
        assert reply["id"] == "r-1"
        assert data.error_code == "INVALID_INPUT"
        assert f" {path} " in data.error_message, data.error_message
        assert SECRET not in json.dumps(reply)
        await assert_still_answering(http, url)


async def test_a_lone_surrogate_is_refused_on_every_method(url: str) -> None:
    body = f'{{"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {{"id": "{LONE}"}}}}'
    stream = _raw().replace(b'"message/send"', b'"message/stream"').replace(b'"m-1"', b'"\\udc00"')
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        reply = await post(http, url, body)
        data = assert_error(reply, -32602, "invalid_unicode")
        assert reply["id"] == 7
        assert " params.id " in data.error_message
        reply = await post(http, url, stream)
        data = assert_error(reply, -32602, "invalid_unicode")
        assert " params.message.messageId " in data.error_message
        await assert_still_answering(http, url)


async def test_a_lone_surrogate_in_the_id_is_answered_with_a_null_id(url: str) -> None:
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        reply = await post(http, url, _raw(request_id=f'"{LONE}"'))
        data = assert_error(reply, -32600, "invalid_unicode")
        assert reply["id"] is None
        assert "Invalid request: id " in data.error_message
        await assert_still_answering(http, url)


async def test_a_surrogate_pair_is_valid_text(url: str) -> None:
    body = _raw().replace(b'"text": "hi"', b'"text": "hi \\ud83d\\ude00"')
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        reply = await post(http, url, body)
    assert reply["result"]["status"]["state"] == "completed", reply
    assert reply["result"]["artifacts"][0]["parts"][0]["text"] == "echo hi \U0001f600"


# --------------------------------------------------------------------------- historyLength


async def test_negative_history_length_is_refused_on_tasks_get(url: str) -> None:
    async with a2a_client(url) as client:
        task = await send(client, user_message("hi"))
        with pytest.raises(A2AClientJSONRPCError) as caught:
            await client.get_task(TaskQueryParams(id=task.id, history_length=-1))
        again = await client.get_task(TaskQueryParams(id=task.id, history_length=0))
    error = caught.value.error
    assert error.code == -32602
    assert error.data is not None
    assert error.data["errorReason"] == "invalid_history_length"
    assert error.message == "Invalid parameters: params.historyLength must be 0 or more."
    assert again.id == task.id


@pytest.mark.parametrize("method", ["message/send", "message/stream"])
async def test_negative_history_length_is_refused_on_send(url: str, method: str) -> None:
    params = {"message": text_message(), "configuration": {"historyLength": -3}}
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        if method == "message/send":
            reply = await post(http, url, request(method, params))
        else:
            [reply] = await post_stream(http, url, request(method, params))
        data = assert_error(reply, -32602, "invalid_history_length")
        assert reply["id"] == "r-1"
        assert "params.configuration.historyLength must be 0 or more" in data.error_message
        await assert_still_answering(http, url)


# --------------------------------------------------------------------------- parts and paths


async def test_a_part_without_kind_is_refused(url: str) -> None:
    params = {"message": text_message(parts=[{"kind": "text", "text": "a"}, {"text": SECRET}])}
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        reply = await post(http, url, request("message/send", params))
        data = assert_error(reply, -32602, "part_kind_missing")
        assert "params.message.parts[1].kind is missing" in data.error_message
        assert SECRET not in json.dumps(reply)
        await assert_still_answering(http, url)


INVALID_PARAMS: dict[str, tuple[dict[str, Any], str]] = {
    "role": (text_message(role=SECRET), "params.message.role: Input should be 'agent' or 'user'"),
    "text part without text": (
        text_message(parts=[{"kind": "text", "note": SECRET}]),
        "params.message.parts[0].text: Field required",
    ),
    "unknown kind": (
        text_message(parts=[{"kind": SECRET, "text": "x"}]),
        "params.message.parts[0].kind: Input should be 'text' or 'file' or 'data'",
    ),
    "messageId type": (
        text_message(messageId=[SECRET]),
        "params.message.messageId: Input should be a valid string",
    ),
}


@pytest.mark.parametrize("case", list(INVALID_PARAMS))
async def test_invalid_params_name_the_field_path_not_the_value(url: str, case: str) -> None:
    message, expected = INVALID_PARAMS[case]
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        reply = await post(http, url, request("message/send", {"message": message}))
        data = assert_error(reply, -32602, "invalid_params")
        assert data.error_message == f"Invalid parameters: {expected}."
        assert SECRET not in json.dumps(reply)
        await assert_still_answering(http, url)


async def test_a_missing_params_member_is_named(url: str) -> None:
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        reply = await post(http, url, request("tasks/get", {"historyLength": 1}))
        data = assert_error(reply, -32602, "invalid_params")
        assert data.error_message == "Invalid parameters: params.id: Field required."
        await assert_still_answering(http, url)


# --------------------------------------------------------------------------- not cancelable


async def test_not_cancelable_names_the_state_as_on_the_wire(url: str) -> None:
    async with a2a_client(url) as client:
        task = await send(client, user_message("hi"))
        assert task.status.state is TaskState.completed
        with pytest.raises(A2AClientJSONRPCError) as caught:
            await client.cancel_task(TaskIdParams(id=task.id))
        again = await send(client, user_message("next"))
    error = caught.value.error
    assert error.code == -32002
    assert error.message == "Task cannot be canceled - current state: completed"
    assert error.data is not None
    assert error.data["errorMessage"] == error.message
    assert again.status.state is TaskState.completed


# --------------------------------------------------------------------------- the server's log


async def test_a_clients_bad_request_logs_no_traceback_and_none_of_its_values(
    url: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """A client's mistake is answered, not logged as a server fault: no traceback (a2a-sdk
    would log one holding the request's values, or print one for a body that is not JSON)."""
    bad_role = text_message(role=f"robot-{SECRET}")
    with caplog.at_level(logging.INFO):  # DEBUG is where a2a-sdk logs whole request bodies
        async with httpx.AsyncClient(timeout=DEADLINE) as http:
            reply = await post(http, url, request("message/send", {"message": bad_role}))
            assert_error(reply, -32602, "invalid_params")
            reply = await post(http, url, f'{{"jsonrpc": "2.0", "id": "{SECRET}", ')
            assert_error(reply, -32700, "json_parse")
            assert reply["id"] is None
            reply = await post(http, url, b"\xff\xfe not utf-8 " + SECRET.encode())
            assert_error(reply, -32700, "json_parse")
            await assert_still_answering(http, url)
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err + printed.out
    assert not [record for record in caplog.records if record.exc_info or record.exc_text]
    assert SECRET not in caplog.text
