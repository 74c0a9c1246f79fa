"""The security boundary on the wire: every JSON-RPC error and every log line, whoever made it.

Real servers on 127.0.0.1, raw JSON-RPC over httpx, log records captured at DEBUG from every
logger.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import asyncpg
import httpx
import pytest
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import InvalidParamsError
from a2a.utils.errors import ServerError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import create_async_engine

from llamon_agent.a2a import AgentContext, create_app
from llamon_agent.core.error_data import ProtocolErrorData
from tests._support.a2a_server import make_card, running_server
from tests._support.boundary_cases import Case, cases, reveals
from tests._support.jsonrpc import post, post_stream, request, text_message

# One secret of each kind a hand-built error has been seen to carry.
SECRETS = {
    "password": "hunter2-Pa55word",
    "email": "alice.kim@corp-mail.example",
    "api_key": "sk-proj-Q2x7Lm9Pz4Kd8Rt1Vb6Nw3Hs5Jf0Yc2Ua",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib2IifQ.c2lnbmF0dXJlLXZhbHVl",
    "url_password": "UrlPw-778899",
    "host": "db-primary.prod.internal",
    "card": "4111 1111 1111 1111",
    "pct_email": "bob.lee%40corp-mail.example",
}
SECRET_PIECES = (
    "hunter2-Pa55word",
    "alice.kim",
    "corp-mail",
    "Q2x7Lm9Pz4Kd8",
    "eyJhbGciOiJIUzI1NiJ9",
    "UrlPw-778899",
    "db-primary",
    "4111 1111",
    "bob.lee",
)


def _hand_built_error() -> ServerError:
    """A ServerError whose data already carries an errorCode, secrets in every string."""
    text = (
        f"login failed: password={SECRETS['password']} for {SECRETS['email']} "
        f"with {SECRETS['api_key']} token {SECRETS['jwt']} via "
        f"postgresql://app:{SECRETS['url_password']}@{SECRETS['host']}:5432/app "
        f"card {SECRETS['card']} ?q={SECRETS['pct_email']}"
    )
    return ServerError(
        error=InvalidParamsError(
            message=text,
            data={
                "errorCode": "INVALID_INPUT",
                "errorReason": f"password={SECRETS['password']}",
                "errorMessage": text,
                "errorSource": f"db:{SECRETS['host']}",
                "retriable": False,
                "debug": {"dsn": text, "user": SECRETS["email"]},
            },
        )
    )


async def _raises_hand_built(ctx: AgentContext) -> str:
    raise _hand_built_error()


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(logging.Formatter("%(name)s %(message)s").format(record))


@pytest.fixture
def debug_logs() -> Iterator[_Records]:
    """Every record of every logger at DEBUG, formatted as a handler would."""
    root = logging.getLogger()
    handler = _Records()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


def _leaked(text: str) -> list[str]:
    return [piece for piece in SECRET_PIECES if piece in text]


def _error_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" in reply, reply
    error: dict[str, Any] = reply["error"]
    assert error["code"] == -32602, reply
    data = ProtocolErrorData.model_validate(error["data"])
    assert data.error_code.value == "INVALID_INPUT"
    assert set(error["data"]) <= set(data.to_wire()), error["data"]  # no foreign keys
    return error


async def test_a_hand_built_server_error_is_scrubbed_in_send_stream_and_logs(
    debug_logs: _Records,
) -> None:
    app = create_app(_raises_hand_built, make_card())
    async with running_server(app) as url, httpx.AsyncClient(timeout=10.0) as http:
        reply = await post(http, url, request("message/send", {"message": text_message()}))
        error = _error_of(reply)
        assert _leaked(json.dumps(reply)) == [], reply
        assert "login failed: password=[REDACTED:password]" in error["message"]
        assert error["data"]["errorMessage"] == error["message"]

        events = await post_stream(
            http, url, request("message/stream", {"message": text_message()}, "r-2")
        )
        assert events, events
        _error_of(events[-1])
        assert _leaked(json.dumps(events)) == [], events

        after = await post(http, url, request("tasks/get", {"id": "no-such-task"}, "r-3"))
        assert after["error"]["code"] == -32001  # the next request is still answered
    logged = "\n".join(debug_logs.lines)
    assert "sse_starlette" in logged or "message/stream" in logged
    assert _leaked(logged) == [], [line for line in debug_logs.lines if _leaked(line)]


async def _echo_contact(ctx: AgentContext) -> str:
    return "Your advisor is reachable at dana.park@advisors-mail.example"


async def test_sse_chunks_logged_at_debug_are_scrubbed(debug_logs: _Records) -> None:
    app = create_app(_echo_contact, make_card())
    async with running_server(app) as url, httpx.AsyncClient(timeout=10.0) as http:
        body = request("message/stream", {"message": text_message()})
        events = await post_stream(http, url, body)
    assert "dana.park@advisors-mail.example" in json.dumps(events)  # the answer is the agent's
    chunk_lines = [line for line in debug_logs.lines if line.startswith("sse_starlette")]
    assert chunk_lines, debug_logs.lines[-20:]
    assert not [line for line in debug_logs.lines if "dana.park" in line]


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _mentions_port(text: str, port: int) -> bool:
    """The port as a number of its own (not a piece of a UUID or a timestamp)."""
    return re.search(rf"(?<![0-9A-Za-z.\-]){port}(?![0-9A-Za-z\-])", text) is not None


async def _answer(ctx: AgentContext) -> str:
    return "answered"


async def test_a_refused_database_tells_the_client_no_address_host_or_port(
    debug_logs: _Records,
) -> None:
    port = _closed_port()
    engine = create_async_engine(
        f"postgresql+asyncpg://llamon:S3cretDbPw@127.0.0.1:{port}/tasks", pool_pre_ping=False
    )
    store = DatabaseTaskStore(engine)
    app = create_app(_answer, make_card(), task_store=store)
    try:
        async with running_server(app) as url, httpx.AsyncClient(timeout=20.0) as http:
            calls = [
                ("message/send", {"message": text_message()}),
                ("tasks/get", {"id": "t-1"}),
                ("tasks/cancel", {"id": "t-1"}),
                ("message/send", {"message": text_message()}),  # answered like the first
            ]
            for number, (method, params) in enumerate(calls):
                reply = await post(http, url, request(method, params, number))
                text = json.dumps(reply)
                assert "error" in reply, reply
                assert reply["error"]["data"]["errorCode"] == "UPSTREAM_UNAVAILABLE", reply
                for location in ("127.0.0.1", "S3cretDbPw", "asyncpg", "/tasks"):
                    assert location not in text, (location, reply)
                assert not _mentions_port(text, port), reply
    finally:
        await engine.dispose()
    assert not [line for line in debug_logs.lines if "S3cretDbPw" in line]


async def test_an_agent_whose_database_refuses_tells_the_client_no_address_or_port(
    debug_logs: _Records,
) -> None:
    port = _closed_port()

    async def uses_postgres(ctx: AgentContext) -> str:
        await asyncpg.connect(
            host="127.0.0.1", port=port, user="llamon", password="S3cretDbPw", database="x"
        )
        return "unreachable"

    app = create_app(uses_postgres, make_card())
    async with running_server(app) as url, httpx.AsyncClient(timeout=20.0) as http:
        for number in range(2):  # the second request is answered like the first
            reply = await post(
                http, url, request("message/send", {"message": text_message()}, number)
            )
            task = reply["result"]
            assert task["status"]["state"] == "failed", reply
            data = task["status"]["message"]["parts"][1]["data"]
            assert (data["errorCode"], data["errorReason"]) == (
                "UPSTREAM_UNAVAILABLE",
                "network_error",
            ), data
            assert "Connect call failed" in data["errorMessage"], data
            text = json.dumps(reply)
            assert "127.0.0.1" not in text, reply
            assert "S3cretDbPw" not in text, reply
            assert not _mentions_port(text, port), reply
    assert not [line for line in debug_logs.lines if "S3cretDbPw" in line]


# --- the property suite's cases over a real server ---------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real ``llamon serve`` of ``raising_agent`` for the whole module's generated cases.

    It runs in a process of its own: on Python 3.11 a traceback formatted in a server
    thread parses source (``ast.parse``) while Hypothesis parses its strategies' lambdas,
    and two threads parsing at once can raise ``SystemError`` in the interpreter.
    """
    home = tmp_path_factory.mktemp("boundary-home")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llamon_agent",
            "serve",
            "--port",
            "0",
            "--store",
            "memory",
            "tests._support.raising_agent:agent",
        ],
        env={**os.environ, "LLAMON_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready: queue.Queue[str] = queue.Queue()

    def drain() -> None:  # the ready line's URL, then every line read so the pipe never fills
        assert process.stderr is not None
        for line in process.stderr:
            if line.startswith("llamon: serving"):
                ready.put(line.split(" at ", 1)[1].split(" ", 1)[0])
        ready.put("")

    threading.Thread(target=drain, daemon=True).start()
    try:
        url = ready.get(timeout=60)
        assert url, "llamon serve exited before it was ready"
        yield url.rstrip("/")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


def _answered(reply: dict[str, Any]) -> object:
    """What the server said, without the caller's own message echoed in ``history``."""
    result = reply.get("result")
    if isinstance(result, dict):
        return {key: value for key, value in result.items() if key != "history"}
    return reply


def _member_names(value: object) -> list[str]:
    """Every JSON member name in ``value``, nested ones too."""
    if isinstance(value, dict):
        return [name for key, item in value.items() for name in (str(key), *_member_names(item))]
    if isinstance(value, list):
        return [name for item in value for name in _member_names(item)]
    return []


def _data_message(case: Case) -> dict[str, Any]:
    return text_message(
        "go",
        parts=[
            {"kind": "text", "text": "go"},
            {"kind": "data", "data": {"carrier": case.carrier, "text": case.text}},
        ],
    )


@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=cases(), streaming=st.booleans())
def test_generated_secrets_never_reach_a_client_of_a_real_server(
    served: str, case: Case, streaming: bool
) -> None:
    method = "message/stream" if streaming else "message/send"
    body = request(method, {"message": _data_message(case)})
    seen: list[object] = []
    with httpx.Client(timeout=20.0) as http:
        if streaming:
            with http.stream("POST", served + "/", json=body) as response:
                replies = [
                    json.loads(line.removeprefix("data:"))
                    for line in response.iter_lines()
                    if line.startswith("data:")
                ]
            last = replies[-1]
            seen.extend(_answered(reply) for reply in replies)
        else:
            last = http.post(served + "/", json=body).json()
            seen.append(_answered(last))
        assert isinstance(last, dict)
        result = last.get("result")
        task_id = result.get("taskId") or result.get("id") if isinstance(result, dict) else None
        if task_id:  # the stored task, as tasks/get answers it
            stored = http.post(served + "/", json=request("tasks/get", {"id": task_id})).json()
            assert stored["result"]["status"]["state"] == "failed", stored
            seen.append(_answered(stored))
        else:
            assert "error" in last, last
    output = json.dumps(seen, ensure_ascii=False)
    # member names ("metadata", "contextId" ...) are the protocol's, not the secret's
    context = " ".join([case.sample.text.replace(case.sample.value, ""), *_member_names(seen)])
    if reveals(case.sample.value, output, context=context):
        raise AssertionError(f"{case!r} reached the client: {output}")
