"""Request limits hold on the wire: every refusal names the limit, never the value sent.

A real server on 127.0.0.1; raw httpx JSON-RPC for exact bodies, and a raw asyncio socket
for what httpx will not send (chunked bodies cut short, Content-Length together with
Transfer-Encoding). A refused request never reaches the agent or the task store, and
after every refusal the next request is still answered.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.protocol import MAX_DEPTH_CEILING, RequestLimits
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores.memory import BoundedMemoryTaskStore
from tests._support.a2a_server import make_card, running_server
from tests._support.jsonrpc import assert_error, post, post_stream, request, text_message

DEADLINE = 10.0
SECRET = "s3cr3t-value-5e2a"
"""Put into every refused value: it must never come back in a reply or a log line."""


@dataclass
class Served:
    url: str
    app: Starlette
    calls: list[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def stored(self) -> int:
        store = self.app.state.llamon_task_store
        assert isinstance(store, BoundedMemoryTaskStore)
        return len(store)


async def _serve(limits: RequestLimits | None = None) -> AsyncIterator[Served]:
    calls: list[str] = []

    async def echo(ctx: AgentContext) -> str:
        calls.append(ctx.text)
        return f"echo {ctx.text}"

    app = create_app(echo, make_card(push=True), limits=limits)
    async with running_server(app) as url:
        yield Served(url, app, calls)


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    """The server with the default limits."""
    async for one in _serve():
        yield one


@pytest.fixture
async def small() -> AsyncIterator[Served]:
    """A server with small limits, so a test can pass each one cheaply."""
    limits = RequestLimits(max_body_bytes=4096, max_parts=3, max_metadata_keys=5, max_depth=8)
    async for one in _serve(limits):
        yield one


async def assert_still_answering(served: Served) -> None:
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        reply = await post(http, served.url, request("message/send", {"message": text_message()}))
    assert reply["result"]["status"]["state"] == "completed", reply


async def send_raw(served: Served, params: Any, method: str = "message/send") -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        return await asyncio.wait_for(post(http, served.url, request(method, params)), DEADLINE)


def assert_refused(reply: dict[str, Any], code: int, reason: str, *named: str) -> str:
    """The refusal: exact code and reason, a message naming each of ``named``, no value."""
    data = assert_error(reply, code, reason)
    assert data.error_code == "INVALID_INPUT"
    for text in named:
        assert text in data.error_message, data.error_message
    assert SECRET not in json.dumps(reply)
    return data.error_message


# --------------------------------------------------------------------------- raw HTTP


@dataclass
class RawReply:
    status: int
    headers: dict[str, str]
    body: dict[str, Any]
    closed: bool
    """The server closed the connection after answering (it reads no more of it)."""


async def _read_reply(reader: asyncio.StreamReader) -> RawReply:
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers["content-length"]))
    closed = (await reader.read()) == b""
    return RawReply(int(status_line.split()[1]), headers, json.loads(body), closed)


async def exchange(served: Served, head: bytes, parts: list[bytes]) -> RawReply:
    """Send ``head`` and each of ``parts`` over one raw connection, then read the reply
    (the connection is never finished by this side: no more is sent after ``parts``)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    try:
        writer.write(head)
        for part in parts:
            writer.write(part)
        await writer.drain()
        return await asyncio.wait_for(_read_reply(reader), DEADLINE)
    finally:
        writer.close()


def _head(*headers: str) -> bytes:
    lines = ["POST / HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def _send_body(text: str = "hi") -> bytes:
    return json.dumps(request("message/send", {"message": text_message(text)})).encode()


async def test_a_chunked_body_over_the_limit_is_refused_before_it_is_all_read(
    small: Served,
) -> None:
    """6,000 bytes of a body still being sent (no final chunk): the server answers
    -32600 at the first chunk over 4,096 bytes and closes, without waiting for the rest."""
    padding = json.dumps({"pad": SECRET * 400}).encode()
    assert len(padding) > 6000
    reply = await exchange(
        small,
        _head("Transfer-Encoding: chunked"),
        [_chunk(padding[:3000]), _chunk(padding[3000:6000])],
    )
    assert reply.status == 200
    assert_refused(reply.body, -32600, "body_too_large", "at most 4096 bytes")
    assert reply.body["id"] is None
    assert reply.headers["connection"] == "close"
    assert reply.closed
    assert small.stored() == 0
    await assert_still_answering(small)


async def test_a_chunked_body_within_the_limit_is_answered(small: Served) -> None:
    body = _send_body("chunked")
    reply = await exchange(
        small,
        _head("Transfer-Encoding: chunked"),
        [_chunk(body[:50]), _chunk(body[50:]), b"0\r\n\r\n"],
    )
    assert reply.body["result"]["status"]["state"] == "completed", reply.body
    assert small.calls == ["chunked"]


async def test_a_declared_content_length_over_the_default_limit_is_refused_unread(
    served: Served,
) -> None:
    """Content-Length 30 MB and not a byte of body sent: the answer comes at once."""
    reply = await exchange(served, _head(f"Content-Length: {30 * 1024 * 1024}"), [])
    assert_refused(reply.body, -32600, "body_too_large", f"at most {10 * 1024 * 1024} bytes")
    assert reply.closed
    await assert_still_answering(served)


async def test_content_length_with_transfer_encoding_is_refused_not_processed(
    served: Served,
) -> None:
    """Request smuggling: uvicorn (h11) lets the pair through and reads the body chunked,
    so the app refuses it, and the agent never runs."""
    body = _send_body(SECRET)
    chunked = _chunk(body) + b"0\r\n\r\n"
    reply = await exchange(
        served,
        _head(f"Content-Length: {len(chunked)}", "Transfer-Encoding: chunked"),
        [chunked],
    )
    assert reply.status == 200
    assert_refused(
        reply.body, -32600, "ambiguous_body_length", "Content-Length", "Transfer-Encoding"
    )
    assert reply.closed
    assert served.calls == []
    assert served.stored() == 0
    await assert_still_answering(served)


# --------------------------------------------------------------------------- payload


BIG = SECRET + "x" * 1_000_000
"""Over the default 1 MB payload limit by itself."""

PAYLOAD_CASES: dict[str, dict[str, Any]] = {
    "message metadata": {"message": text_message(metadata={"k": BIG})},
    "params metadata": {"message": text_message(), "metadata": {"k": BIG}},
    "part metadata": {
        "message": text_message(parts=[{"kind": "text", "text": "hi", "metadata": {"k": BIG}}])
    },
    "file name": {
        "message": text_message(
            parts=[
                {"kind": "file", "file": {"name": BIG, "mimeType": "text/plain", "bytes": "aGk="}}
            ]
        )
    },
    "file mime type": {
        "message": text_message(
            parts=[{"kind": "file", "file": {"name": "a.txt", "mimeType": BIG, "bytes": "aGk="}}]
        )
    },
    "reference task ids": {"message": text_message(referenceTaskIds=[BIG])},
    "extensions": {"message": text_message(extensions=[BIG])},
}


@pytest.mark.parametrize("case", list(PAYLOAD_CASES))
async def test_every_field_counts_toward_the_payload_limit(served: Served, case: str) -> None:
    reply = await send_raw(served, PAYLOAD_CASES[case])
    assert_refused(reply, -32602, "payload_too_large", "at most 1000000 bytes")
    assert served.calls == []
    assert served.stored() == 0
    await assert_still_answering(served)


async def test_text_file_and_metadata_add_up_toward_the_payload_limit(served: Served) -> None:
    """Each field under the limit, together over it."""
    third = "y" * 340_000
    message = text_message(
        third,
        metadata={"k": third},
        parts=[
            {"kind": "text", "text": third},
            {"kind": "file", "file": {"name": third, "bytes": base64.b64encode(b"hi").decode()}},
        ],
    )
    reply = await send_raw(served, {"message": message})
    assert_refused(reply, -32602, "payload_too_large", "at most 1000000 bytes")
    assert served.calls == []


# --------------------------------------------------------------------------- parts, keys


async def test_more_parts_than_the_limit_are_refused(small: Served) -> None:
    parts = [{"kind": "text", "text": f"p{i}"} for i in range(4)]
    reply = await send_raw(small, {"message": text_message(parts=parts)})
    assert_refused(reply, -32602, "too_many_parts", "params.message.parts", "at most 3 parts")
    assert small.calls == []
    reply = await send_raw(small, {"message": text_message(parts=parts[:3])})
    assert reply["result"]["status"]["state"] == "completed", reply


async def test_the_default_parts_limit_is_100(served: Served) -> None:
    parts = [{"kind": "text", "text": "p"} for _ in range(101)]
    reply = await send_raw(served, {"message": text_message(parts=parts)})
    assert_refused(reply, -32602, "too_many_parts", "at most 100 parts")
    reply = await send_raw(served, {"message": text_message(parts=parts[:100])})
    assert reply["result"]["status"]["state"] == "completed", reply


async def test_metadata_keys_at_every_level_count_toward_the_limit(small: Served) -> None:
    """5 keys allowed in all: 2 in params, 2 in the message (one nested), 2 in a part."""
    message = text_message(
        metadata={"a": {SECRET: 1}},
        parts=[{"kind": "text", "text": "hi", "metadata": {"c": 1, "d": 2}}],
    )
    reply = await send_raw(small, {"message": message, "metadata": {"e": 1, "f": 2}})
    assert_refused(
        reply,
        -32602,
        "too_many_metadata_keys",
        "params.message.parts[0].metadata",
        "5 metadata keys",
    )
    assert small.calls == []
    reply = await send_raw(small, {"message": message, "metadata": {"e": 1}})
    assert reply["result"]["status"]["state"] == "completed", reply


async def test_the_default_metadata_keys_limit_is_100(served: Served) -> None:
    metadata = {f"k{i}": i for i in range(101)}
    reply = await send_raw(served, {"message": text_message(metadata=metadata)})
    assert_refused(reply, -32602, "too_many_metadata_keys", "params.message.metadata", "100")
    await assert_still_answering(served)


# --------------------------------------------------------------------------- nesting depth


def _nested(levels: int) -> Any:
    value: Any = SECRET
    for _ in range(levels):
        value = [value]
    return value


async def test_nesting_deeper_than_the_limit_is_refused_naming_the_field(served: Served) -> None:
    """The request object is level 1; params 2, message 3, metadata 4, its value 5..."""
    deepest_allowed = _nested(32 - 4)
    reply = await send_raw(served, {"message": text_message(metadata={"k": deepest_allowed})})
    assert reply["result"]["status"]["state"] == "completed", reply
    reply = await send_raw(served, {"message": text_message(metadata={"k": [deepest_allowed]})})
    message = assert_refused(
        reply, -32602, "nesting_too_deep", "params.message.metadata.k ", "more than 32 levels"
    )
    assert message == (
        "Invalid parameters: params.message.metadata.k is nested more than 32 levels deep, "
        "the most this agent accepts (the request object is level 1)."
    )
    assert served.stored() == 1
    await assert_still_answering(served)


async def test_nesting_100000_levels_is_refused_without_a_traceback(
    served: Served, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python's parser gives up (RecursionError) long before: still a refusal naming the
    limit, and no 500, no traceback."""
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": ' + (
        b"[" * 100_000 + b"]" * 100_000 + b"}"
    )
    with caplog.at_level(logging.INFO):
        async with httpx.AsyncClient(timeout=DEADLINE) as http:
            reply = await post(http, served.url, body)
    assert_refused(reply, -32600, "nesting_too_deep", "the body", "more than 32 levels")
    assert reply["id"] is None
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err + printed.out + caplog.text
    await assert_still_answering(served)


async def test_the_depth_limit_is_configurable(small: Served) -> None:
    reply = await send_raw(small, {"message": text_message(data=None, metadata={"k": _nested(5)})})
    assert_refused(reply, -32602, "nesting_too_deep", "params.message.metadata.k ", "more than 8")
    reply = await send_raw(small, {"message": text_message(metadata={"k": _nested(4)})})
    assert reply["result"]["status"]["state"] == "completed", reply


def test_limits_must_be_positive_and_depth_bounded() -> None:
    with pytest.raises(ValueError, match="max_parts must be a positive integer"):
        RequestLimits(max_parts=0)
    with pytest.raises(ValueError, match=f"max_depth must be at most {MAX_DEPTH_CEILING}"):
        RequestLimits(max_depth=MAX_DEPTH_CEILING + 1)


# --------------------------------------------------------------------------- integers


async def test_an_integer_beyond_64_bits_is_refused_naming_the_field(served: Served) -> None:
    reply = await send_raw(served, {"id": "any", "historyLength": 2**70}, "tasks/get")
    assert_refused(reply, -32602, "integer_out_of_range", "params.historyLength is beyond 64 bits")
    params = {"message": text_message(data={"n": [1, 2**64]})}
    params["message"]["parts"][0] = {"kind": "data", "data": {"n": [1, 2**64]}}
    reply = await send_raw(served, params)
    assert_refused(reply, -32602, "integer_out_of_range", "params.message.parts[0].data.n[1] ")
    reply = await send_raw(
        served, {"message": text_message(), "configuration": {"historyLength": -(2**63) - 1}}
    )
    assert_refused(reply, -32602, "integer_out_of_range", "params.configuration.historyLength")
    assert served.calls == []
    await assert_still_answering(served)


async def test_the_64_bit_edges_are_accepted(served: Served) -> None:
    message = text_message(parts=[{"kind": "data", "data": {"max": 2**63 - 1, "min": -(2**63)}}])
    reply = await send_raw(served, {"message": message})
    assert reply["result"]["status"]["state"] == "completed", reply


async def test_an_id_beyond_64_bits_is_refused_with_a_null_id(served: Served) -> None:
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        reply = await post(http, served.url, request("tasks/get", {"id": "x"}, request_id=2**70))
        assert_refused(reply, -32600, "integer_out_of_range", "Invalid request: id ")
        assert reply["id"] is None
        digits = '{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x", '
        reply = await post(http, served.url, digits + '"historyLength": ' + "9" * 5000 + "}}")
        assert_refused(reply, -32600, "integer_out_of_range", "beyond 64 bits")
    await assert_still_answering(served)


# --------------------------------------------------------------------------- text


async def test_a_body_that_is_not_utf8_is_a_parse_error(served: Served) -> None:
    cases = {
        "invalid byte": _send_body("XX").replace(b'"XX"', b'"\xc3\x28"'),
        "encoded surrogate": _send_body("XX").replace(b'"XX"', b'"\xed\xa0\x80"'),
        "UTF-16": _send_body().decode().encode("utf-16"),
    }
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        for body in cases.values():
            reply = await post(http, served.url, body)
            message = assert_refused(reply, -32700, "json_parse", "not valid UTF-8")
            assert message == "Parse error: the body is not valid UTF-8, which JSON text must be."
            assert reply["id"] is None
    assert served.calls == []
    await assert_still_answering(served)


async def test_nan_and_infinity_are_not_json(served: Served) -> None:
    body = _send_body("XX").replace(b'"XX"', b'"hi", "metadata": {"n": NaN}')
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        reply = await post(http, served.url, body)
        assert_refused(reply, -32700, "json_parse", "NaN and Infinity are not JSON")
        reply = await post(http, served.url, body.replace(b"NaN", b"-Infinity"))
        assert_refused(reply, -32700, "json_parse", "NaN and Infinity are not JSON")
    assert served.calls == []


# --------------------------------------------------------------------------- empty task ids


EMPTY_ID_CASES: dict[str, tuple[str, dict[str, Any], str]] = {
    "tasks/get": ("tasks/get", {"id": ""}, "params.id"),
    "tasks/cancel": ("tasks/cancel", {"id": ""}, "params.id"),
    "push get": ("tasks/pushNotificationConfig/get", {"id": ""}, "params.id"),
    "push list": ("tasks/pushNotificationConfig/list", {"id": ""}, "params.id"),
    "push delete": (
        "tasks/pushNotificationConfig/delete",
        {"id": "", "pushNotificationConfigId": "c"},
        "params.id",
    ),
    "push set": (
        "tasks/pushNotificationConfig/set",
        {"taskId": "", "pushNotificationConfig": {"url": "https://receiver.example/hook"}},
        "params.taskId",
    ),
    "message taskId": (
        "message/send",
        {"message": text_message(taskId="")},
        "params.message.taskId",
    ),
}


@pytest.mark.parametrize("case", list(EMPTY_ID_CASES))
async def test_an_empty_task_id_is_refused_naming_the_field(served: Served, case: str) -> None:
    method, params, path = EMPTY_ID_CASES[case]
    reply = await send_raw(served, params, method)
    message = assert_refused(
        reply, -32602, "empty_task_id", f"parameters: {path} must not be empty"
    )
    assert reply["id"] == "r-1", message
    assert served.calls == []
    await assert_still_answering(served)


@pytest.mark.parametrize("method", ["tasks/resubscribe", "message/stream"])
async def test_an_empty_task_id_is_refused_on_streams(served: Served, method: str) -> None:
    params = {"id": ""} if method == "tasks/resubscribe" else {"message": text_message(taskId="")}
    path = "params.id" if method == "tasks/resubscribe" else "params.message.taskId"
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        [reply] = await asyncio.wait_for(
            post_stream(http, served.url, request(method, params)), DEADLINE
        )
    assert_refused(reply, -32602, "empty_task_id", f"{path} must not be empty")
    await assert_still_answering(served)


# --------------------------------------------------------------------------- the log


def _malformed() -> list[bytes]:
    def body(method: str, params: Any, request_id: Any = "r-1") -> bytes:
        return json.dumps(request(method, params, request_id)).encode()

    big = SECRET + "x" * 1_000_000
    return [
        _send_body("XX").replace(b'"XX"', b'"\xc3\x28' + SECRET.encode() + b'"'),
        b'{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}",
        body("message/send", {"message": text_message(metadata={"k": _nested(40)})}),
        body("tasks/get", {"id": SECRET, "historyLength": 2**70}),
        body("tasks/get", {"id": SECRET}, 2**70),
        _send_body("XX").replace(b'"XX"', f'"{SECRET}\\ud800"'.encode()),
        body("tasks/get", {"id": ""}),
        body("tasks/cancel", {"id": ""}),
        body("tasks/pushNotificationConfig/list", {"id": ""}),
        body("message/send", {"message": text_message(SECRET, taskId="")}),
        body("message/send", {"message": text_message(metadata={"k": big})}),
        body(
            "message/send", {"message": text_message(parts=[{"kind": "text", "text": "p"}] * 101)}
        ),
        body("message/send", {"message": text_message(metadata={f"k{i}": 1 for i in range(101)})}),
        body("message/send", {"message": text_message(role=SECRET)}),
        f'{{"jsonrpc": "2.0", "id": "{SECRET}", '.encode(),
        b"\xff\xfe" + SECRET.encode(),
        _send_body("XX").replace(b'"XX"', b'"hi", "metadata": {"n": NaN}'),
    ]


async def test_bad_input_logs_at_most_one_line_per_request_and_no_traceback(
    served: Served, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every kind of malformed request above, one after another: each is answered with a
    refusal (never -32603), and the log holds at most one line for it, no traceback and
    none of its values."""
    bodies = _malformed()
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        for body in bodies:
            caplog.clear()
            with caplog.at_level(logging.INFO):
                reply = await asyncio.wait_for(post(http, served.url, body), DEADLINE)
            assert reply["error"]["code"] in {-32700, -32600, -32602}, reply
            server_records = [r for r in caplog.records if not r.name.startswith("httpx")]
            assert len(server_records) <= 1, [r.getMessage()[:200] for r in server_records]
            assert all("\n" not in r.getMessage() for r in server_records)
            assert not [record for record in caplog.records if record.exc_info or record.exc_text]
            assert SECRET not in caplog.text
            assert "Traceback" not in caplog.text
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err + printed.out
    assert served.calls == []
    assert served.stored() == 0
    await assert_still_answering(served)
