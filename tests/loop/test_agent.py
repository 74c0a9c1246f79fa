"""LoopAgent in process: what invoke returns, raises and keeps."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from a2a.types import Message, Part, Role, TextPart

from llamon_agent.a2a.agent import AgentContext, as_agent
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.exceptions import (
    ComponentInvokeError,
    GuardrailBlockedError,
    LlamonApplicationError,
    LlamonError,
)
from llamon_agent.loop import (
    LoopAgent,
    ScriptedModel,
    SystemMessage,
    ToolRegistry,
    UserMessage,
    tool_call,
)
from tests.loop.conftest import FlakyRemote


class Recorder:
    """An AgentContext's side: the artifacts an agent added."""

    def __init__(self) -> None:
        self.artifacts: list[tuple[Any, str]] = []

    def context(self, text: str) -> AgentContext:
        async def emit(chunk: Any) -> None:
            raise AssertionError("LoopAgent does not stream")

        async def add_artifact(value: Any, name: str) -> None:
            self.artifacts.append((value, name))

        message = Message(
            role=Role.user, parts=[Part(root=TextPart(text=text))], message_id=str(uuid.uuid4())
        )
        return AgentContext(
            task_id="t1", context_id="c1", message=message, emit=emit, add_artifact=add_artifact
        )


async def test_a_completed_run_answers_with_the_text(registry: ToolRegistry) -> None:
    model = ScriptedModel([tool_call("add_numbers", {"a": 1, "b": 2}), "It is 3."])
    agent = LoopAgent(model, registry, system_prompt="Use tools.")
    recorder = Recorder()
    assert as_agent(agent) is agent
    assert await agent.invoke(recorder.context("1 + 2?")) == "It is 3."
    assert model.calls[0].messages == (SystemMessage("Use tools."), UserMessage("1 + 2?"))
    assert recorder.artifacts == []


async def test_max_rounds_exceeded_keeps_the_tool_results_then_raises(
    registry: ToolRegistry,
) -> None:
    model = ScriptedModel([tool_call("lookup", {"key": "a"}, id="c1"), tool_call("nope", id="c2")])
    agent = LoopAgent(model, registry.view("lookup"), max_rounds=2)
    recorder = Recorder()
    with pytest.raises(LlamonApplicationError) as caught:
        await agent.invoke(recorder.context("go"))

    error = caught.value
    assert (error.code, error.reason, error.retriable) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "max_rounds_exceeded",
        True,
    )
    assert str(error) == "No final answer after 2 rounds (2 tool calls, 1 failed)."
    [(items, name)] = recorder.artifacts
    assert name == "tool_results"
    assert items == [
        {
            "tool_call_id": "c1",
            "tool": "lookup",
            "round": 1,
            "ok": True,
            "value": {"key": "a", "value": "A"},
        },
        {
            "tool_call_id": "c2",
            "tool": "nope",
            "round": 2,
            "ok": False,
            "error_code": "unknown_tool",
            "message": "unknown_tool: No tool named 'nope' in this run. Available tools: lookup.",
        },
    ]


@pytest.mark.reason("invalid_model_response")
async def test_invalid_model_response_is_retriable_upstream_unavailable(
    registry: ToolRegistry,
) -> None:
    recorder = Recorder()
    with pytest.raises(LlamonApplicationError) as caught:
        await LoopAgent(ScriptedModel(["  "]), registry).invoke(recorder.context("go"))
    assert (caught.value.code, caught.value.reason, caught.value.retriable) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "invalid_model_response",
        True,
    )
    assert caught.value.extras["error_source"] == "llm:scripted"
    assert recorder.artifacts == []  # no tool ran: no artifact


class ModelRateLimited(LlamonError, code=ErrorCode.RATE_LIMITED, retriable=True):
    """A provider's 429, as an adapter might raise it."""


async def test_model_error_carries_the_classification(registry: ToolRegistry) -> None:
    model = ScriptedModel([ModelRateLimited("429 from provider")])
    with pytest.raises(LlamonApplicationError) as caught:
        await LoopAgent(model, registry).invoke(Recorder().context("go"))
    error = caught.value
    assert (error.code, error.reason, error.retriable) == (
        ErrorCode.RATE_LIMITED,
        "model_rate_limited",
        True,
    )
    assert str(error) == "429 from provider"
    assert isinstance(error.__cause__, ModelRateLimited)


async def test_model_error_keeps_retry_after_and_incident() -> None:
    quota = LlamonApplicationError(
        ErrorCode.RATE_LIMITED, "quota", message="slow down", retriable=True, retryAfterMs=2000
    )
    with pytest.raises(LlamonApplicationError) as caught:
        await LoopAgent(ScriptedModel([quota]), ToolRegistry()).invoke(Recorder().context("go"))
    assert caught.value is quota  # the model's own application error, unchanged

    model = ScriptedModel([RuntimeError("token=abc123 leaked")])
    with pytest.raises(LlamonApplicationError) as crashed:
        await LoopAgent(model, ToolRegistry()).invoke(Recorder().context("go"))
    error = crashed.value
    assert error.code is ErrorCode.INTERNAL_ERROR
    assert "abc123" not in str(error)
    assert str(error) == f"Internal error (incident {error.extras['incident_id']})."
    assert classify_exception(error).code is ErrorCode.INTERNAL_ERROR


async def test_a_guardrail_raised_by_the_model_stays_a_guardrail() -> None:
    blocked = GuardrailBlockedError("blocked", violation_category="self-harm")
    with pytest.raises(GuardrailBlockedError):
        await LoopAgent(ScriptedModel([blocked]), ToolRegistry()).invoke(Recorder().context("x"))


async def test_an_escalated_tool_keeps_the_results_and_reraises(
    registry: ToolRegistry,
) -> None:
    tools = ToolRegistry([*registry, FlakyRemote()])
    model = ScriptedModel(
        [tool_call("lookup", {"key": "a"}, id="c1"), tool_call("flaky_remote", id="c2")]
    )
    recorder = Recorder()
    with pytest.raises(ComponentInvokeError, match="giving up"):
        await LoopAgent(model, tools).invoke(recorder.context("go"))
    [(items, name)] = recorder.artifacts
    assert name == "tool_results"
    assert [(item["tool_call_id"], item["ok"]) for item in items] == [("c1", True), ("c2", False)]
    assert items[1]["error_code"] == "component_invoke_error"


def test_max_rounds_is_checked_early() -> None:
    with pytest.raises(ValueError, match="max_rounds"):
        LoopAgent(ScriptedModel([]), ToolRegistry(), max_rounds=0)
