"""A scripted provider server on 127.0.0.1 and helpers that speak each provider's wire."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from llamon_agent.loop.providers import AnthropicMessagesModel, OpenAIChatModel
from tests._support.a2a_server import running_server

SECRET = "sk-test-Kq7Zr2Vw9Lm4Xp8Nb3Ty6Hc1Jd5Fs0Ga"
"""The API key every test model uses; it must never show up in exception text or logs."""


@dataclass(frozen=True)
class Reply:
    """One scripted answer: a JSON body with a status and headers, or a hang."""

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    hang: bool = False


@dataclass(frozen=True)
class Seen:
    """One request the fake server received."""

    path: str
    headers: dict[str, str]
    body: Any


class FakeProvider:
    """Replays ``Reply``s in order (the last one forever) and records every request."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Seen] = []
        self.release = asyncio.Event()  # hung handlers end when set (the tests never do)
        self.request_seen = asyncio.Event()
        self.url = ""
        routes = [
            Route("/v1/chat/completions", self._handle, methods=["POST"]),
            Route("/v1/messages", self._handle, methods=["POST"]),
        ]
        self.app = Starlette(routes=routes)

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def _handle(self, request: Request) -> Response:
        raw = await request.body()
        self.requests.append(
            Seen(
                request.url.path,
                {k.lower(): v for k, v in request.headers.items()},
                json.loads(raw),
            )
        )
        self.request_seen.set()
        reply = self.replies.popleft() if len(self.replies) > 1 else self.replies[0]
        if reply.hang:
            await _until_released_or_disconnected(request, self.release)
            return Response(status_code=504)
        return JSONResponse(reply.body, status_code=reply.status, headers=dict(reply.headers))


async def _until_released_or_disconnected(request: Request, release: asyncio.Event) -> None:
    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    waiters = {asyncio.ensure_future(release.wait()), asyncio.ensure_future(disconnected())}
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)


@asynccontextmanager
async def fake_provider() -> AsyncIterator[FakeProvider]:
    provider = FakeProvider()
    async with running_server(provider.app) as url:
        provider.url = url
        try:
            yield provider
        finally:
            provider.release.set()


class FakeSleep:
    """Stands in for ``asyncio.sleep`` between retries: records the waits, returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


class OpenAIWire:
    name = "openai"
    path = "/v1/chat/completions"
    sdk_rate_limit = "openai.RateLimitError"

    def make(self, url: str, **kwargs: Any) -> OpenAIChatModel:
        kwargs.setdefault("api_key", SECRET)
        return OpenAIChatModel("gpt-test", base_url=f"{url}/v1", **kwargs)

    def answer(self, text: str | None = None, calls: Iterable[tuple[str, str, str]] = ()) -> Reply:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        wire_calls = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in calls
        ]
        if wire_calls:
            message["tool_calls"] = wire_calls
        return Reply(
            body={
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": "gpt-test",
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if wire_calls else "stop",
                    }
                ],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
            }
        )

    def error(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> Reply:
        body = {"error": {"message": message, "type": "test_error", "code": f"code_{status}"}}
        return Reply(status, body, dict(headers or {}))

    def key_header(self, seen: Seen) -> str:
        return seen.headers["authorization"].removeprefix("Bearer ")


class AnthropicWire:
    name = "anthropic"
    path = "/v1/messages"
    sdk_rate_limit = "anthropic.RateLimitError"

    def make(self, url: str, **kwargs: Any) -> AnthropicMessagesModel:
        kwargs.setdefault("api_key", SECRET)
        return AnthropicMessagesModel("claude-test", base_url=url, **kwargs)

    def answer(self, text: str | None = None, calls: Iterable[tuple[str, str, Any]] = ()) -> Reply:
        content: list[dict[str, Any]] = []
        if text is not None:
            content.append({"type": "text", "text": text})
        for cid, name, arguments in calls:
            payload = json.loads(arguments) if isinstance(arguments, str) else arguments
            content.append({"type": "tool_use", "id": cid, "name": name, "input": payload})
        return Reply(
            body={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": content,
                "stop_reason": "tool_use" if calls else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 11, "output_tokens": 7},
            }
        )

    def error(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> Reply:
        body = {"type": "error", "error": {"type": "test_error", "message": message}}
        return Reply(status, body, dict(headers or {}))

    def key_header(self, seen: Seen) -> str:
        # anthropic 2.x sends the API key as a bearer token (1.x used x-api-key).
        return seen.headers.get("x-api-key") or seen.headers["authorization"].removeprefix(
            "Bearer "
        )


Wire = OpenAIWire | AnthropicWire
