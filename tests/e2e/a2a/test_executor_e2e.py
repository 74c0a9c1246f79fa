"""Each answer of the executor, over real HTTP on 127.0.0.1 with a2a-sdk's client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.client.errors import A2AClientJSONRPCError
from a2a.types import (
    DataPart,
    TaskIdParams,
    TaskQueryParams,
    TaskState,
)

from llamon_agent.a2a.agent import AgentContext, AgentOutput, Completed
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import Stores
from llamon_agent.core.errors import ErrorCode, raise_application_error
from llamon_agent.core.hitl import HITLInterrupt
from llamon_agent.exceptions import (
    ComponentInvokeError,
    GuardrailBlockedError,
    MissingAPIKeyError,
    MissingFieldError,
    RegistryNotFoundError,
)
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    texts,
    user_message,
)
from tests._support.parts import artifacts_of, data_of, message_of, text_of

SECRET = "sk-live-ABCDEFGHIJKLMNOP1234567890"


async def scripted(ctx: AgentContext) -> AgentOutput:
    if ctx.resumed:
        assert ctx.interrupt_payload == {"question": "생년월일을 알려주세요."}
        return f"born on {ctx.text}"
    command = ctx.text.strip()
    if command == "ok":
        return "all good"
    if command == "upstream":
        raise ComponentInvokeError("MCP down")
    if command == "timeout":
        raise TimeoutError("slow")
    if command == "invalid":
        raise MissingFieldError("query is required", field_name="query")
    if command == "auth":
        raise MissingAPIKeyError("no API key for the ledger")
    if command == "notfound":
        raise RegistryNotFoundError("no such account")
    if command == "quota":
        raise_application_error(
            ErrorCode.RATE_LIMITED,
            "classifier_quota_exceeded",
            message="quota",
            retriable=True,
            retryAfterMs=60_000,
        )
    if command == "partial":
        await ctx.add_artifact({"rows": [1, 2]}, "fetch_subject")
        raise ComponentInvokeError("rag down")
    if command == "secret":
        raise RuntimeError(f"db password={SECRET} user kim@example.com")
    if command == "guardrail":
        await ctx.add_artifact("draft answer", "draft")
        raise GuardrailBlockedError("blocked", violation_category="self-harm")
    if command == "empty-result":
        return Completed({"results": [], "reason": "no_results"}, text="관련 정보 없음")
    if command == "ask":
        return HITLInterrupt(payload={"question": "생년월일을 알려주세요."})
    return f"echo {command}"


@pytest.fixture
async def server(stores: Stores) -> AsyncIterator[str]:
    """The scripted agent served on each store kind (memory, SQLite, PostgreSQL)."""
    app = create_app(
        scripted,
        make_card(),
        task_store=stores.task_store,
        push_config_store=stores.push_config_store,
    )
    async with running_server(app) as url:
        yield url


async def test_success(server: str) -> None:
    async with a2a_client(server) as client:
        task = await send(client, user_message("ok"))
    assert task.status.state == TaskState.completed
    assert texts(task) == ["all good"]


@pytest.mark.reason(
    "component_invoke_error",
    "missing_field_error",
    "missing_api_key_error",
    "registry_not_found_error",
    "timeout",
)
@pytest.mark.parametrize(
    ("command", "code", "reason", "retriable"),
    [
        ("upstream", "UPSTREAM_UNAVAILABLE", "component_invoke_error", True),
        ("invalid", "INVALID_INPUT", "missing_field_error", False),
        ("auth", "AUTH_REQUIRED", "missing_api_key_error", False),
        ("notfound", "NOT_FOUND", "registry_not_found_error", False),
        ("timeout", "UPSTREAM_TIMEOUT", "timeout", True),
        ("quota", "RATE_LIMITED", "classifier_quota_exceeded", True),
        ("secret", "INTERNAL_ERROR", "runtime_error", False),
    ],
)
async def test_application_level_failure(
    server: str, command: str, code: str, reason: str, retriable: bool
) -> None:
    async with a2a_client(server) as client:
        task = await send(client, user_message(command))
    assert task.status.state == TaskState.failed
    data = error_data(task)
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (code, reason, retriable)
    parts = message_of(task.status.message).parts
    assert [text_of(p) for p in parts if not isinstance(p.root, DataPart)] == [data["errorMessage"]]


async def test_rate_limited_carries_retry_after(server: str) -> None:
    async with a2a_client(server) as client:
        task = await send(client, user_message("quota"))
    assert error_data(task)["retryAfterMs"] == 60_000


async def test_seeded_secret_in_unmapped_exception_appears_in_no_response(server: str) -> None:
    async with a2a_client(server) as client:
        task = await send(client, user_message("secret"))
        fetched = await client.get_task(TaskQueryParams(id=task.id))
    for answer in (task, fetched):
        dumped = answer.model_dump_json()
        assert SECRET not in dumped
        assert "kim@example.com" not in dumped
    assert error_data(task)["incidentId"] in error_data(task)["errorMessage"]


async def test_artifacts_kept_before_failed_and_on_tasks_get(server: str) -> None:
    async with a2a_client(server) as client:
        task = await send(client, user_message("partial"))
        fetched = await client.get_task(TaskQueryParams(id=task.id))
    for answer in (task, fetched):
        assert answer.status.state == TaskState.failed
        assert [a.name for a in answer.artifacts or []] == ["fetch_subject"]
        assert data_of(artifacts_of(answer.artifacts)[0].parts[0]) == {"rows": [1, 2]}
        assert error_data(answer)["errorCode"] == "UPSTREAM_UNAVAILABLE"


async def test_guardrail_blocks_and_withholds_artifacts(server: str) -> None:
    async with a2a_client(server) as client:
        task = await send(client, user_message("guardrail"))
        fetched = await client.get_task(TaskQueryParams(id=task.id))
    for answer in (task, fetched):
        assert answer.status.state == TaskState.failed
        assert not answer.artifacts
        data = error_data(answer)
        assert data["errorCode"] == "GUARDRAIL_BLOCKED"
        assert data["guardrail"] == {"violationCategory": "self-harm"}


async def test_completed_with_data_is_not_an_error(server: str) -> None:
    async with a2a_client(server) as client:
        task = await send(client, user_message("empty-result"))
    assert task.status.state == TaskState.completed
    result = artifacts_of(task.artifacts)[0]
    assert result.name == "result"
    datas = [p.root.data for p in result.parts if isinstance(p.root, DataPart)]
    assert datas == [{"results": [], "reason": "no_results"}]


async def test_input_required_and_resume(server: str) -> None:
    async with a2a_client(server) as client:
        first = await send(client, user_message("ask"))
        assert first.status.state == TaskState.input_required
        assert error_data(first) == {"question": "생년월일을 알려주세요."}
        second = await send(
            client, user_message("1990-01-01", task_id=first.id, context_id=first.context_id)
        )
    assert second.id == first.id
    assert second.status.state == TaskState.completed
    assert texts(second) == ["born on 1990-01-01"]


async def _jsonrpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient() as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        response = await http.post(url, json=body)
    reply: dict[str, Any] = response.json()
    return reply


async def test_protocol_level_error_for_a_message_without_usable_parts(server: str) -> None:
    async with a2a_client(server) as client:
        with pytest.raises(A2AClientJSONRPCError) as caught:
            await send(client, user_message("   "))
    error = caught.value.error
    assert error.code == -32602
    assert error.data is not None
    assert error.data["errorCode"] == "INVALID_INPUT"
    assert error.data["errorReason"] == "no_usable_part"


async def test_protocol_error_for_unsupported_input_mode(server: str) -> None:
    from a2a.types import FilePart, FileWithUri, Part

    png = FileWithUri(uri="https://x.test/a.png", mime_type="image/png")
    file_part = Part(root=FilePart(file=png))
    async with a2a_client(server) as client:
        with pytest.raises(A2AClientJSONRPCError) as caught:
            await send(client, user_message(parts=[file_part]))
    assert caught.value.error.code == -32005
    assert caught.value.error.data is not None
    assert caught.value.error.data["errorReason"] == "unsupported_input_mode"


async def test_sdk_errors_carry_protocol_data(server: str) -> None:
    body = await _jsonrpc(server + "/", "tasks/get", {"id": "no-such-task"})
    assert body["error"]["code"] == -32001
    assert body["error"]["data"]["errorCode"] == "NOT_FOUND"
    body = await _jsonrpc(server + "/", "no/such/method", {})
    assert body["error"]["code"] == -32601
    assert body["error"]["data"]["errorCode"] == "INVALID_INPUT"


async def test_cancelling_a_finished_task_is_not_cancelable(server: str) -> None:
    async with a2a_client(server) as client:
        task = await send(client, user_message("ok"))
    body = await _jsonrpc(server + "/", "tasks/cancel", {"id": task.id})
    assert body["error"]["code"] == -32002
    assert body["error"]["data"]["errorCode"] == "INVALID_INPUT"


async def test_cancelling_an_input_required_task(server: str) -> None:
    async with a2a_client(server) as client:
        paused = await send(client, user_message("ask"))
        assert paused.status.state == TaskState.input_required
        canceled = await client.cancel_task(TaskIdParams(id=paused.id))
        fetched = await client.get_task(TaskQueryParams(id=paused.id))
    assert canceled.status.state == TaskState.canceled
    assert fetched.status.state == TaskState.canceled


async def test_protocol_error_for_a_payload_over_the_limit() -> None:
    from llamon_agent.a2a.protocol import RequestLimits

    app = create_app(scripted, make_card(), limits=RequestLimits(max_payload_bytes=100))
    async with running_server(app) as url, a2a_client(url) as client:
        assert (await send(client, user_message("ok"))).status.state == TaskState.completed
        with pytest.raises(A2AClientJSONRPCError) as caught:
            await send(client, user_message("x" * 101))
    error = caught.value.error
    assert error.code == -32602
    assert error.data is not None
    assert (error.data["errorCode"], error.data["errorReason"]) == (
        "INVALID_INPUT",
        "payload_too_large",
    )
    assert "at most 100 bytes" in error.data["errorMessage"]
