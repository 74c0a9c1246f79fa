"""run_loop: the seven named failures, each pinned, and what a run returns."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, field_validator

from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.failures import FailureRecord
from llamon_agent.exceptions import ComponentInvokeError, LlamonApplicationError
from llamon_agent.loop import (
    AssistantMessage,
    ChatMessage,
    LoopEvent,
    ModelResponse,
    ScriptedModel,
    SystemMessage,
    Tool,
    ToolMessage,
    ToolRegistry,
    ToolResult,
    UserMessage,
    run_loop,
    tool_call,
)
from llamon_agent.loop.scripted import ScriptStep
from tests.loop.conftest import Calls


def tool_messages(transcript: Any) -> list[ToolMessage]:
    return [m for m in transcript if isinstance(m, ToolMessage)]


# --------------------------------------------------------------------------- happy path


async def test_completed_run_feeds_the_result_back_under_the_same_id(
    registry: ToolRegistry, calls: Calls
) -> None:
    model = ScriptedModel(
        [
            tool_call("add_numbers", {"a": 2, "b": 3}, id="c1"),
            lambda messages: f"The sum is {messages[-1].content}.",
        ]
    )
    outcome = await run_loop(model, registry.view("add_numbers"), "2 + 3?")

    assert outcome.status == "completed"
    assert outcome.completed
    assert outcome.answer == "The sum is 5."
    assert outcome.rounds == 2
    assert outcome.failures == ()
    assert outcome.terminal is None
    assert calls.count("add_numbers") == 1
    [message] = tool_messages(outcome.transcript)
    assert (message.tool_call_id, message.name, message.content) == ("c1", "add_numbers", "5")
    assert message.is_error is False
    assert [type(m) for m in outcome.transcript] == [
        UserMessage,
        AssistantMessage,
        ToolMessage,
        AssistantMessage,
    ]
    [step] = outcome.tool_results
    assert (step.call.id, step.round, step.result.value) == ("c1", 1, 5)


async def test_messages_and_registry_are_accepted(registry: ToolRegistry) -> None:
    model = ScriptedModel(["hi"])
    history: list[ChatMessage] = [SystemMessage("be brief"), UserMessage("hello")]
    outcome = await run_loop(model, registry, history)
    assert outcome.answer == "hi"
    assert model.calls[0].messages == tuple(history)
    assert model.calls[0].tool_names == ("add_numbers", "lookup", "explode", "refuse")


async def test_several_calls_in_one_round_run_in_order(registry: ToolRegistry) -> None:
    model = ScriptedModel(
        [
            [tool_call("lookup", {"key": "a"}), tool_call("add_numbers", {"a": 1, "b": 1})],
            "done",
        ]
    )
    outcome = await run_loop(model, registry.view(), "go")
    assert [(m.tool_call_id, m.content) for m in tool_messages(outcome.transcript)] == [
        ("call_1", '{"key": "a", "value": "A"}'),
        ("call_2", "2"),
    ]
    assert [r.round for r in outcome.tool_results] == [1, 1]


async def test_model_retries_and_usage_are_summed(registry: ToolRegistry) -> None:
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=(tool_call("lookup", {"key": "x"}),),
                retries=2,
                usage={"input_tokens": 10},
            ),
            ModelResponse(content="ok", retries=1, usage={"input_tokens": 5, "output_tokens": 1}),
        ]
    )
    outcome = await run_loop(model, registry.view(), "go")
    assert outcome.model_retries == 3
    assert outcome.usage == {"input_tokens": 15, "output_tokens": 1}


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
async def test_max_rounds_must_be_positive(registry: ToolRegistry, bad: Any) -> None:
    with pytest.raises(ValueError, match="max_rounds"):
        await run_loop(ScriptedModel(["x"]), registry, "go", max_rounds=bad)


# --------------------------------------------------------------------------- observations


@pytest.mark.reason("unknown_tool")
async def test_unknown_tool_is_an_observation_and_the_loop_continues(
    registry: ToolRegistry,
) -> None:
    model = ScriptedModel([tool_call("send_email", {"to": "x"}, id="c9"), "sorry"])
    outcome = await run_loop(model, registry.view("add_numbers", "lookup"), "mail bob")

    assert outcome.status == "completed"
    [message] = tool_messages(outcome.transcript)
    assert message.tool_call_id == "c9"
    assert message.is_error is True
    assert message.content == (
        "unknown_tool: No tool named 'send_email' in this run. "
        "Available tools: add_numbers, lookup."
    )
    [record] = outcome.failures
    assert (record.stage, record.reason, record.tool, record.step_id) == (
        "tool_loop",
        "unknown_tool",
        "send_email",
        "c9",
    )
    assert record.evidence["tool_call_id"] == "c9"
    assert record.evidence["round"] == 1
    assert record.evidence["candidate_names"] == ["add_numbers", "lookup"]
    assert outcome.tool_results[0].result.error_code == "unknown_tool"


async def test_a_view_hides_tools_from_the_model_and_from_dispatch(
    registry: ToolRegistry, calls: Calls
) -> None:
    model = ScriptedModel([tool_call("explode", id="c1"), "ok"])
    outcome = await run_loop(model, registry.view("lookup"), "go")
    assert model.calls[0].tool_names == ("lookup",)
    assert outcome.failures[0].reason == "unknown_tool"
    assert calls.count("explode") == 0


@pytest.mark.reason("malformed_arguments")
@pytest.mark.parametrize(
    ("raw", "error_type", "shown"),
    [
        ('{"a": 1, "b": ', "json", "are not valid JSON (Expecting value at char 14)"),
        ("[1, 2]", "not_an_object", "are not a JSON object (got array)"),
        ('{"a": NaN, "b": 1}', "json", "are not valid JSON (NaN is not valid JSON)"),
    ],
)
async def test_malformed_arguments_is_an_observation_and_the_loop_continues(
    registry: ToolRegistry, calls: Calls, raw: str, error_type: str, shown: str
) -> None:
    model = ScriptedModel([tool_call("add_numbers", raw, id="c2"), "gave up"])
    outcome = await run_loop(model, registry.view(), "add")

    assert outcome.status == "completed"
    [message] = tool_messages(outcome.transcript)
    assert message.tool_call_id == "c2"
    assert message.is_error is True
    assert message.content == (
        f"malformed_arguments: Arguments for tool 'add_numbers' {shown}. "
        "Send one JSON object matching the tool's parameters."
    )
    [record] = outcome.failures
    assert (record.stage, record.reason, record.tool) == (
        "tool_loop",
        "malformed_arguments",
        "add_numbers",
    )
    assert record.evidence["error_type"] == error_type
    assert calls.count("add_numbers") == 0


async def test_empty_arguments_count_as_an_empty_object(registry: ToolRegistry) -> None:
    model = ScriptedModel([tool_call("explode", "", id="c1"), "ok"])
    outcome = await run_loop(model, registry.view(), "go")
    assert outcome.failures[0].reason == "tool_error"  # it ran, with the default


@pytest.mark.reason("invalid_arguments")
async def test_invalid_arguments_names_the_field_and_the_loop_continues(
    registry: ToolRegistry, calls: Calls
) -> None:
    model = ScriptedModel(
        [
            tool_call("add_numbers", {"a": "two", "b": 3}, id="c3"),
            tool_call("add_numbers", {"a": 2, "b": 3}, id="c4"),
            "5",
        ]
    )
    outcome = await run_loop(model, registry.view(), "add")

    assert outcome.status == "completed"
    first, second = tool_messages(outcome.transcript)
    assert first.tool_call_id == "c3"
    assert first.is_error is True
    assert first.content == (
        "invalid_arguments: field 'a': Input should be a valid integer, "
        "unable to parse string as an integer"
    )
    assert (second.tool_call_id, second.content, second.is_error) == ("c4", "5", False)
    [record] = outcome.failures
    assert (record.stage, record.reason, record.tool) == (
        "tool_loop",
        "invalid_arguments",
        "add_numbers",
    )
    assert record.evidence["field_names"] == ["a"]
    assert "two" not in json.dumps(record.to_dict())  # field names, never values
    assert calls.count("add_numbers") == 1


async def test_invalid_arguments_lists_every_field(registry: ToolRegistry) -> None:
    model = ScriptedModel([tool_call("add_numbers", {"a": 1, "c": 2}), "x"])
    outcome = await run_loop(model, registry.view(), "add")
    [message] = tool_messages(outcome.transcript)
    assert message.content == (
        "invalid_arguments: field 'b': Field required; field 'c': Extra inputs are not permitted"
    )
    assert outcome.failures[0].evidence["field_names"] == ["b", "c"]


@pytest.mark.reason("tool_error")
async def test_tool_error_hides_unmapped_exception_text_behind_an_incident_id(
    registry: ToolRegistry, calls: Calls
) -> None:
    model = ScriptedModel([tool_call("explode", {"reason": "x"}, id="c5"), "it failed"])
    outcome = await run_loop(model, registry.view(), "go")

    assert outcome.status == "completed"
    [message] = tool_messages(outcome.transcript)
    [record] = outcome.failures
    incident = record.evidence["incident_id"]
    assert message.tool_call_id == "c5"
    assert message.is_error is True
    assert message.content == f"tool_error: Tool 'explode' failed (incident {incident})."
    assert "hunter2" not in json.dumps(record.to_dict())
    assert (record.stage, record.reason, record.tool, record.step_id) == (
        "tool_loop",
        "tool_error",
        "explode",
        "c5",
    )
    assert record.evidence["exception_type"] == "RuntimeError"
    assert record.evidence["round"] == 1
    assert calls.count("explode") == 1


async def test_tool_error_of_a_mapped_exception_shows_its_reason_and_text() -> None:
    async def search(query: str) -> str:
        raise ComponentInvokeError("the search index is down")

    registry = ToolRegistry([search])
    model = ScriptedModel([tool_call("search", {"query": "q"}, id="c1"), "later"])
    outcome = await run_loop(model, registry.view(), "go")
    [message] = tool_messages(outcome.transcript)
    assert message.content == (
        "tool_error: Tool 'search' failed (component_invoke_error): the search index is down"
    )
    assert outcome.failures[0].evidence["cause_code"] == "UPSTREAM_UNAVAILABLE"


@pytest.mark.reason("http_4xx")
async def test_a_tool_raising_http_400_carries_the_tables_reason_and_status() -> None:
    async def create_order(sku: str) -> str:
        request = httpx.Request("POST", "https://orders.internal:8443/v2/orders")
        httpx.Response(400, request=request).raise_for_status()
        return "unreachable"

    events: list[LoopEvent] = []
    model = ScriptedModel([tool_call("create_order", {"sku": "A-1"}, id="c1"), "later"])
    outcome = await run_loop(
        model, ToolRegistry([create_order]).view(), "go", on_event=events.append
    )
    [record] = outcome.failures
    assert (record.reason, record.error_code, record.retryable, record.stage) == (
        "http_4xx",
        ErrorCode.UPSTREAM_UNAVAILABLE,
        False,
        "tool_loop",
    )
    assert record.evidence["http_status"] == 400
    [failed] = [e for e in events if e.type == "step.failed"]
    assert failed.trace_metadata["failure_reason"] == "http_4xx"
    assert failed.trace_metadata["retryable"] is False
    assert failed.trace_metadata["http_status"] == 400
    [message] = tool_messages(outcome.transcript)
    assert message.content.startswith(
        "tool_error: Tool 'create_order' failed (http_4xx): Client error '400 Bad Request'"
    )
    assert "orders.internal" not in message.content  # the model reads no upstream URL
    assert "orders.internal" not in json.dumps(failed.trace_metadata)
    assert outcome.status == "completed"  # the loop went on


async def test_a_returned_tool_failure_passes_through_as_an_observation(
    registry: ToolRegistry,
) -> None:
    model = ScriptedModel([tool_call("refuse", {"customer": "kim"}, id="c6"), "need the id"])
    outcome = await run_loop(model, registry.view(), "go")

    assert outcome.status == "completed"
    [message] = tool_messages(outcome.transcript)
    assert message.tool_call_id == "c6"
    assert message.is_error is True
    assert message.content == "customer_not_found: No customer 'kim'; ask for the id."
    [record] = outcome.failures
    assert (record.stage, record.reason, record.tool, record.step_id) == (
        "execute",
        "customer_not_found",
        "refuse",
        "c6",
    )
    assert record.evidence == {"tool_call_id": "c6", "round": 1}


@pytest.mark.reason("repeated_tool_call")
async def test_repeated_tool_call_is_blocked_without_running_the_handler(
    registry: ToolRegistry, calls: Calls
) -> None:
    same = '{"a": 1, "b": 2}'
    model = ScriptedModel(
        [
            tool_call("add_numbers", same, id="c7"),
            tool_call("add_numbers", same, id="c8"),
            "3",
        ]
    )
    outcome = await run_loop(model, registry.view(), "add")

    assert outcome.status == "completed"
    assert calls.count("add_numbers") == 1
    first, second = tool_messages(outcome.transcript)
    assert (first.tool_call_id, first.is_error) == ("c7", False)
    assert second.tool_call_id == "c8"
    assert second.is_error is True
    assert second.content == (
        "repeated_tool_call: Tool 'add_numbers' was just called with these same arguments, "
        "so it was not run again. Use the result above, change the arguments, or answer."
    )
    [record] = outcome.failures
    assert (record.stage, record.reason, record.tool, record.step_id) == (
        "tool_loop",
        "repeated_tool_call",
        "add_numbers",
        "c8",
    )
    assert record.evidence == {"tool_call_id": "c8", "round": 2}


async def test_repeats_within_one_round_are_blocked_too(
    registry: ToolRegistry, calls: Calls
) -> None:
    twice = [tool_call("lookup", {"key": "k"}), tool_call("lookup", {"key": "k"})]
    outcome = await run_loop(ScriptedModel([twice, "ok"]), registry.view(), "go")
    assert calls.count("lookup") == 1
    assert [r.result.error_code for r in outcome.tool_results] == [None, "repeated_tool_call"]


@pytest.mark.parametrize(
    "second",
    [
        tool_call("add_numbers", '{"a": 1,  "b": 2}'),  # same meaning, other raw text
        tool_call("lookup", '{"a": 1, "b": 2}'),  # other tool
    ],
)
async def test_only_name_and_raw_arguments_both_equal_count_as_a_repeat(
    registry: ToolRegistry, second: Any
) -> None:
    model = ScriptedModel([tool_call("add_numbers", '{"a": 1, "b": 2}'), second, "ok"])
    outcome = await run_loop(model, registry.view(), "go")
    assert all(r.result.error_code != "repeated_tool_call" for r in outcome.tool_results)


async def test_a_call_repeated_after_another_call_runs_again(
    registry: ToolRegistry, calls: Calls
) -> None:
    script: list[ScriptStep] = [
        tool_call("lookup", {"key": "a"}),
        tool_call("lookup", {"key": "b"}),
        tool_call("lookup", {"key": "a"}),
        "ok",
    ]
    outcome = await run_loop(ScriptedModel(script), registry.view(), "go")
    assert outcome.failures == ()
    assert calls.count("lookup") == 3


# --------------------------------------------------------------------------- terminal


@pytest.mark.reason("invalid_model_response")
@pytest.mark.parametrize("content", ["", "  \n\t", None])
async def test_empty_model_response_ends_the_run_as_invalid_model_response(
    registry: ToolRegistry, content: str | None
) -> None:
    model = ScriptedModel([tool_call("lookup", {"key": "a"}), ModelResponse(content=content)])
    outcome = await run_loop(model, registry.view(), "go")

    assert outcome.status == "invalid_model_response"
    assert outcome.answer is None
    assert outcome.rounds == 2
    assert len(outcome.tool_results) == 1
    record = outcome.terminal
    assert record is not None
    assert (record.stage, record.reason) == ("model_call", "invalid_model_response")
    assert record.error_code is ErrorCode.UPSTREAM_UNAVAILABLE
    assert record.evidence["round"] == 2
    assert outcome.failures == (record,)


async def test_a_response_that_is_not_a_model_response_is_invalid() -> None:
    class Broken:
        async def complete(self, messages: Any, tools: Any) -> Any:
            return {"content": "hi"}

    outcome = await run_loop(Broken(), ToolRegistry(), "go")
    assert outcome.status == "invalid_model_response"
    assert outcome.failures[0].evidence["error_type"] == "dict"


@pytest.mark.reason("max_rounds_exceeded")
async def test_max_rounds_exceeded_ends_the_run_with_the_partial_results(
    registry: ToolRegistry, calls: Calls
) -> None:
    script = [tool_call("lookup", {"key": str(i)}, id=f"c{i}") for i in range(5)]
    model = ScriptedModel(script)
    outcome = await run_loop(model, registry.view(), "go", max_rounds=3)

    assert outcome.status == "max_rounds_exceeded"
    assert outcome.answer is None
    assert outcome.rounds == 3
    assert len(model.calls) == 3
    assert calls.count("lookup") == 3  # the last round's calls ran too
    assert [(r.call.id, r.round, r.result.value["key"]) for r in outcome.tool_results] == [
        ("c0", 1, "0"),
        ("c1", 2, "1"),
        ("c2", 3, "2"),
    ]
    record = outcome.terminal
    assert record is not None
    assert (record.stage, record.reason) == ("tool_loop", "max_rounds_exceeded")
    assert record.evidence == {
        "max_rounds": 3,
        "rounds": 3,
        "tool_call_count": 3,
        "failed_call_count": 0,
    }
    assert record.message == "No final answer after 3 rounds (3 tool calls, 0 failed)."


async def test_model_error_is_an_outcome_with_the_classification(registry: ToolRegistry) -> None:
    model = ScriptedModel([tool_call("lookup", {"key": "a"}), TimeoutError("model timed out")])
    outcome = await run_loop(model, registry.view(), "go")

    assert outcome.status == "model_error"
    assert outcome.answer is None
    assert len(outcome.tool_results) == 1
    assert outcome.classification is not None
    assert outcome.classification.code is ErrorCode.UPSTREAM_TIMEOUT
    assert outcome.classification.retriable is True
    record = outcome.terminal
    assert record is not None
    assert (record.stage, record.reason) == ("model_call", "timeout")
    assert record.error_code is ErrorCode.UPSTREAM_TIMEOUT
    assert record.evidence["round"] == 2
    assert record.message == "model timed out"


async def test_model_error_of_an_unmapped_exception_keeps_its_text_inside() -> None:
    model = ScriptedModel([RuntimeError("api_key=sk-live-123 rejected")])
    outcome = await run_loop(model, ToolRegistry(), "go")
    assert outcome.status == "model_error"
    assert outcome.classification is not None
    assert outcome.classification.code is ErrorCode.INTERNAL_ERROR
    record = outcome.terminal
    assert record is not None
    assert record.message == f"Internal error (incident {record.evidence['incident_id']})."
    assert "sk-live" not in json.dumps(record.to_dict())


async def test_model_error_keeps_retry_after() -> None:
    quota = LlamonApplicationError(
        ErrorCode.RATE_LIMITED,
        "model_quota",
        message="slow down",
        retriable=True,
        retryAfterMs=1500,
    )
    outcome = await run_loop(ScriptedModel([quota]), ToolRegistry(), "go")
    assert outcome.classification is not None
    assert outcome.classification.retry_after_ms == 1500
    assert outcome.terminal is not None
    assert outcome.terminal.evidence["retry_after_ms"] == 1500


async def test_an_exhausted_script_is_a_model_error() -> None:
    outcome = await run_loop(ScriptedModel([]), ToolRegistry(), "go")
    assert outcome.status == "model_error"
    assert outcome.terminal is not None
    assert outcome.terminal.reason == "script_exhausted_error"


# --------------------------------------------------------------------------- events


async def test_events_trace_the_run(registry: ToolRegistry) -> None:
    events: list[LoopEvent] = []
    model = ScriptedModel(
        [tool_call("lookup", {"key": "a"}, id="c1"), tool_call("nope", id="c2"), "done"]
    )
    outcome = await run_loop(model, registry.view(), "go", on_event=events.append)

    assert [(e.type, e.stage, e.round, e.step_id) for e in events] == [
        ("run.started", "tool_loop", 0, None),
        ("model.completed", "model_call", 1, None),
        ("step.started", "tool_loop", 1, "c1"),
        ("step.completed", "tool_loop", 1, "c1"),
        ("model.completed", "model_call", 2, None),
        ("step.started", "tool_loop", 2, "c2"),
        ("step.failed", "tool_loop", 2, "c2"),
        ("model.completed", "model_call", 3, None),
        ("run.completed", "tool_loop", 3, None),
    ]
    assert {e.run_id for e in events} == {outcome.run_id}
    failed = events[6]
    assert failed.tool == "nope"
    assert failed.trace_metadata["failure_reason"] == "unknown_tool"
    assert failed.trace_metadata["tool_call_id"] == "c2"
    json.dumps([dataclasses.asdict(e) for e in events])  # transport-neutral, JSON-ready


async def test_terminal_failures_emit_run_failed(registry: ToolRegistry) -> None:
    events: list[LoopEvent] = []

    async def collect(event: LoopEvent) -> None:
        events.append(event)

    await run_loop(ScriptedModel([""]), registry, "go", on_event=collect)
    last = events[-1]
    assert (last.type, last.stage) == ("run.failed", "model_call")
    assert last.trace_metadata["failure_reason"] == "invalid_model_response"


async def test_a_raising_event_handler_changes_nothing(
    registry: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(event: LoopEvent) -> None:
        raise ValueError("observer bug")

    outcome = await run_loop(
        ScriptedModel([tool_call("lookup", {"key": "a"}), "ok"]), registry, "go", on_event=broken
    )
    assert outcome.status == "completed"
    assert "on_event handler raised ValueError" in caplog.text


# --------------------------------------------------------------------------- ToolLike


class RemoteTool:
    """A ToolLike (as the MCP loader makes them): schema-checked, may fail its own way."""

    name = "remote"
    description = "A tool on another server."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    }

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def call(self, arguments: dict[str, Any]) -> Any:
        self.seen.append(arguments)
        if arguments["q"] == "down":
            record = FailureRecord.of(
                "upstream_tool_unavailable", "server down", evidence={"mcp_code": -32000}
            )
            return ToolResult.failure("upstream_tool_unavailable", "server down", record=record)
        if arguments["q"] == "crash":
            raise ConnectionError("connection refused")
        return {"answer": arguments["q"]}


async def test_a_tool_like_is_checked_against_its_schema_and_called() -> None:
    remote = RemoteTool()
    script: list[ScriptStep] = [
        tool_call("remote", {"q": 1}, id="c1"),
        tool_call("remote", {"q": "down"}, id="c2"),
        tool_call("remote", {"q": "ok"}, id="c3"),
        "done",
    ]
    outcome = await run_loop(ScriptedModel(script), ToolRegistry([remote]), "go")

    assert outcome.status == "completed"
    assert remote.seen == [{"q": "down"}, {"q": "ok"}]
    texts = [m.content for m in tool_messages(outcome.transcript)]
    assert texts == [
        "invalid_arguments: field 'q': Input should be a valid string",
        "upstream_tool_unavailable: server down",
        '{"answer": "ok"}',
    ]
    invalid, down = outcome.failures
    assert (invalid.reason, invalid.evidence["field_names"]) == ("invalid_arguments", ["q"])
    # the tool's own record keeps its stage and evidence, and learns the call
    assert (down.stage, down.reason, down.tool, down.step_id) == (
        "mcp_call",
        "upstream_tool_unavailable",
        "remote",
        "c2",
    )
    assert down.evidence == {"mcp_code": -32000, "tool_call_id": "c2", "round": 2}


async def test_a_tool_like_that_raises_escalates_and_ends_the_run(
    registry: ToolRegistry, calls: Calls
) -> None:
    remote = RemoteTool()
    tools = ToolRegistry([remote, *registry])
    events: list[LoopEvent] = []
    script: list[ScriptStep] = [
        tool_call("lookup", {"key": "a"}, id="c1"),
        [tool_call("remote", {"q": "crash"}, id="c2"), tool_call("lookup", {"key": "b"}, id="c3")],
        "never reached",
    ]
    model = ScriptedModel(script)
    outcome = await run_loop(model, tools.view(), "go", on_event=events.append)

    assert outcome.status == "tool_escalated"
    assert outcome.answer is None
    assert len(model.calls) == 2
    assert calls.count("lookup") == 1  # the rest of the round did not run
    assert outcome.classification is not None
    assert isinstance(outcome.classification.exception, ConnectionError)
    assert (outcome.classification.code, outcome.classification.retriable) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        True,
    )
    assert [(r.call.id, r.result.error_code) for r in outcome.tool_results] == [
        ("c1", None),
        ("c2", "network_error"),
    ]
    record = outcome.terminal
    assert record is not None
    assert (record.stage, record.tool, record.step_id) == ("execute", "remote", "c2")
    assert record.evidence["tool_call_id"] == "c2"
    assert record.evidence["round"] == 2
    assert [e.type for e in events[-2:]] == ["step.started", "run.failed"]


async def test_a_crashing_validator_is_a_tool_error(calls: Calls) -> None:
    class Crashing(BaseModel):
        x: int

        @field_validator("x")
        @classmethod
        def crash(cls, value: int) -> int:
            raise LookupError("validator bug")

    async def handler(x: int) -> int:
        calls.seen.append(("picky", {"x": x}))
        return x

    picky = Tool("picky", "Has a validator that crashes.", {"type": "object"}, handler, Crashing)
    model = ScriptedModel([tool_call("picky", {"x": 1}, id="c1"), "ok"])
    outcome = await run_loop(model, ToolRegistry([picky]), "go")
    assert outcome.status == "completed"
    assert outcome.failures[0].reason == "tool_error"
    assert outcome.failures[0].evidence["exception_type"] == "LookupError"
    assert calls.count("picky") == 0
