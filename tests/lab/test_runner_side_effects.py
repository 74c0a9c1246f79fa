"""Cases that touch tools with side effects: plan mode, execute without cleanup (refused),
cleanup that works and cleanup that fails -- on a real LoopAgent whose tools count their
calls."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest

from llamon_agent.a2a.loop_agent import LoopAgent
from llamon_agent.lab import Case
from llamon_agent.lab.results import CleanupResult
from llamon_agent.lab.runner import Lab, run_cases
from llamon_agent.loop import ToolRegistry, tool
from llamon_agent.loop.model import (
    ChatMessage,
    ModelResponse,
    RawToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)

NOTES: list[str] = []
CALLS: dict[str, int] = {}


@tool(mutating=True)
def add_note(text: str) -> str:
    """Add a note."""
    CALLS["add_note"] = CALLS.get("add_note", 0) + 1
    NOTES.append(text)
    return f"added {text!r}"


@tool(mutating=True)
def delete_note(text: str) -> str:
    """Delete a note."""
    CALLS["delete_note"] = CALLS.get("delete_note", 0) + 1
    if text not in NOTES:
        raise LookupError(f"no note {text!r}")
    NOTES.remove(text)
    return f"deleted {text!r}"


@tool
def count_notes() -> int:
    """How many notes there are."""
    CALLS["count_notes"] = CALLS.get("count_notes", 0) + 1
    return len(NOTES)


class NotesModel:
    """``add note X`` -> add_note(X); ``count`` -> count_notes(); then answers with the
    last tool message."""

    name = "notes-rules"

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        start = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
        results = [m for m in messages[start:] if isinstance(m, ToolMessage)]
        if results:
            return ModelResponse(content=f"done: {results[-1].content}")
        text = messages[start].content or ""
        added = re.match(r"add note (\w+)", text)
        if added is not None:
            arguments = json.dumps({"text": added.group(1)})
            return ModelResponse(tool_calls=(RawToolCall("c1", "add_note", arguments),))
        return ModelResponse(tool_calls=(RawToolCall("c1", "count_notes", "{}"),))


AGENT = LoopAgent(NotesModel(), ToolRegistry([add_note, delete_note, count_notes]))


@pytest.fixture(autouse=True)
def fresh_notes() -> None:
    NOTES.clear()
    CALLS.clear()


def case(**fields: Any) -> Case:
    return Case.model_validate({"name": "c", **fields})


@pytest.mark.reason("side_effect_not_run")
async def test_a_plan_case_stops_before_a_tool_with_side_effects() -> None:
    (result,) = (
        await run_cases(
            AGENT,
            [
                case(
                    mode="plan",
                    query="add note milk",
                    assertions={
                        "selected_target": "add_note",
                        "final_state": "failed",
                        "artifact_contains": "never there",
                    },
                )
            ],
        )
    ).results
    assert CALLS.get("add_note", 0) == 0
    assert NOTES == []
    assert result.passed, result.message
    assert result.stopped_before == "add_note"
    assert [(s.tool, s.ok, s.reason) for s in result.steps] == [
        ("add_note", False, "side_effect_not_run")
    ]
    notes = {item.name: (item.passed, item.message) for item in result.assertions}
    assert notes["final_state"] == (True, "not checked: plan mode stopped before add_note")
    assert notes["artifact_contains"] == (True, "not checked: plan mode stopped before add_note")
    assert notes["selected_target"] == (True, "")


async def test_a_plan_case_runs_tools_without_side_effects() -> None:
    (result,) = (
        await run_cases(
            AGENT,
            [case(mode="plan", query="count", assertions={"artifact_contains": "done: 0"})],
        )
    ).results
    assert result.passed, result.message
    assert result.stopped_before is None
    assert CALLS == {"count_notes": 1}


@pytest.mark.reason("cleanup_not_configured")
async def test_an_execute_case_without_cleanup_is_refused_at_the_tool_with_side_effects() -> None:
    async with Lab(AGENT) as lab:
        refused = await lab.run_case(case(mode="execute", query="add note milk"))
        after = await lab.run_case(case(mode="execute", query="count"))
    assert CALLS.get("add_note", 0) == 0
    assert NOTES == []
    assert refused.outcome == "refused"
    assert refused.lab_reason == "cleanup_not_configured"
    assert refused.message == (
        "tool add_note has side effects and the case has no cleanup: it was not run "
        "(add 'cleanup' steps, or make the case mode: plan)"
    )
    assert refused.reason_shown == "cleanup_not_configured"
    assert after.passed  # a case that touches no side effect runs without cleanup


async def test_an_execute_case_with_cleanup_runs_and_is_cleaned_up() -> None:
    (result,) = (
        await run_cases(
            AGENT,
            [
                case(
                    mode="execute",
                    query="add note milk",
                    assertions={"final_state": "completed", "artifact_contains": "added 'milk'"},
                    cleanup=[{"tool": "delete_note", "arguments": {"text": "milk"}}],
                )
            ],
        )
    ).results
    assert result.passed, result.message
    assert CALLS == {"add_note": 1, "delete_note": 1}
    assert NOTES == []
    assert result.cleanup == [CleanupResult("delete_note", True)]


@pytest.mark.reason("cleanup_failed")
@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ({"tool": "delete_note", "arguments": {"text": "eggs"}}, ("delete_note", "tool_error")),
        ({"tool": "no_such_tool"}, ("no_such_tool", "unknown_tool")),
    ],
)
async def test_a_cleanup_that_fails_fails_the_case(
    step: dict[str, Any], expected: tuple[str, str]
) -> None:
    async with Lab(AGENT) as lab:
        result = await lab.run_case(
            case(
                mode="execute",
                query="add note milk",
                assertions={"final_state": "completed"},
                cleanup=[step],
            )
        )
        after = await lab.run_case(case(mode="execute", query="count"))
    assert result.outcome == "failed"
    assert result.lab_reason == "cleanup_failed"
    tool_name, reason = expected
    assert result.cleanup == [CleanupResult(tool_name, False, reason)]
    assert result.message == (
        f"cleanup failed: {tool_name} ({reason}); the agent's state may not be restored"
    )
    assert after.passed


async def test_cleanup_tools_can_be_given_for_an_agent_that_is_not_a_loop_agent() -> None:
    async def agent(ctx: Any) -> str:
        return "nothing to do"

    (result,) = (
        await run_cases(
            agent,
            [case(mode="execute", query="x", cleanup=[{"tool": "count_notes"}])],
            cleanup_tools=[count_notes],
        )
    ).results
    assert result.cleanup == [CleanupResult("count_notes", True)]
    assert result.passed
