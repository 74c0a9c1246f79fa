"""Caller authentication over real HTTP on 127.0.0.1: what the card declares is enforced.

Bad credentials are sent with raw httpx (a2a-sdk's client turns a 401 into an exception
without the body); good ones with a2a-sdk's client over an httpx client carrying the header.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientHTTPError
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    AgentCard,
    OAuth2SecurityScheme,
    OAuthFlows,
    SecurityScheme,
    TaskQueryParams,
    TaskState,
)
from starlette.applications import Starlette

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.auth import UNAUTHENTICATED_JSONRPC_CODE, AuthConfig, AuthMiddleware
from llamon_agent.a2a.card import AuthSpec, auth_spec_from_card, build_agent_card, skill
from llamon_agent.a2a.server import create_app
from llamon_agent.core.error_data import ProtocolErrorData
from tests._support.a2a_server import make_card, running_server, send, texts, user_message

API_KEY = "llamon-test-key-7f3a9c21d4e8b6a0"
BEARER_TOKEN = "llamon-test-token-0b5d2e8f1a7c4936"
WRONG = "wrong-credential-e5c1a8d7f2b94306"
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")


def auth_card(auth: AuthSpec | None) -> AgentCard:
    return build_agent_card(
        name="auth-test-agent",
        description="Echoes test questions back for the llamon-agent authentication suite.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        skills=[skill("echo", "Echo", "Echoes one test question.", tags=["test"])],
        auth=auth,
    )


@dataclass
class Served:
    url: str
    app: Starlette
    store: InMemoryTaskStore
    calls: list[str] = field(default_factory=list)


@asynccontextmanager
async def serve(spec: AuthSpec, *secrets: str) -> AsyncIterator[Served]:
    calls: list[str] = []

    async def echo(ctx: AgentContext) -> str:
        calls.append(ctx.text)
        return f"echo {ctx.text}"

    card = auth_card(spec)
    store = InMemoryTaskStore()
    app = create_app(echo, card, auth=AuthConfig.from_card(card, *secrets), task_store=store)
    async with running_server(app) as url:
        yield Served(url, app, store, calls)


@pytest.fixture
async def api_key_server() -> AsyncIterator[Served]:
    async with serve(AuthSpec.api_key(), API_KEY) as served:
        yield served


@pytest.fixture
async def bearer_server() -> AsyncIterator[Served]:
    async with serve(AuthSpec.bearer(bearer_format="opaque"), BEARER_TOKEN) as served:
        yield served


@asynccontextmanager
async def authed_client(base_url: str, headers: Mapping[str, str]) -> AsyncIterator[Client]:
    """a2a-sdk's client whose every request carries ``headers``."""
    async with httpx.AsyncClient(timeout=10.0, headers=dict(headers)) as http:
        card_json = (await http.get(f"{base_url}/.well-known/agent-card.json")).json()
        card = AgentCard.model_validate(card_json).model_copy(update={"url": base_url + "/"})
        yield ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)


def send_body(text: str = "hello") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": "req-1",
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": str(uuid.uuid4()),
                "parts": [{"kind": "text", "text": text}],
            }
        },
    }


async def post(base_url: str, headers: Mapping[str, str] | None = None) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10.0) as http:
        return await http.post(base_url + "/", json=send_body(), headers=dict(headers or {}))


def assert_refused(response: httpx.Response, reason: str) -> ProtocolErrorData:
    assert response.status_code == 401
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    error = body["error"]
    assert error["code"] == UNAUTHENTICATED_JSONRPC_CODE == -32040
    data = ProtocolErrorData.model_validate(error["data"])
    assert data.error_code == "AUTH_REQUIRED"
    assert data.error_reason == reason
    assert data.retriable is False
    assert error["message"] == data.error_message
    assert data.to_wire() == error["data"]
    return data


def assert_no_task(served: Served) -> None:
    assert served.store.tasks == {}
    assert served.calls == []


# --------------------------------------------------------------------------- API key


async def test_api_key_missing_is_refused_before_a_task_exists(api_key_server: Served) -> None:
    assert api_key_server.app.state.llamon_task_store is api_key_server.store
    response = await post(api_key_server.url)
    data = assert_refused(response, "credentials_required")
    assert "X-API-Key" in data.error_message
    assert "www-authenticate" not in response.headers
    assert_no_task(api_key_server)


@pytest.mark.parametrize("value", [WRONG, API_KEY + "x", API_KEY[:-1], f"Bearer {API_KEY}"])
async def test_api_key_wrong_is_invalid_credentials(api_key_server: Served, value: str) -> None:
    response = await post(api_key_server.url, {"X-API-Key": value})
    assert_refused(response, "invalid_credentials")
    assert value not in response.text
    assert API_KEY not in response.text
    assert_no_task(api_key_server)


async def test_api_key_in_another_header_does_not_count(api_key_server: Served) -> None:
    response = await post(api_key_server.url, {"Authorization": f"Bearer {API_KEY}"})
    assert_refused(response, "credentials_required")
    assert_no_task(api_key_server)


async def test_api_key_right_completes_the_task(api_key_server: Served) -> None:
    async with authed_client(api_key_server.url, {"X-API-Key": API_KEY}) as client:
        task = await send(client, user_message("hi"))
        fetched = await client.get_task(TaskQueryParams(id=task.id))
    assert task.status.state == TaskState.completed
    assert texts(task) == ["echo hi"]
    assert fetched.status.state == TaskState.completed
    assert api_key_server.calls == ["hi"]
    assert list(api_key_server.store.tasks) == [task.id]


async def test_a2a_client_without_key_gets_http_401(api_key_server: Served) -> None:
    async with authed_client(api_key_server.url, {}) as client:
        with pytest.raises(A2AClientHTTPError) as caught:
            await send(client, user_message("hi"))
    assert caught.value.status_code == 401
    assert_no_task(api_key_server)


async def test_authenticated_extended_card_is_not_public(api_key_server: Served) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        response = await http.get(api_key_server.url + "/agent/authenticatedExtendedCard")
    assert_refused(response, "credentials_required")


# --------------------------------------------------------------------------- bearer


async def test_bearer_missing_is_refused_with_www_authenticate(bearer_server: Served) -> None:
    response = await post(bearer_server.url)
    data = assert_refused(response, "credentials_required")
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert "Authorization" in data.error_message
    assert_no_task(bearer_server)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (f"Bearer {WRONG}", "invalid_credentials"),
        (f"bearer {BEARER_TOKEN}x", "invalid_credentials"),
        (f"Basic {BEARER_TOKEN}", "credentials_required"),
        (BEARER_TOKEN, "credentials_required"),
        ("Bearer", "credentials_required"),
    ],
)
async def test_bearer_wrong_is_refused(bearer_server: Served, value: str, reason: str) -> None:
    response = await post(bearer_server.url, {"Authorization": value})
    assert_refused(response, reason)
    expected = 'Bearer error="invalid_token"' if reason == "invalid_credentials" else "Bearer"
    assert response.headers["WWW-Authenticate"] == expected
    assert WRONG not in response.text
    assert BEARER_TOKEN not in response.text
    assert_no_task(bearer_server)


async def test_bearer_right_completes_the_task(bearer_server: Served) -> None:
    headers = {"Authorization": f"Bearer {BEARER_TOKEN}"}
    async with authed_client(bearer_server.url, headers) as client:
        task = await send(client, user_message("hi"))
    assert task.status.state == TaskState.completed
    assert texts(task) == ["echo hi"]
    assert bearer_server.calls == ["hi"]


async def test_bearer_scheme_word_is_case_insensitive(bearer_server: Served) -> None:
    response = await post(bearer_server.url, {"Authorization": f"bearer {BEARER_TOKEN}"})
    assert response.status_code == 200
    assert response.json()["result"]["status"]["state"] == "completed"


# --------------------------------------------------------------------------- public card


@pytest.mark.parametrize("path", CARD_PATHS)
@pytest.mark.parametrize("presented", [None, WRONG])
async def test_card_paths_are_public_and_declare_the_api_key(
    api_key_server: Served, path: str, presented: str | None
) -> None:
    headers = {} if presented is None else {"X-API-Key": presented}
    async with httpx.AsyncClient(timeout=10.0) as http:
        response = await http.get(api_key_server.url + path, headers=headers)
    assert response.status_code == 200
    card = response.json()
    assert card["securitySchemes"] == {
        "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}
    }
    assert card["security"] == [{"apiKey": []}]
    assert AuthConfig.from_card(card, API_KEY) == AuthConfig.api_key(API_KEY)


@pytest.mark.parametrize("path", CARD_PATHS)
async def test_card_paths_are_public_and_declare_the_bearer(
    bearer_server: Served, path: str
) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        response = await http.get(bearer_server.url + path)
    assert response.status_code == 200
    card = response.json()
    assert card["securitySchemes"] == {
        "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "opaque"}
    }
    assert card["security"] == [{"bearer": []}]
    assert AuthConfig.from_card(card, BEARER_TOKEN) == AuthConfig.bearer(BEARER_TOKEN)


# --------------------------------------------------------------------------- secrecy


async def test_no_credential_in_logs_or_responses(
    api_key_server: Served, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    refused = await post(api_key_server.url, {"X-API-Key": WRONG})
    async with authed_client(api_key_server.url, {"X-API-Key": API_KEY}) as client:
        task = await send(client, user_message("hi"))
    assert_refused(refused, "invalid_credentials")
    assert task.status.state == TaskState.completed
    answers = [refused.text, str(refused.headers), task.model_dump_json()]
    logged = [caplog.text, *(str(record.args) for record in caplog.records)]
    for secret in (WRONG, API_KEY):
        for text in answers + logged:
            assert secret not in text


def test_repr_hides_the_secrets() -> None:
    config = AuthConfig.api_key(API_KEY, WRONG)
    assert API_KEY not in repr(config)
    assert WRONG not in str(config)


# --------------------------------------------------------------------------- from_card


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (AuthSpec.api_key(), AuthConfig.api_key("k1", "k2")),
        (AuthSpec.api_key("X-Agent-Key"), AuthConfig.api_key("k1", "k2", header="X-Agent-Key")),
        (AuthSpec.bearer(), AuthConfig.bearer("k1", "k2")),
        (AuthSpec.bearer(bearer_format="JWT", scheme_name="jwt"), AuthConfig.bearer("k1", "k2")),
    ],
)
def test_from_card_round_trip(spec: AuthSpec, expected: AuthConfig) -> None:
    card = auth_card(spec)
    for source in (card, card.model_dump(mode="json", by_alias=True, exclude_none=True)):
        config = AuthConfig.from_card(source, "k1", "k2")
        assert config == expected
        assert config is not None
        assert (config.scheme, config.header) == (spec.kind, spec.header)
        assert auth_spec_from_card(source) == spec


def test_from_card_without_auth_is_none() -> None:
    assert AuthConfig.from_card(auth_card(None)) is None


def test_from_card_without_auth_ignores_secrets_loudly(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    assert AuthConfig.from_card(auth_card(None), API_KEY) is None
    assert "declares no auth" in caplog.text
    assert API_KEY not in caplog.text


@pytest.mark.parametrize("secrets", [(), ("",), ("  ", "\t")])
@pytest.mark.parametrize("spec", [AuthSpec.api_key(), AuthSpec.bearer()])
def test_from_card_with_auth_but_no_secret_raises(spec: AuthSpec, secrets: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="no secret was given"):
        AuthConfig.from_card(auth_card(spec), *secrets)


def test_from_card_with_auth_it_cannot_enforce_raises() -> None:
    oauth = SecurityScheme(root=OAuth2SecurityScheme(flows=OAuthFlows()))
    card = auth_card(None).model_copy(
        update={"security_schemes": {"oauth": oauth}, "security": [{"oauth": ["read"]}]}
    )
    with pytest.raises(ValueError, match="enforce it yourself"):
        AuthConfig.from_card(card, API_KEY)


def test_secrets_are_stripped_and_validated() -> None:
    assert AuthConfig.api_key(f" {API_KEY}\n").accepts(API_KEY)
    with pytest.raises(TypeError, match="not one string"):
        AuthConfig("api_key", API_KEY)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        AuthConfig.bearer(" ")
    with pytest.raises(ValueError, match="Authorization"):
        AuthConfig("bearer", frozenset({"t"}), "X-API-Key")
    with pytest.raises(ValueError, match="header name"):
        AuthConfig.api_key("k", header="X API Key")
    assert AuthConfig("bearer", frozenset({"t"})).header == "Authorization"
    assert AuthConfig("api_key", frozenset({"t"})).header == "X-API-Key"


# --------------------------------------------------------------------------- websocket


async def test_websocket_without_credentials_is_closed() -> None:
    reached: list[str] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def capture(message: Any) -> None:
        sent.append(message)

    middleware = AuthMiddleware(inner, AuthConfig.api_key(API_KEY))
    scope = {"type": "websocket", "path": "/ws", "headers": [(b"x-api-key", WRONG.encode())]}
    await middleware(scope, receive, capture)
    assert sent == [{"type": "websocket.close", "code": 1008, "reason": ""}]
    assert reached == []
    authed = {**scope, "headers": [(b"x-api-key", API_KEY.encode())]}
    await middleware(authed, receive, capture)
    await middleware({"type": "lifespan"}, receive, capture)
    assert reached == ["websocket", "lifespan"]


def test_create_app_refuses_a_card_that_asks_for_auth_without_auth() -> None:
    from llamon_agent.a2a.card import AuthSpec, build_agent_card, skill

    card = build_agent_card(
        name="guarded",
        description="A guarded agent used to check that auth and its card always agree.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        skills=[skill("s", "S", "Does one thing.", tags=["t"])],
        auth=AuthSpec.api_key("X-Team-Key"),
    )

    async def agent(ctx: object) -> str:
        return "x"

    with pytest.raises(ValueError, match="requires api_key auth"):
        create_app(agent, card)
    with pytest.raises(ValueError, match="card declares api_key in 'X-Team-Key'"):
        create_app(agent, card, auth=AuthConfig.api_key("k"))
    create_app(agent, card, auth=AuthConfig.from_card(card, "k"))
    with pytest.raises(ValueError, match="declares no security scheme"):
        create_app(agent, make_card(), auth=AuthConfig.api_key("k"))
