"""Library log lines are scrubbed too: a bad request with a secret in it logs none of it."""

from __future__ import annotations

import logging

import httpx
import pytest

from llamon_agent.a2a.server import create_app
from llamon_agent.core.logs import install_log_scrubbing, log_scrubbing_installed

from ..a2a.server_utils import make_card, running_server

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
