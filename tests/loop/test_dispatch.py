"""ToolDispatcher: the per-call code run_loop, the ReAct graph and the LangChain bridge share."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

import llamon_agent
from llamon_agent.core.codes import ErrorCode, Stage
from llamon_agent.loop import (
    LoopEvent,
    ToolDispatcher,
    ToolMessage,
    ToolRegistry,
    ToolResult,
    ToolView,
    tool_call,
)
from llamon_agent.loop.dispatch import RETRY_INVITING_REASONS, ToolEscalation
from llamon_agent.loop.events import EventSink
from llamon_agent.loop.result import ToolResultLike
from llamon_agent.loop.tools import SelfValidatingTool, ToolLike
from llamon_agent.mcp.normalizer import MCPTool, McpToolOutput
from tests.loop.conftest import Calls, FlakyRemote

SRC = Path(llamon_agent.__file__).parent
DOC = Path(__file__).parents[2] / "docs" / "tool-loop.md"


def _message(done: ToolMessage | ToolEscalation) -> ToolMessage:
    assert isinstance(done, ToolMessage), done
    return done


async def test_a_call_gives_the_message_the_model_reads_and_is_recorded(
    registry: ToolRegistry,
) -> None:
    dispatcher = ToolDispatcher(registry.view("add_numbers"))
    done = _message(await dispatcher.dispatch(tool_call("add_numbers", {"a": 2, "b": 3}, id="c1")))
    assert (done.tool_call_id, done.name, done.content, done.is_error) == (
        "c1",
        "add_numbers",
        "5",
        False,
    )
    [made] = dispatcher.results
    assert (made.call.id, made.round, made.result.value) == ("c1", 1, 5)
    assert dispatcher.failures == ()
    assert dispatcher.previous == ("add_numbers", '{"a": 2, "b": 3}')


async def test_a_registry_means_all_of_its_tools(registry: ToolRegistry) -> None:
    dispatcher = ToolDispatcher(registry)
    assert dispatcher.tools.names == registry.names


async def test_each_failure_is_an_observation_with_a_record_naming_call_and_round(
    registry: ToolRegistry,
) -> None:
    dispatcher = ToolDispatcher(registry.view("add_numbers"))
    unknown = _message(await dispatcher.dispatch(tool_call("nope", id="u"), round_number=3))
    broken = _message(
        await dispatcher.dispatch(tool_call("add_numbers", '{"a": 1,', id="m"), round_number=3)
    )
    invalid = _message(
        await dispatcher.dispatch(tool_call("add_numbers", {"a": "x"}, id="i"), round_number=4)
    )
    assert unknown.is_error
    assert unknown.content.startswith("unknown_tool: No tool named 'nope'")
    assert broken.is_error
    assert broken.content.startswith("malformed_arguments: ")
    assert invalid.is_error
    assert invalid.content.startswith("invalid_arguments: field 'a'")
    assert [(r.reason, r.step_id, r.evidence["round"]) for r in dispatcher.failures] == [
        ("unknown_tool", "u", 3),
        ("malformed_arguments", "m", 3),
        ("invalid_arguments", "i", 4),
    ]
    assert [r.round for r in dispatcher.results] == [3, 3, 4]


async def test_the_repeat_guard_remembers_across_dispatches_and_from_previous(
    registry: ToolRegistry, calls: Calls
) -> None:
    call = tool_call("lookup", {"key": "a"}, id="c")
    dispatcher = ToolDispatcher(registry.view("lookup"), previous=("lookup", call.arguments_json))
    repeated = _message(await dispatcher.dispatch(call))
    assert repeated.content.startswith("repeated_tool_call: Tool 'lookup' was just called")
    assert calls.count("lookup") == 0

    fresh = ToolDispatcher(registry.view("lookup"))
    assert not _message(await fresh.dispatch(call)).is_error
    assert _message(await fresh.dispatch(call)).content.startswith("repeated_tool_call: ")
    assert calls.count("lookup") == 1


async def test_a_failure_that_invites_a_retry_is_not_remembered_as_the_previous_call() -> None:
    class Busy:
        name = "busy"
        description = "Says it is busy."
        parameters: Mapping[str, Any] = {"type": "object", "properties": {}}

        async def call(self, arguments: dict[str, Any]) -> ToolResult:
            return ToolResult.failure("upstream_tool_unavailable", "Busy; try again.")

    assert "upstream_tool_unavailable" in RETRY_INVITING_REASONS
    dispatcher = ToolDispatcher(ToolView([Busy()]))
    await dispatcher.dispatch(tool_call("busy", id="b1"))
    assert dispatcher.previous is None
    again = _message(await dispatcher.dispatch(tool_call("busy", id="b2")))
    assert again.content == "upstream_tool_unavailable: Busy; try again."


async def test_an_escalation_is_returned_recorded_and_emits_only_step_started() -> None:
    events: list[LoopEvent] = []
    dispatcher = ToolDispatcher(
        ToolView([FlakyRemote()]), events=EventSink(events.append, run_id="r1")
    )
    done = await dispatcher.dispatch(tool_call("flaky_remote", id="f1"), round_number=2)
    assert isinstance(done, ToolEscalation)
    assert type(done.exception).__name__ == "ComponentInvokeError"
    assert done.call.id == "f1"
    assert done.classification.code is ErrorCode.UPSTREAM_UNAVAILABLE
    assert (done.record.stage, done.record.step_id) == (Stage.EXECUTE, "f1")
    assert done.record.evidence["round"] == 2
    [made] = dispatcher.results
    assert made.result.is_error
    assert made.result.record is done.record
    assert dispatcher.failures == ()
    assert [(e.type, e.run_id, e.round, e.step_id) for e in events] == [
        ("step.started", "r1", 2, "f1")
    ]


async def test_step_events_go_to_the_sink_passed_in(registry: ToolRegistry) -> None:
    events: list[LoopEvent] = []

    async def collect(event: LoopEvent) -> None:
        events.append(event)

    dispatcher = ToolDispatcher(registry.view(), events=EventSink(collect, run_id="run-7"))
    await dispatcher.dispatch(tool_call("add_numbers", {"a": 1, "b": 1}, id="ok"), round_number=5)
    await dispatcher.dispatch(tool_call("refuse", {"customer": "x"}, id="no"), round_number=5)
    assert [(e.type, e.stage, e.run_id, e.round, e.tool, e.step_id) for e in events] == [
        ("step.started", "tool_loop", "run-7", 5, "add_numbers", "ok"),
        ("step.completed", "tool_loop", "run-7", 5, "add_numbers", "ok"),
        ("step.started", "tool_loop", "run-7", 5, "refuse", "no"),
        ("step.failed", "execute", "run-7", 5, "refuse", "no"),
    ]
    assert events[-1].trace_metadata["failure_reason"] == "customer_not_found"


async def test_a_raising_sink_handler_is_logged_and_ignored(
    registry: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(event: LoopEvent) -> None:
        raise ValueError("observer bug")

    dispatcher = ToolDispatcher(registry.view(), events=EventSink(broken))
    done = _message(await dispatcher.dispatch(tool_call("add_numbers", {"a": 1, "b": 2})))
    assert done.content == "3"
    assert "on_event handler raised ValueError on step.started" in caplog.text


# --------------------------------------------------------------------------- what it reads


class _Strict:
    """A ToolLike that checks its own arguments and says so."""

    name = "strict"
    description = "Checks its own arguments."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"title": {"type": "string"}},
        "required": ["title"],
    }
    validates_arguments: ClassVar[bool] = True

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        self.seen.append(arguments)
        if "title" not in arguments:
            return ToolResult.failure(
                "invalid_arguments", "Missing required argument: title", labelled=False
            )
        return ToolResult.ok(arguments["title"])


async def test_a_self_validating_tool_checks_its_own_arguments() -> None:
    strict = _Strict()
    assert isinstance(strict, SelfValidatingTool)
    declared: SelfValidatingTool = strict  # the protocol, as mypy reads it
    assert declared.validates_arguments is True
    dispatcher = ToolDispatcher(ToolView([strict]))
    done = _message(await dispatcher.dispatch(tool_call("strict", {}, id="s")))
    assert done.content == "Missing required argument: title"
    assert strict.seen == [{}]  # the loop did not check first


async def test_only_validates_arguments_true_skips_the_loops_check() -> None:
    class Truthy(_Strict):
        validates_arguments: ClassVar[bool] = "yes"  # type: ignore[assignment]

    truthy = Truthy()
    dispatcher = ToolDispatcher(ToolView([truthy]))
    done = _message(await dispatcher.dispatch(tool_call("strict", {}, id="t")))
    assert done.content.startswith("invalid_arguments: ")
    assert truthy.seen == []


class _Output:
    """A tool's own result type (as the MCP tools' output is)."""

    def __init__(self, text: str, *, failed: bool = False) -> None:
        self.text, self.failed = text, failed

    def to_tool_result(self) -> ToolResult:
        if self.failed:
            return ToolResult.failure("not_found", self.text, labelled=False)
        return ToolResult.ok({"text": self.text})


async def test_a_tool_result_like_is_converted_and_its_failure_names_the_call() -> None:
    class Own:
        name = "own"
        description = "Returns its own result type."
        parameters: Mapping[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}}

        async def call(self, arguments: dict[str, Any]) -> _Output:
            return _Output(arguments["q"], failed=arguments["q"] == "missing")

    assert isinstance(_Output("x"), ToolResultLike)
    dispatcher = ToolDispatcher(ToolView([Own()]))
    found = _message(await dispatcher.dispatch(tool_call("own", {"q": "dune"}, id="o1")))
    missing = _message(
        await dispatcher.dispatch(tool_call("own", {"q": "missing"}, id="o2"), round_number=2)
    )
    assert (found.content, found.is_error) == ('{"text": "dune"}', False)
    assert (missing.content, missing.is_error) == ("missing", True)
    [record] = dispatcher.failures
    assert (record.reason, record.tool, record.step_id) == ("not_found", "own", "o2")
    assert record.evidence["round"] == 2


def test_the_mcp_tools_meet_both_protocols() -> None:
    assert MCPTool.validates_arguments is True
    assert issubclass(McpToolOutput, ToolResultLike)
    assert ToolResult.of(McpToolOutput("gone", is_error=True, reason="not_found")) == (
        ToolResult.failure("not_found", "gone", labelled=False)
    )


def _typed(
    tool: MCPTool, output: McpToolOutput
) -> tuple[ToolLike, SelfValidatingTool, ToolResultLike]:
    """Never called: mypy checks that the MCP types meet the protocols statically."""
    return tool, tool, output


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": 1}, ToolResult.ok({"a": 1})),
        ("text", ToolResult.ok("text")),
        (None, ToolResult.ok(None)),
        (_Output("x"), ToolResult.ok({"text": "x"})),
        (ToolResult.failure("r", "m"), ToolResult.failure("r", "m")),
    ],
)
def test_tool_result_of(value: object, expected: ToolResult) -> None:
    assert ToolResult.of(value) == expected


def test_tool_view_of(registry: ToolRegistry) -> None:
    view = registry.view("lookup")
    assert ToolView.of(view) is view
    assert ToolView.of(registry).names == registry.names

    def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    assert ToolView.of([shout]).names == ("shout",)


# --------------------------------------------------------------------------- docs and layering


async def test_the_docs_dispatcher_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    [block] = [b for b in blocks if "ToolDispatcher(" in b]
    code = compile(block, "tool-loop.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, Any] = {}
    pending = eval(code, namespace)  # noqa: S307 -- our own documentation
    if pending is not None:
        await pending
    assert namespace["first"].content == "5"


def test_no_module_imports_another_modules_private_names() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("llamon_agent"):
                offenders += [
                    f"{path.relative_to(SRC)}: {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_")
                ]
    assert offenders == []
