"""The tool loop's fault seams: a fault plan (``core.faults``) made active with
``fault_scope`` changes a run of real tools and a scripted model exactly as the real
failure would, and a run without a plan is untouched.

Seams: ``Tool.call`` (tool faults), the ``ToolDispatcher`` (the tool guard, for any tool
with side effects), ``complete_model`` (model faults) -- for ``run_loop``, ``LoopAgent``
and the ReAct graph.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from a2a.types import Message, Part, Role, TextPart

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import error_data_for_exception
from llamon_agent.core.events import EventBus, RunnerEvent, event_scope
from llamon_agent.core.faults import (
    DownstreamFailed,
    FaultPlan,
    ModelEmptyAnswer,
    ModelMalformedJson,
    ModelRateLimited,
    ModelServerError,
    ToolRaises,
    ToolReturnsError,
    ToolSlow,
    ToolTimeout,
    fault_scope,
)
from llamon_agent.exceptions import LlamonApplicationError
from llamon_agent.loop import (
    AssistantMessage,
    LoopAgent,
    LoopEvent,
    LoopOutcome,
    ScriptedModel,
    Tool,
    ToolMessage,
    ToolRegistry,
    run_loop,
    tool,
    tool_call,
)
from llamon_agent.loop.model_call import MALFORMED_ARGUMENTS
from llamon_agent.loop.react import build_react_graph
from llamon_agent.loop.scripted import ScriptStep
from llamon_agent.loop.tools import has_side_effects
from tests.loop.conftest import Calls


@pytest.fixture
def shop(calls: Calls) -> ToolRegistry:
    """get_book (async, read-only), order_book (sync, with side effects), count (sync)."""

    @tool
    async def get_book(isbn: str) -> dict[str, str]:
        """A book by its ISBN."""
        calls.seen.append(("get_book", {"isbn": isbn}))
        return {"isbn": isbn, "title": "Dune"}

    @tool(mutating=True)
    def order_book(isbn: str, quantity: int = 1) -> str:
        """Order copies of a book."""
        calls.seen.append(("order_book", {"isbn": isbn, "quantity": quantity}))
        return f"ordered {quantity}"

    @tool
    def count(n: int) -> int:
        """Count one up."""
        calls.seen.append(("count", {"n": n}))
        return n + 1

    return ToolRegistry([get_book, order_book, count])


def tool_messages(outcome: LoopOutcome) -> list[ToolMessage]:
    return [m for m in outcome.transcript if isinstance(m, ToolMessage)]


async def run(
    shop: ToolRegistry,
    script: list[ScriptStep],
    plan: FaultPlan | None,
    events: list[LoopEvent] | None = None,
) -> tuple[LoopOutcome, ScriptedModel]:
    model = ScriptedModel(script)
    with fault_scope(plan):
        outcome = await run_loop(
            model, shop.view(), "go", on_event=events.append if events is not None else None
        )
    return outcome, model


# --------------------------------------------------------------------------- side effects


def test_has_side_effects_reads_the_mutating_marker() -> None:
    def plain(x: int) -> int:
        return x

    class Remote:
        name, description, parameters = "remote", "A remote tool.", {"type": "object"}

        def __init__(self, mutating: object) -> None:
            self.mutating = mutating

        async def call(self, arguments: dict[str, Any]) -> Any:
            return None

    assert has_side_effects(Tool.from_function(plain)) is False
    assert has_side_effects(Tool.from_function(plain, mutating=True)) is True
    assert has_side_effects(tool(mutating=True)(plain)) is True
    assert has_side_effects(tool(plain)) is False
    assert has_side_effects(Remote(True)) is True
    assert has_side_effects(Remote(False)) is False
    assert has_side_effects(Remote("yes")) is False  # only True itself counts
    assert has_side_effects(object()) is False


# --------------------------------------------------------------------------- the tool guard


@pytest.mark.reason("side_effect_not_run")
async def test_plan_mode_does_not_run_a_tool_with_side_effects(
    shop: ToolRegistry, calls: Calls
) -> None:
    events: list[LoopEvent] = []
    script: list[ScriptStep] = [
        tool_call("get_book", {"isbn": "42"}, id="c1"),
        tool_call("order_book", {"isbn": "42", "quantity": 2}, id="c2"),
        "I would order 2 copies of Dune.",
    ]
    outcome, _ = await run(shop, script, FaultPlan(guard="plan"), events)

    assert outcome.status == "completed"
    assert outcome.answer == "I would order 2 copies of Dune."
    assert calls.count("get_book") == 1  # read-only: runs normally
    assert calls.count("order_book") == 0
    got, refused = tool_messages(outcome)
    assert (got.content, got.is_error) == ('{"isbn": "42", "title": "Dune"}', False)
    assert (refused.tool_call_id, refused.is_error) == ("c2", True)
    assert refused.content == (
        "side_effect_not_run: Tool 'order_book' has side effects and was not run (plan mode). "
        "Answer with what you would do instead."
    )
    [record] = outcome.failures
    assert (record.stage, record.reason, record.error_code, record.retryable) == (
        "tool_loop",
        "side_effect_not_run",
        ErrorCode.INVALID_INPUT,
        True,
    )
    assert (record.tool, record.step_id) == ("order_book", "c2")
    assert record.evidence == {"tool_call_id": "c2", "round": 2}
    first, second = outcome.tool_results
    assert (first.result.is_error, second.result.error_code) == (False, "side_effect_not_run")
    [failed] = [e for e in events if e.type == "step.failed"]
    assert (failed.tool, failed.step_id, failed.stage) == ("order_book", "c2", "tool_loop")
    assert failed.trace_metadata["failure_reason"] == "side_effect_not_run"


@pytest.mark.reason("cleanup_not_configured")
async def test_no_cleanup_refuses_a_tool_with_side_effects(
    shop: ToolRegistry, calls: Calls
) -> None:
    events: list[LoopEvent] = []
    script: list[ScriptStep] = [
        tool_call("order_book", {"isbn": "42"}, id="c1"),
        tool_call("count", {"n": 1}, id="c2"),
        "done",
    ]
    outcome, _ = await run(shop, script, FaultPlan(guard="no_cleanup"), events)

    assert outcome.status == "completed"
    assert calls.count("order_book") == 0
    assert calls.count("count") == 1
    refused, counted = tool_messages(outcome)
    assert refused.is_error is True
    assert refused.content == (
        "cleanup_not_configured: Tool 'order_book' has side effects and this case has no "
        "cleanup, so it was not run. Answer with what you would do instead."
    )
    assert (counted.content, counted.is_error) == ("2", False)
    [record] = outcome.failures
    assert (record.stage, record.reason, record.error_code, record.retryable) == (
        "cleanup",
        "cleanup_not_configured",
        ErrorCode.INTERNAL_ERROR,
        False,
    )
    assert (record.tool, record.step_id) == ("order_book", "c1")
    assert outcome.tool_results[0].result.error_code == "cleanup_not_configured"
    [failed] = [e for e in events if e.type == "step.failed"]
    assert (failed.tool, failed.stage) == ("order_book", "cleanup")
    assert failed.trace_metadata["failure_reason"] == "cleanup_not_configured"


async def test_the_guard_stops_any_tool_like_marked_mutating() -> None:
    ran: list[dict[str, Any]] = []

    class SendMail:
        name, description = "send_mail", "Send a mail."
        parameters: Mapping[str, Any] = {"type": "object", "properties": {}}
        mutating = True

        async def call(self, arguments: dict[str, Any]) -> Any:
            ran.append(arguments)
            return "sent"

    model = ScriptedModel([tool_call("send_mail", {}, id="c1"), "ok"])
    with fault_scope(FaultPlan(guard="plan")):
        outcome = await run_loop(model, ToolRegistry([SendMail()]), "mail")
    assert ran == []
    assert outcome.tool_results[0].result.error_code == "side_effect_not_run"


async def test_arguments_are_checked_before_the_guard(shop: ToolRegistry, calls: Calls) -> None:
    script: list[ScriptStep] = [tool_call("order_book", {"quantity": 2}, id="c1"), "ok"]
    outcome, _ = await run(shop, script, FaultPlan(guard="plan"))
    [message] = tool_messages(outcome)
    assert message.content == "invalid_arguments: field 'isbn': Field required"
    assert calls.count("order_book") == 0


@pytest.mark.parametrize(
    "plan",
    [None, FaultPlan(), FaultPlan([DownstreamFailed(kind="downstream_failed", agent="billing")])],
    ids=["no plan", "empty plan", "faults without a guard"],
)
async def test_without_a_guard_a_tool_with_side_effects_runs(
    shop: ToolRegistry, calls: Calls, plan: FaultPlan | None
) -> None:
    script: list[ScriptStep] = [tool_call("order_book", {"isbn": "42"}, id="c1"), "ordered"]
    outcome, _ = await run(shop, script, plan)
    assert outcome.status == "completed"
    assert calls.count("order_book") == 1
    assert tool_messages(outcome)[0].content == "ordered 1"


# --------------------------------------------------------------------------- tool faults


@pytest.mark.reason("timeout")
async def test_tool_timeout_fails_as_a_handler_raising_timeout_error(
    shop: ToolRegistry, calls: Calls
) -> None:
    plan = FaultPlan([ToolTimeout(kind="tool_timeout", tool="get_book")])
    script: list[ScriptStep] = [
        tool_call("get_book", {"isbn": "42"}, id="c1"),
        tool_call("get_book", {"isbn": "7"}, id="c2"),
        "the shop is slow",
    ]
    outcome, _ = await run(shop, script, plan)

    assert outcome.status == "completed"
    assert calls.count("get_book") == 0
    assert [m.content for m in tool_messages(outcome)] == [
        "tool_error: Tool 'get_book' failed (timeout): TimeoutError was raised.",
    ] * 2
    first, _second = outcome.failures
    assert (first.stage, first.reason, first.error_code, first.retryable, first.tool) == (
        "tool_loop",
        "timeout",
        ErrorCode.UPSTREAM_TIMEOUT,
        True,
        "get_book",
    )
    assert first.evidence["exception_type"] == "TimeoutError"
    assert outcome.tool_results[0].result.error_code == "tool_error"
    assert plan.fired == {"tool_timeout:get_book": 2}  # every call


@pytest.mark.reason("tool_error")
async def test_tool_raises_is_a_crash_whose_text_stays_in_the_server_log(
    shop: ToolRegistry, calls: Calls, caplog: pytest.LogCaptureFixture
) -> None:
    plan = FaultPlan([ToolRaises(kind="tool_raises", tool="get_book", message="disk 7 on fire")])
    script: list[ScriptStep] = [tool_call("get_book", {"isbn": "42"}, id="c1"), "sorry"]
    outcome, _ = await run(shop, script, plan)

    assert calls.count("get_book") == 0
    [record] = outcome.failures
    incident = record.evidence["incident_id"]
    [message] = tool_messages(outcome)
    assert message.content == f"tool_error: Tool 'get_book' failed (incident {incident})."
    assert (record.reason, record.error_code, record.tool, record.step_id) == (
        "tool_error",
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "get_book",
        "c1",
    )
    assert record.evidence["exception_type"] == "RuntimeError"
    assert "disk 7 on fire" not in json.dumps(record.to_dict())
    assert "disk 7 on fire" not in json.dumps([m.content for m in tool_messages(outcome)])
    assert f"incident {incident}" in caplog.text  # the text is in the server log only
    assert "disk 7 on fire" in caplog.text


async def test_tool_error_is_a_failure_the_model_reads(shop: ToolRegistry, calls: Calls) -> None:
    plan = FaultPlan(
        [
            ToolReturnsError(kind="tool_error", tool="get_book", message="No such ISBN; check it."),
            ToolReturnsError(kind="tool_error", tool="count"),
        ]
    )
    script: list[ScriptStep] = [
        [tool_call("get_book", {"isbn": "42"}, id="c1"), tool_call("count", {"n": 1}, id="c2")],
        "unknown book",
    ]
    outcome, _ = await run(shop, script, plan)

    assert outcome.status == "completed"
    assert calls.seen == []
    assert [(m.content, m.is_error) for m in tool_messages(outcome)] == [
        ("tool_error: No such ISBN; check it.", True),
        ("tool_error: injected tool error", True),
    ]
    first, _ = outcome.failures
    assert (first.stage, first.reason, first.tool, first.step_id) == (
        "tool_loop",
        "tool_error",
        "get_book",
        "c1",
    )


@pytest.mark.parametrize("name", ["get_book", "count"])  # an async and a sync handler
async def test_tool_slow_runs_the_handler_after_the_delay(
    shop: ToolRegistry, calls: Calls, name: str
) -> None:
    plan = FaultPlan([ToolSlow(kind="tool_slow", tool=name, delay_ms=60)])
    arguments = {"isbn": "42"} if name == "get_book" else {"n": 1}
    script: list[ScriptStep] = [tool_call(name, arguments, id="c1"), "done"]
    started = time.monotonic()
    outcome, _ = await run(shop, script, plan)
    elapsed = time.monotonic() - started

    assert elapsed >= 0.055  # asyncio may wake up to one clock tick early
    assert calls.count(name) == 1
    assert outcome.failures == ()
    [message] = tool_messages(outcome)
    assert message.content == ('{"isbn": "42", "title": "Dune"}' if name == "get_book" else "2")
    assert plan.fired == {f"tool_slow:{name}": 1}


async def test_a_tool_fault_leaves_the_other_tools_alone(shop: ToolRegistry, calls: Calls) -> None:
    plan = FaultPlan([ToolTimeout(kind="tool_timeout", tool="get_book")])
    script: list[ScriptStep] = [tool_call("count", {"n": 4}, id="c1"), "5"]
    outcome, _ = await run(shop, script, plan)
    assert tool_messages(outcome)[0].content == "5"
    assert calls.count("count") == 1
    assert plan.fired == {}


async def test_a_tool_fault_fires_after_the_arguments_are_checked(shop: ToolRegistry) -> None:
    plan = FaultPlan([ToolTimeout(kind="tool_timeout", tool="get_book")])
    script: list[ScriptStep] = [tool_call("get_book", {"isbn": 42}, id="c1"), "ok"]
    outcome, _ = await run(shop, script, plan)
    assert outcome.failures[0].reason == "invalid_arguments"
    assert plan.fired == {}


async def test_tool_faults_are_the_tools_own_seam_not_the_dispatchers() -> None:
    """A ``ToolLike`` that is not a ``Tool`` has its own seam (the MCP tools' is in the MCP
    layer); the dispatcher does not fake one for it."""

    class Remote:
        name, description = "remote", "A remote tool."
        parameters: Mapping[str, Any] = {"type": "object", "properties": {}}

        async def call(self, arguments: dict[str, Any]) -> Any:
            return "remote answer"

    plan = FaultPlan([ToolTimeout(kind="tool_timeout", tool="remote")])
    model = ScriptedModel([tool_call("remote", {}, id="c1"), "ok"])
    with fault_scope(plan):
        outcome = await run_loop(model, ToolRegistry([Remote()]), "go")
    assert tool_messages(outcome)[0].content == "remote answer"
    assert plan.fired == {}


async def test_fired_faults_and_the_guard_show_in_the_events_of_a_bus(shop: ToolRegistry) -> None:
    bus = EventBus()
    got: list[RunnerEvent] = []
    bus.subscribe(got.append)
    plan = FaultPlan([ToolTimeout(kind="tool_timeout", tool="get_book")], guard="plan")
    model = ScriptedModel(
        [
            [
                tool_call("get_book", {"isbn": "1"}, id="c1"),
                tool_call("order_book", {"isbn": "1"}, id="c2"),
            ],
            "done",
        ]
    )
    with event_scope(bus, task_id="t-1"), fault_scope(plan):
        await run_loop(model, shop.view(), "go")
    await bus.flush()
    picked = [
        (e.type, e.tool, e.trace_metadata.get("failure_reason") or e.trace_metadata.get("fault"))
        for e in got
        if e.type in {"lab.fault_injected", "step.failed"}
    ]
    assert picked == [
        ("lab.fault_injected", None, "tool_timeout"),
        ("step.failed", "get_book", "timeout"),
        ("step.failed", "order_book", "side_effect_not_run"),
    ]
    assert {e.task_id for e in got} == {"t-1"}


# --------------------------------------------------------------------------- model faults


@pytest.mark.reason("malformed_arguments")
async def test_model_malformed_json_is_a_call_the_loop_cannot_parse(
    shop: ToolRegistry, calls: Calls
) -> None:
    plan = FaultPlan([ModelMalformedJson(kind="model_malformed_json")])
    script: list[ScriptStep] = [tool_call("count", {"n": 1}, id="c1"), "2"]
    outcome, model = await run(shop, script, plan)

    assert outcome.status == "completed"
    assert outcome.answer == "2"
    assert outcome.rounds == 3
    said = [m for m in outcome.transcript if isinstance(m, AssistantMessage)]
    [broken] = said[0].tool_calls
    assert (broken.name, broken.arguments_json) == ("get_book", MALFORMED_ARGUMENTS)
    assert broken.id.startswith("fault_")
    first, second = tool_messages(outcome)
    assert first.tool_call_id == broken.id
    assert first.content == (
        "malformed_arguments: Arguments for tool 'get_book' are not valid JSON "
        "(Expecting value at char 11). Send one JSON object matching the tool's parameters."
    )
    assert (second.content, calls.count("count"), calls.count("get_book")) == ("2", 1, 0)
    assert len(model.calls) == 2  # the real model answered the rounds after
    assert model.calls[0].messages[-1] == first
    assert [r.reason for r in outcome.failures] == ["malformed_arguments"]
    assert plan.fired == {"model_malformed_json": 1}


async def test_model_malformed_json_without_tools_is_a_broken_answer() -> None:
    model = ScriptedModel([])
    with fault_scope(FaultPlan([ModelMalformedJson(kind="model_malformed_json")])):
        outcome = await run_loop(model, ToolRegistry(), "go")
    assert (outcome.status, outcome.answer) == ("completed", MALFORMED_ARGUMENTS)
    assert model.calls == []


@pytest.mark.reason("invalid_model_response")
async def test_model_empty_answer_ends_the_run_invalid_model_response(
    shop: ToolRegistry,
) -> None:
    plan = FaultPlan([ModelEmptyAnswer(kind="model_empty_answer")])
    outcome, model = await run(shop, ["never played"], plan)

    assert outcome.status == "invalid_model_response"
    assert model.calls == []
    [record] = outcome.failures
    assert (record.stage, record.reason, record.error_code, record.retryable) == (
        "model_call",
        "invalid_model_response",
        ErrorCode.UPSTREAM_UNAVAILABLE,
        True,
    )
    assert record.message == "The model answered with neither a tool call nor any text."
    assert record.evidence == {"round": 1, "content_present": False}


@pytest.mark.reason("rate_limited")
async def test_model_rate_limited_ends_the_run_rate_limited_with_retry_after(
    shop: ToolRegistry,
) -> None:
    plan = FaultPlan([ModelRateLimited(kind="model_rate_limited", retry_after_ms=1500)])
    outcome, model = await run(shop, ["never played"], plan)

    assert outcome.status == "model_error"
    assert model.calls == []
    found = outcome.classification
    assert found is not None
    assert (found.code, found.reason, found.retriable, found.retry_after_ms, found.http_status) == (
        ErrorCode.RATE_LIMITED,
        "rate_limited",
        True,
        1500,
        429,
    )
    [record] = outcome.failures
    assert (record.stage, record.reason, record.message) == (
        "model_call",
        "rate_limited",
        "Model provider answered HTTP 429 Too Many Requests (injected fault)",
    )
    assert record.evidence["retry_after_ms"] == 1500
    data = error_data_for_exception(found.exception)
    assert (data.error_code, data.error_reason, data.retry_after_ms) == (
        ErrorCode.RATE_LIMITED,
        "rate_limited",
        1500,
    )


@pytest.mark.reason("http_5xx")
async def test_model_server_error_ends_the_run_upstream_unavailable(shop: ToolRegistry) -> None:
    plan = FaultPlan([ModelServerError(kind="model_server_error", status=502)])
    outcome, _ = await run(shop, ["never played"], plan)

    assert outcome.status == "model_error"
    found = outcome.classification
    assert found is not None
    assert (found.code, found.reason, found.retriable, found.http_status) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "http_5xx",
        True,
        502,
    )
    assert outcome.failures[0].message == (
        "Model provider answered HTTP 502 Bad Gateway (injected fault)"
    )


async def test_model_faults_fire_once_each_in_order(shop: ToolRegistry, calls: Calls) -> None:
    plan = FaultPlan(
        [
            ModelMalformedJson(kind="model_malformed_json"),
            ModelEmptyAnswer(kind="model_empty_answer"),
        ]
    )
    outcome, model = await run(shop, ["never played"], plan)
    assert outcome.status == "invalid_model_response"
    assert outcome.rounds == 2
    assert model.calls == []
    assert plan.fired == {"model_malformed_json": 1, "model_empty_answer": 1}


async def test_loop_agent_raises_rate_limited_with_retry_after(shop: ToolRegistry) -> None:
    async def no_stream(chunk: Any) -> None:
        raise AssertionError("LoopAgent does not stream")

    artifacts: list[tuple[Any, str]] = []

    async def add_artifact(value: Any, name: str) -> None:
        artifacts.append((value, name))

    message = Message(
        role=Role.user, parts=[Part(root=TextPart(text="go"))], message_id=str(uuid.uuid4())
    )
    ctx = AgentContext(
        task_id="t1", context_id="c1", message=message, emit=no_stream, add_artifact=add_artifact
    )
    agent = LoopAgent(ScriptedModel(["never played"]), shop)
    plan = FaultPlan([ModelRateLimited(kind="model_rate_limited", retry_after_ms=2000)])
    with fault_scope(plan), pytest.raises(LlamonApplicationError) as caught:
        await agent.invoke(ctx)
    data = error_data_for_exception(caught.value)
    assert (data.error_code, data.error_reason, data.retriable, data.retry_after_ms) == (
        ErrorCode.RATE_LIMITED,
        "rate_limited",
        True,
        2000,
    )
    assert artifacts == []
    # the next run, without the plan, answers
    assert await LoopAgent(ScriptedModel(["fine"]), shop).invoke(ctx) == "fine"


# --------------------------------------------------------------------------- no plan


@pytest.mark.parametrize("plan", [None, FaultPlan()])
async def test_without_a_plan_nothing_changes(
    shop: ToolRegistry, calls: Calls, plan: FaultPlan | None
) -> None:
    script: list[ScriptStep] = [
        tool_call("get_book", {"isbn": "42"}, id="c1"),
        tool_call("order_book", {"isbn": "42"}, id="c2"),
        "ordered",
    ]
    plain, _ = await run(shop, script, None)
    faulted, _ = await run(shop, script, plan)
    assert faulted.status == plain.status == "completed"
    assert faulted.transcript == plain.transcript
    assert faulted.failures == ()
    assert calls.count("get_book") == calls.count("order_book") == 2


# --------------------------------------------------------------------------- the ReAct graph


def _react_tool_texts(state: dict[str, Any]) -> list[str]:
    return [m["content"] for m in state["messages"] if m["role"] == "tool"]


async def test_react_graph_meets_a_model_fault(shop: ToolRegistry, calls: Calls) -> None:
    model = ScriptedModel([tool_call("count", {"n": 1}, id="c1"), "2"])
    graph = build_react_graph(model, shop.view())
    plan = FaultPlan([ModelMalformedJson(kind="model_malformed_json")])
    with fault_scope(plan):
        state = await graph.ainvoke({"query": "go"})
    assert state["output"] == "2"
    assert _react_tool_texts(state) == [
        "malformed_arguments: Arguments for tool 'get_book' are not valid JSON "
        "(Expecting value at char 11). Send one JSON object matching the tool's parameters.",
        "2",
    ]
    assert len(model.calls) == 2
    assert plan.fired == {"model_malformed_json": 1}


async def test_react_graph_meets_a_tool_fault_and_the_guard(
    shop: ToolRegistry, calls: Calls
) -> None:
    model = ScriptedModel(
        [
            [
                tool_call("get_book", {"isbn": "1"}, id="c1"),
                tool_call("order_book", {"isbn": "1"}, id="c2"),
            ],
            "done",
        ]
    )
    graph = build_react_graph(model, shop.view())
    plan = FaultPlan([ToolTimeout(kind="tool_timeout", tool="get_book")], guard="plan")
    with fault_scope(plan):
        state = await graph.ainvoke({"query": "go"})
    assert state["output"] == "done"
    assert _react_tool_texts(state) == [
        "tool_error: Tool 'get_book' failed (timeout): TimeoutError was raised.",
        "side_effect_not_run: Tool 'order_book' has side effects and was not run (plan mode). "
        "Answer with what you would do instead.",
    ]
    assert calls.seen == []


async def test_react_graph_raises_an_injected_provider_failure(shop: ToolRegistry) -> None:
    graph = build_react_graph(ScriptedModel(["never played"]), shop.view())
    plan = FaultPlan([ModelServerError(kind="model_server_error")])
    with (
        fault_scope(plan),
        pytest.raises(Exception, match="HTTP 503 Service Unavailable") as caught,
    ):
        await graph.ainvoke({"query": "go"})
    assert type(caught.value).__name__ == "HTTPStatusError"
    # without the plan the same graph answers
    again = build_react_graph(ScriptedModel(["fine"]), shop.view())
    assert (await again.ainvoke({"query": "go"}))["output"] == "fine"
