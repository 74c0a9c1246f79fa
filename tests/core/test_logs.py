"""Library log lines are scrubbed too: a bad request with a secret in it logs none of it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from llamon_agent.a2a.server import create_app
from llamon_agent.core.logs import install_log_scrubbing, log_scrubbing_installed
from tests._support.a2a_server import make_card, running_server

SECRET = "sk-proj-9fA7bC3dE5fG7hJ9kL1mN3pQ5rS7tU9v"


def test_install_is_idempotent() -> None:
    install_log_scrubbing()
    assert install_log_scrubbing() is True
    assert log_scrubbing_installed()


def test_a_library_record_is_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    install_log_scrubbing()
    with caplog.at_level(logging.DEBUG, logger="a2a.test"):
        try:
            raise ValueError(f"api_key={SECRET}")
        except ValueError:
            logging.getLogger("a2a.test").exception("request body: %s", {"token": SECRET})
    assert SECRET not in caplog.text
    assert "ValueError" in caplog.text


def _connect(app: object) -> None:
    raise ConnectionRefusedError("connect to db-primary.prod.internal:5432 (10.2.3.4) refused")


def test_a_library_line_and_its_traceback_name_no_backend(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A library's line naming a backend, with a traceback whose exception names it too:
    the line and the exception lose the address, host name and IP; the traceback's source
    lines read as written (``_connect(app)``)."""
    install_log_scrubbing()
    with caplog.at_level(logging.DEBUG, logger="asyncpg.test"):
        try:
            _connect(object())
        except ConnectionRefusedError:
            logging.getLogger("asyncpg.test").exception(
                "pool to %s failed", "postgresql://app@db-primary.prod.internal:5432/orders"
            )
    (record,) = caplog.records
    assert record.getMessage() == "pool to [REDACTED:url] failed"
    assert record.exc_text is not None
    assert 'raise ConnectionRefusedError("connect to' in record.exc_text  # the source line
    assert "ConnectionRefusedError: connect to [REDACTED:host] ([REDACTED:host]) refused" in (
        record.exc_text
    )
    for location in ("db-primary", "prod.internal", "5432", "10.2.3.4"):
        assert location not in caplog.text


async def test_a_bad_request_with_a_secret_logs_no_secret(caplog: pytest.LogCaptureFixture) -> None:
    async def agent(ctx: object) -> str:
        return "x"

    app = create_app(agent, make_card())
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "role": "user",
                "parts": [{"kind": "text", "text": 5}],
                "messageId": "m",
                "password": SECRET,
            }
        },
    }
    with caplog.at_level(logging.DEBUG):
        async with running_server(app) as url, httpx.AsyncClient() as http:
            response = await http.post(
                url + "/", json=body, headers={"Authorization": f"Bearer {SECRET}"}
            )
    assert response.json()["error"]["code"] == -32602
    assert SECRET not in response.text
    assert SECRET not in caplog.text


class _Keep(logging.Handler):
    """Keeps the records it is given."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def _kept(name: str) -> Iterator[list[logging.LogRecord]]:
    """The records of logger ``name`` at INFO and above, scrubbing installed (uvicorn's
    logging config may stop its loggers' propagation, so caplog would not see them)."""
    install_log_scrubbing()
    logger = logging.getLogger(name)
    handler = _Keep()
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_a_scrubbed_record_keeps_its_arguments_shape() -> None:
    """Other libraries' formatters read ``record.args`` (uvicorn's unpacks five of them)."""
    with _kept("uvicorn.access") as records:
        logging.getLogger("uvicorn.access").info(
            '%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET", f"/x?api_key={SECRET}", "1.1", 200
        )
    (record,) = records
    assert isinstance(record.args, tuple)
    assert len(record.args) == 5
    assert record.args[4] == 200
    assert record.getMessage() == (
        '[REDACTED:host] - "GET /x?api_key=[REDACTED:api_key] HTTP/1.1" 200'
    )


def test_uvicorns_listen_line_keeps_the_servers_own_address() -> None:
    """The address the server listens on (the only place a port-0 server shows its port)
    is kept; the same shapes in any other uvicorn line are removed."""
    server = logging.getLogger("uvicorn.error")
    with _kept("uvicorn.error") as records:
        server.info(
            "Uvicorn running on %s://%s:%d (Press CTRL+C to quit)", "http", "127.0.0.1", 8123
        )
        server.info("Invalid HTTP request from %s:%d", "10.9.8.7", 5555)
    listen, other = (record.getMessage() for record in records)
    assert listen == "Uvicorn running on http://127.0.0.1:8123 (Press CTRL+C to quit)"
    assert other == "Invalid HTTP request from [REDACTED:host]:5555"  # a port alone names nothing


def test_a_record_with_nothing_to_scrub_is_left_alone(caplog: pytest.LogCaptureFixture) -> None:
    install_log_scrubbing()
    marker = object()
    with caplog.at_level(logging.INFO, logger="a2a.test"):
        logging.getLogger("a2a.test").info("%s handled %d", marker, 3)
    (record,) = caplog.records
    assert record.args == (marker, 3)


APP_MODULE = """
import logging

from llamon_agent.a2a import AgentContext, build_agent_card, create_app, skill


async def agent(ctx: AgentContext) -> str:
    logging.getLogger("llamon_agent.example").warning("calling the bank with token=%s", SECRET)
    return f"You said {ctx.text}"


SECRET = "{secret}"
card = build_agent_card(
    name="echo",
    description="Echoes the caller's text back, for trying out llamon-agent.",
    url="http://127.0.0.1:8000/",
    version="1.0.0",
    skills=[skill("echo", "Echo", "Returns the caller's text unchanged.", tags=["demo"])],
)
app = create_app(agent, card)
"""


async def test_uvicorn_access_log_works_with_scrubbing(tmp_path: Path) -> None:
    """``uvicorn module:app`` (access log on, uvicorn's own formatters): every request gets
    its access line, never a "--- Logging error ---", and secrets are still scrubbed."""
    (tmp_path / "echo_app.py").write_text(APP_MODULE.replace("{secret}", SECRET))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "uvicorn", "echo_app:app", "--host", "127.0.0.1", "--port", "0"),
        cwd=tmp_path,
        env={**os.environ, "LLAMON_HOME": str(tmp_path)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    lines: list[str] = []
    url = ""
    async with asyncio.timeout(30):
        while not url:
            line = (await process.stdout.readline()).decode()
            assert line, "".join(lines)
            lines.append(line)
            if "Uvicorn running on " in line:
                url = line.split("Uvicorn running on ", 1)[1].split(" ", 1)[0]
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            card = await http.get(f"{url}/.well-known/agent-card.json?api_key={SECRET}")
            assert card.status_code == 200
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "message/send",
                "params": {
                    "message": {
                        "role": "user",
                        "parts": [{"kind": "text", "text": "hi"}],
                        "messageId": "m-1",
                    }
                },
            }
            answer = (await http.post(f"{url}/", json=body)).json()
            assert answer["result"]["status"]["state"] == "completed"
    finally:
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(20):
            rest, _ = await process.communicate()
    output = "".join(lines) + rest.decode()
    assert "Logging error" not in output
    assert "Traceback" not in output
    assert '"GET /.well-known/agent-card.json?api_key=[REDACTED:api_key] HTTP/1.1" 200' in output
    assert '"POST / HTTP/1.1" 200' in output
    assert "calling the bank with token=[REDACTED:api_key]" in output
    assert SECRET not in output
