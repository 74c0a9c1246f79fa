"""The Quality Lab over A2A (``Lab(url=...)``): real servers on 127.0.0.1, what a case sees.

Llamon servers made with ``create_app`` (with and without an event bus, with and without
fault injection, behind an API key), a ``llamon serve`` subprocess on SQLite, and plain
a2a-sdk servers (``DefaultRequestHandler`` with an ``AgentExecutor`` of this module).
Where each case's steps come from (``event_source``) is asserted every time, and after
every failure the next case against the same ``Lab`` is answered.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import AgentCard

from llamon_agent.a2a.agent import AgentContext, AgentOutput
from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.card import AuthSpec, build_agent_card, skill
from llamon_agent.a2a.loop_agent import LoopAgent
from llamon_agent.a2a.server import create_app
from llamon_agent.client.auth import ApiKey
from llamon_agent.core.events import EventBus
from llamon_agent.examples.bookshop_agent import agent as bookshop_agent
from llamon_agent.examples.bookshop_agent import card as bookshop_card
from llamon_agent.lab import Case, load_cases
from llamon_agent.lab.results import CaseResult
from llamon_agent.lab.runner import Lab
from llamon_agent.loop import ToolRegistry
from llamon_agent.loop.model import (
    ChatMessage,
    ModelResponse,
    RawToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from llamon_agent.loop.tools import tool
from tests._support.a2a_server import make_card, running_server
from tests._support.plain_agent import PlainAgent, plain_app
from tests._support.serve import llamon_serve

SAMPLES = Path(__file__).parents[3] / "docs" / "lab-cases"
GIBSON = "Which books by William Gibson do you have?"
DUNE = "Tell me about Dune."
KEY = "lab-url-key-5f0c2a9d71"
DROP = {"kind": "mcp_connection_drop", "server": "Bookshop", "after_calls": 0}
NOT_ACCEPTED = (
    "the agent does not accept fault injection (its card does not declare "
    "https://llamon.dev/extensions/lab-faults/v1); serve it with --allow-fault-injection, "
    "on 127.0.0.1, to run cases with faults or in plan mode"
)
CANNOT_BE_CHECKED = (
    "cannot be checked: the agent offers no event stream and the task has no tool_results artifact"
)


def case(**fields: Any) -> Case:
    fields.setdefault("mode", "execute")
    return Case.model_validate(fields)


def steps(result: CaseResult) -> list[tuple[str, bool, str | None]]:
    return [(step.tool, step.ok, step.reason) for step in result.steps]


def failed(result: CaseResult) -> dict[str, str]:
    return {item.name: item.message for item in result.failed_assertions}


BY_AUTHOR = case(
    name="by-author",
    query=GIBSON,
    assertions={
        "selected_target": "search_books",
        "final_state": "completed",
        "artifact_contains": "Neuromancer",
        "max_rounds": 2,
    },
)


async def still_answered(lab: Lab) -> None:
    """The next case against the same lab is answered (and passes)."""
    after = await lab.run_case(
        case(name="next", query=GIBSON, assertions={"artifact_contains": "Neuromancer"})
    )
    assert after.passed, after.message
    assert after.final_state == "completed"


class Counted:
    """The bookshop agent, counting the runs it was asked for."""

    def __init__(self) -> None:
        self.runs = 0

    async def __call__(self, ctx: AgentContext) -> AgentOutput:
        self.runs += 1
        return await bookshop_agent(ctx)


@asynccontextmanager
async def llamon_server(
    agent: object = bookshop_agent,
    card: AgentCard = bookshop_card,
    *,
    events: bool = True,
    allow: bool = True,
    key: str | None = None,
) -> AsyncIterator[str]:
    """``agent`` served by ``create_app`` on 127.0.0.1; its base URL."""
    app = create_app(
        agent,
        card,
        events=EventBus() if events else None,
        allow_fault_injection=allow,
        auth=AuthConfig.from_card(card, key) if key is not None else None,
    )
    async with running_server(app) as url:
        yield url


# -- a llamon server with an event bus --------------------------------------------------


async def test_steps_and_the_selected_tool_come_from_the_task_event_stream() -> None:
    misspelt = case(
        name="misspelt",
        query='How much is "Dunes"?',
        assertions={"selected_target": "search_books", "max_rounds": 2},
    )
    async with llamon_server() as url, Lab(url=url) as lab:
        found = await lab.run_case(BY_AUTHOR)
        wrong = await lab.run_case(misspelt)
        await still_answered(lab)
    assert found.passed, found.message
    assert found.event_source == "event_stream"
    assert found.selected_target == "search_books"
    assert found.rounds == 2
    assert steps(found) == [("search_books", True, None)]
    types = [event["type"] for event in found.events]
    assert (types[0], types[-1]) == ("task.submitted", "task.completed")
    assert {event["task_id"] for event in found.events} == {found.task_id}
    assert wrong.event_source == "event_stream"
    assert failed(wrong) == {
        "selected_target": "selected 'get_book' first",
        "max_rounds": "took 4 rounds",
    }
    assert steps(wrong) == [
        ("get_book", False, "tool_error"),
        ("search_books", True, None),
        ("get_book", True, None),
    ]


@pytest.mark.reason("connection_closed")
async def test_an_mcp_connection_drop_is_injected_over_a2a_and_read_from_the_stream() -> None:
    dropped = case(
        name="drop",
        query=DUNE,
        faults=[DROP],
        assertions={
            "selected_target": "get_book",
            "final_state": "failed",
            "error_code": "UPSTREAM_UNAVAILABLE",
            "allowed_failure_reasons": ["connection_closed"],
            "uncaught_server_error": False,
        },
    )
    async with llamon_server() as url, Lab(url=url) as lab:
        result = await lab.run_case(dropped)
        await still_answered(lab)  # the fault was this request's only
    assert result.passed, result.message
    assert result.event_source == "event_stream"
    assert (result.final_state, result.error_code, result.failure_reason) == (
        "failed",
        "UPSTREAM_UNAVAILABLE",
        "connection_closed",
    )
    assert result.failure is not None
    assert (result.failure["retriable"], result.failure["message"]) == (
        True,
        "Upstream tool 'get_book' failed 3 times in this request (connection_closed); giving up.",
    )
    assert result.incident_id is None
    # three calls dropped: two strikes came back to the model, the third ended the run
    assert result.faults_fired == {"mcp_connection_drop:Bookshop": 3}
    fired = [e for e in result.events if e["type"] == "lab.fault_injected"]
    assert [e["trace_metadata"] for e in fired] == [
        {"fault": "mcp_connection_drop", "target": "Bookshop"}
    ] * 3
    assert steps(result) == [("get_book", False, "upstream_tool_unavailable")] * 2 + [
        ("get_book", False, "connection_closed")  # the call that ended the run
    ]
    assert result.rounds == 3
    assert result.triage is not None
    assert result.triage["reason"] == "connection_closed"


async def test_a_wrong_fault_assertion_fails_with_what_happened() -> None:
    dropped = case(
        name="drop-expected-ok",
        query=DUNE,
        faults=[DROP],
        assertions={"final_state": "completed", "allowed_failure_reasons": ["tool_error"]},
    )
    async with llamon_server() as url, Lab(url=url) as lab:
        result = await lab.run_case(dropped)
        await still_answered(lab)
    assert result.outcome == "failed"
    assert failed(result) == {
        "allowed_failure_reasons": (
            "failed with reason 'connection_closed', not one of the allowed reasons"
        ),
        "final_state": "ended failed",
    }
    assert result.message == (
        "allowed_failure_reasons: failed with reason 'connection_closed', not one of the "
        "allowed reasons; final_state: ended failed"
    )


async def test_the_tool_guard_travels_over_a2a_plan_and_no_cleanup() -> None:
    order = "Order two copies of Snow Crash"
    planned = case(
        name="plan-order",
        mode="plan",
        query=order,
        assertions={"selected_target": "order_book", "final_state": "failed"},
    )
    async with llamon_server() as url, Lab(url=url) as lab:
        plan = await lab.run_case(planned)
        unguarded = await lab.run_case(case(name="order", query=order))
        await still_answered(lab)
    assert plan.passed, plan.message
    assert plan.stopped_before == "order_book"
    assert steps(plan) == [("order_book", False, "side_effect_not_run")]
    (state,) = [item for item in plan.assertions if item.name == "final_state"]
    assert (state.passed, state.message) == (
        True,
        "not checked: plan mode stopped before order_book",
    )
    assert (unguarded.outcome, unguarded.lab_reason) == ("refused", "cleanup_not_configured")
    assert unguarded.message == (
        "tool order_book has side effects and the case has no cleanup: it was not run "
        "(add 'cleanup' steps, or make the case mode: plan)"
    )
    assert steps(unguarded) == [("order_book", False, "cleanup_not_configured")]


@pytest.mark.reason("database_unavailable")
async def test_the_task_store_fails_once_under_llamon_serve_then_the_next_case_passes(
    tmp_path: Path,
) -> None:
    hiccup = case(
        name="store-hiccup",
        query="hello",
        faults=[{"kind": "task_store_fails_once"}],
        assertions={
            "error_code": "UPSTREAM_UNAVAILABLE",
            "allowed_failure_reasons": ["database_unavailable"],
            "uncaught_server_error": False,
        },
    )
    hello = case(
        name="hello",
        query="hello",
        assertions={"final_state": "completed", "artifact_contains": "Hello! You said: hello"},
    )
    flags = ("--store", "sqlite", "--allow-fault-injection")
    async with llamon_serve(tmp_path, *flags) as (_, url), Lab(url=url) as lab:
        failed_once = await lab.run_case(hiccup)
        after = await lab.run_case(hello)
        samples = await lab.run(load_cases(SAMPLES / "demo-agent.json"))
    assert failed_once.passed, failed_once.message
    # the store failed before a task existed: the request was answered with an error
    assert (failed_once.task_id, failed_once.final_state) == (None, None)
    assert (failed_once.error_code, failed_once.failure_reason) == (
        "UPSTREAM_UNAVAILABLE",
        "database_unavailable",
    )
    assert failed_once.failure is not None
    assert (failed_once.failure["retriable"], failed_once.failure["jsonrpcCode"]) == (True, -32603)
    assert "locked" not in json.dumps(failed_once.failure)  # the store's own text stayed
    assert failed_once.event_source == "none"
    assert after.passed, after.message
    assert after.event_source == "event_stream"  # llamon serve offers the stream
    assert [event["type"] for event in after.events][-1] == "task.completed"
    assert samples.ok, [r.message for r in samples.results if not r.passed]
    assert len(samples.results) == 6


# -- a llamon server without fault injection ------------------------------------------


async def test_without_fault_injection_faults_and_plan_cases_are_refused_unsent() -> None:
    agent = Counted()
    planned = case(name="plan", mode="plan", query=GIBSON)
    async with llamon_server(agent, allow=False) as url, Lab(url=url) as lab:
        with_faults = await lab.run_case(case(name="drop", query=DUNE, faults=[DROP]))
        plan = await lab.run_case(planned)
        assert agent.runs == 0  # neither was sent
        plain = await lab.run_case(BY_AUTHOR)
        assert agent.runs == 1
    for refused in (with_faults, plan):
        assert (refused.outcome, refused.message) == ("refused", NOT_ACCEPTED)
        assert (refused.task_id, refused.final_state, refused.lab_reason) == (None, None, None)
        assert refused.assertions == []
    assert with_faults.faults == [DROP]
    assert plain.passed, plain.message
    assert plain.event_source == "event_stream"


# -- a llamon server without an event bus ---------------------------------------------


async def test_without_an_event_stream_a_failed_task_gives_its_tool_results_artifact() -> None:
    dropped = case(
        name="drop",
        query=DUNE,
        faults=[DROP],
        assertions={"selected_target": "get_book", "max_rounds": 3},
    )
    async with llamon_server(events=False) as url, Lab(url=url) as lab:
        result = await lab.run_case(dropped)
        done = await lab.run_case(BY_AUTHOR)
        answered = await lab.run_case(case(name="plain", query=GIBSON))
    assert result.passed, result.message
    assert result.event_source == "tool_results_artifact"
    assert result.events == []
    assert result.faults_fired == {}  # only the event stream tells which faults fired
    assert steps(result) == [
        ("get_book", False, "upstream_tool_unavailable"),
        ("get_book", False, "upstream_tool_unavailable"),
        ("get_book", False, "connection_closed"),
    ]
    assert result.rounds == 3
    # a completed task has no tool_results artifact: the steps are nowhere
    assert done.event_source == "none"
    assert done.outcome == "failed"
    assert failed(done) == {"selected_target": CANNOT_BE_CHECKED, "max_rounds": CANNOT_BE_CHECKED}
    assert [item.name for item in done.assertions if item.passed] == [
        "uncaught_server_error",
        "final_state",
        "artifact_contains",
    ]
    assert answered.passed
    assert answered.final_state == "completed"


# -- plain a2a-sdk servers --------------------------------------------------------------


async def _plain_or_fail(text: str) -> str | None:
    """``plain <text>``; ``fail`` fails the task with no status message (no error data)."""
    return None if text == "fail" else f"plain {text}"


@pytest.mark.reason("remote_task_failed")
async def test_a_plain_a2a_agent_completes_and_fails_without_error_data() -> None:
    executor = PlainAgent(_plain_or_fail)
    app = plain_app(executor)
    ok = case(
        name="ok",
        query="hi",
        assertions={"final_state": "completed", "artifact_contains": "plain hi"},
    )
    fails = case(
        name="fails",
        query="fail",
        assertions={
            "final_state": "failed",
            "error_code": "INTERNAL_ERROR",
            "allowed_failure_reasons": ["remote_task_failed"],
            "uncaught_server_error": False,
        },
    )
    async with running_server(app) as url, Lab(url=url) as lab:
        completed = await lab.run_case(ok)
        failure = await lab.run_case(fails)
        picked = await lab.run_case(
            case(name="pick", query="hi", assertions={"selected_target": "x"})
        )
        again = await lab.run_case(ok)
    assert completed.passed, completed.message
    assert completed.artifact_texts == ["plain hi"]
    assert completed.event_source == "none"  # a plain server has no event stream
    assert failure.passed, failure.message
    assert (failure.final_state, failure.error_code, failure.failure_reason) == (
        "failed",
        "INTERNAL_ERROR",
        "remote_task_failed",
    )
    assert failure.incident_id is None  # not a server crash: no incident, not "uncaught"
    assert failure.failure == {
        "errorCode": "INTERNAL_ERROR",
        "errorReason": "remote_task_failed",
        "message": "the called agent ended the task failed",
        "retriable": False,
    }
    assert failure.triage is not None
    assert failure.triage["reason"] == "remote_task_failed"
    assert failed(picked) == {"selected_target": CANNOT_BE_CHECKED}
    assert again.passed
    assert executor.runs == 4


# -- an agent behind an API key -----------------------------------------------------------


def keyed_card() -> AgentCard:
    return build_agent_card(
        name="keyed-bookshop",
        description="Finds books for callers with the bookshop's API key.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        input_modes=("text/plain",),
        skills=[skill("books", "Find books", "Searches the catalog.", tags=["books"])],
        auth=AuthSpec.api_key(),
    )


async def test_an_agent_behind_an_api_key() -> None:
    keyed = keyed_card()
    async with llamon_server(card=keyed, key=KEY) as url:
        async with Lab(url=url, auth=ApiKey(KEY)) as lab:
            result = await lab.run_case(BY_AUTHOR)
            dropped = await lab.run_case(case(name="drop", query=DUNE, faults=[DROP]))
            await still_answered(lab)
        async with Lab(url=url) as anonymous:
            without = await anonymous.run_case(case(name="no-key", query=GIBSON))
            again = await anonymous.run_case(case(name="no-key-again", query=GIBSON))
        async with Lab(url=url, auth=ApiKey("not-the-key")) as wrong_key:
            wrong = await wrong_key.run_case(case(name="wrong-key", query=GIBSON))
        async with httpx.AsyncClient() as http:  # the event stream needs the key too
            stream = await http.get(f"{url}/tasks/{result.task_id}/events")
    assert result.passed, result.message
    assert result.event_source == "event_stream"  # the key went with the stream's request
    assert result.selected_target == "search_books"
    assert dropped.event_source == "event_stream", dropped.to_dict()
    assert dropped.faults_fired == {"mcp_connection_drop:Bookshop": 3}
    assert stream.status_code == 401
    # without the key: the card's own words, not an internal error
    assert (without.final_state, without.task_id) == (None, None)
    assert (without.error_code, without.failure_reason) == ("AUTH_REQUIRED", "credentials_required")
    assert without.failure is not None
    assert without.failure["message"] == "This agent requires an API key in the 'X-API-Key' header."
    assert (without.failure["httpStatus"], without.failure["jsonrpcCode"]) == (401, -32040)
    assert without.passed  # only uncaught_server_error (false) was asserted: it holds
    assert again.error_code == "AUTH_REQUIRED"
    assert (wrong.error_code, wrong.failure_reason) == ("AUTH_REQUIRED", "invalid_credentials")
    assert wrong.failure is not None
    assert wrong.failure["message"] == "The API key is not valid."
    assert KEY not in json.dumps([r.to_dict() for r in (result, without, wrong)])
    assert "not-the-key" not in json.dumps(wrong.to_dict())


# -- local tools with side effects, and cleanup, over A2A ----------------------------------


class OrderModel:
    """Asks for ``place_order`` with the request's text as the title, then answers with
    the tool's result."""

    name = "order-rules"

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        start = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
        results = [m for m in messages[start:] if isinstance(m, ToolMessage)]
        if not results:
            title = messages[start].content or ""
            call = RawToolCall("call_1", "place_order", json.dumps({"title": title}))
            return ModelResponse(tool_calls=(call,))
        return ModelResponse(content=f"done: {results[-1].content}")


async def test_cleanup_runs_after_an_execute_case_sent_over_a2a() -> None:
    orders: list[str] = []

    @tool(mutating=True)
    async def place_order(title: str) -> str:
        """Place an order."""
        orders.append(title)
        return f"ordered {title}"

    @tool(mutating=True)
    async def cancel_order(title: str) -> str:
        """Cancel an order."""
        orders.remove(title)
        return f"cancelled {title}"

    registry = ToolRegistry([place_order, cancel_order])
    agent = LoopAgent(OrderModel(), registry)
    cleaned = case(
        name="order-and-cancel",
        query="Dune",
        cleanup=[{"tool": "cancel_order", "arguments": {"title": "Dune"}}],
        assertions={"selected_target": "place_order", "artifact_contains": "ordered Dune"},
    )
    broken = case(
        name="cleanup-unknown",
        query="Emma",
        cleanup=[{"tool": "no_such_tool", "arguments": {}}],
    )
    async with (
        llamon_server(agent, make_card()) as url,
        Lab(url=url, cleanup_tools=registry) as lab,
    ):
        unguarded = await lab.run_case(case(name="no-cleanup", query="Dune"))
        assert orders == []  # refused by the server's guard: nothing was ordered
        result = await lab.run_case(cleaned)
        assert orders == []  # ordered over A2A, cancelled by the cleanup step
        bad = await lab.run_case(broken)
        after = await lab.run_case(case(name="plan", mode="plan", query="Emma"))
    assert (unguarded.outcome, unguarded.lab_reason) == ("refused", "cleanup_not_configured")
    assert result.passed, result.message
    assert [(c.tool, c.ok) for c in result.cleanup] == [("cancel_order", True)]
    assert (bad.outcome, bad.lab_reason) == ("failed", "cleanup_failed")
    assert bad.message == (
        "cleanup failed: no_such_tool (unknown_tool); the agent's state may not be restored"
    )
    assert orders == ["Emma"]  # the failed cleanup left the order in place
    assert after.passed, after.message
    assert after.stopped_before == "place_order"


# -- the sample bookshop cases (tool, model and MCP faults, plan mode) over A2A ------------


async def test_the_sample_bookshop_cases_pass_over_a2a_as_they_do_in_process() -> None:
    cases = load_cases(SAMPLES / "bookshop.yaml")
    async with llamon_server() as url, Lab(url=url) as lab:
        report = await lab.run(cases, concurrency=3)
        await still_answered(lab)
    assert report.ok, [(r.case, r.message) for r in report.results if not r.passed]
    found = {result.case: result for result in report.results}
    assert {result.event_source for result in report.results} == {"event_stream"}
    assert found["bookshop-slow-lookup-still-answers"].faults_fired == {"tool_slow:get_book": 1}
    assert found["bookshop-slow-lookup-still-answers"].duration_ms >= 1500
    busy = found["bookshop-busy-model-says-when-to-retry"]
    assert (busy.error_code, busy.failure_reason) == ("RATE_LIMITED", "rate_limited")
    assert busy.faults_fired == {"model_rate_limited": 1}
    assert busy.failure is not None
    assert (busy.failure["retriable"], busy.failure["retryAfterMs"]) == (True, 2000)
    assert found["bookshop-order-is-planned-not-placed"].stopped_before == "order_book"
    assert found["bookshop-connection-drops"].faults_fired == {"mcp_connection_drop:Bookshop": 3}
