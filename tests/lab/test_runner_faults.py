"""Every fault kind injected by a lab case in process, and what the case then sees: the
bookshop agent (a tool loop over the bookshop MCP server) for tool, model and MCP faults,
an agent calling a plain a2a-sdk agent for downstream faults, and the task store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.utils import new_agent_text_message

from llamon_agent.a2a.agent import AgentContext, AgentOutput
from llamon_agent.client import AgentClient, FinalEvent, RetryPolicy, clear_card_cache
from llamon_agent.examples import demo_agent
from llamon_agent.examples.bookshop_agent import agent as bookshop_agent
from llamon_agent.examples.bookshop_agent import card as bookshop_card
from llamon_agent.lab import Case
from llamon_agent.lab.results import CaseResult
from llamon_agent.lab.runner import Lab
from tests._support.a2a_server import make_card, running_server
from tests._support.plain_agent import PlainAgent, plain_app

BOOK = "Is Neuromancer in stock?"


def case(faults: list[dict[str, Any]], **fields: Any) -> Case:
    return Case.model_validate(
        {"name": "c", "mode": "execute", "query": BOOK, "faults": faults, **fields}
    )


async def bookshop(*cases: Case) -> list[CaseResult]:
    async with Lab(bookshop_agent, card=bookshop_card) as lab:
        results = [await lab.run_case(item) for item in cases]
        after = await lab.run_case(case([], assertions={"final_state": "completed"}))
    assert after.passed, after.message  # a fault never outlives its case
    return results


def steps(result: CaseResult) -> list[tuple[str, str | None]]:
    return [(step.tool, step.reason) for step in result.steps]


async def test_tool_timeout_strikes_three_times_then_ends_upstream_timeout() -> None:
    (result,) = await bookshop(
        case(
            [{"kind": "tool_timeout", "tool": "get_book"}],
            assertions={"error_code": "UPSTREAM_TIMEOUT", "allowed_failure_reasons": ["timeout"]},
        )
    )
    assert result.passed, result.message
    assert steps(result) == [
        ("get_book", "upstream_tool_unavailable"),
        ("get_book", "upstream_tool_unavailable"),
        ("get_book", "timeout"),  # the third call never came back: it ended the run
    ]
    assert result.faults_fired == {"tool_timeout:get_book": 3}


async def test_tool_raises_is_an_unmapped_server_error_without_its_text() -> None:
    (result,) = await bookshop(
        case(
            [{"kind": "tool_raises", "tool": "get_book", "message": "s3cret-detail"}],
            assertions={"uncaught_server_error": True},
        )
    )
    assert result.passed, result.message
    assert result.error_code == "INTERNAL_ERROR"
    assert result.incident_id is not None
    shown = [result.failure, result.message, result.artifact_texts, result.events]
    assert "s3cret-detail" not in str(shown)  # only the case's own fault names it


async def test_tool_error_comes_back_to_the_model_and_the_run_completes() -> None:
    (result,) = await bookshop(
        case(
            [{"kind": "tool_error", "tool": "get_book", "message": "catalog is being updated"}],
            assertions={"final_state": "completed", "artifact_contains": "did not work"},
        )
    )
    assert result.passed, result.message
    assert steps(result) == [("get_book", "tool_error")]


async def test_tool_slow_makes_the_run_take_longer() -> None:
    (result,) = await bookshop(
        case(
            [{"kind": "tool_slow", "tool": "get_book", "delay_ms": 300}],
            assertions={"final_state": "completed", "max_duration_ms": 200},
        )
    )
    assert result.outcome == "failed"
    assert [item.name for item in result.failed_assertions] == ["max_duration_ms"]
    assert result.duration_ms >= 300


async def test_malformed_json_from_the_model_is_read_back_and_the_run_recovers() -> None:
    (result,) = await bookshop(
        case(
            [{"kind": "model_malformed_json"}],
            assertions={"final_state": "completed", "artifact_contains": "Neuromancer"},
        )
    )
    assert result.passed, result.message
    assert steps(result)[0] == ("search_books", "malformed_arguments")


@pytest.mark.parametrize(
    ("fault", "code", "reason"),
    [
        ({"kind": "model_empty_answer"}, "UPSTREAM_UNAVAILABLE", "invalid_model_response"),
        ({"kind": "model_rate_limited", "retry_after_ms": 1500}, "RATE_LIMITED", "rate_limited"),
        ({"kind": "model_server_error", "status": 502}, "UPSTREAM_UNAVAILABLE", "http_5xx"),
    ],
)
async def test_model_failures_end_the_task_with_their_code(
    fault: dict[str, Any], code: str, reason: str
) -> None:
    (result,) = await bookshop(
        case([fault], assertions={"final_state": "failed", "error_code": code})
    )
    assert result.passed, result.message
    assert result.failure_reason == reason
    assert result.faults_fired == {fault["kind"]: 1}
    if fault["kind"] == "model_rate_limited":
        assert result.failure is not None
        assert result.failure["retryAfterMs"] == 1500


async def test_an_mcp_connection_that_drops_after_one_call() -> None:
    (result,) = await bookshop(
        Case.model_validate(
            {
                "name": "drop",
                "mode": "execute",
                "query": 'How much is "Dunes"?',  # get_book fails, search_books, get_book
                "faults": [{"kind": "mcp_connection_drop", "server": "Bookshop", "after_calls": 1}],
                "assertions": {
                    "error_code": "UPSTREAM_UNAVAILABLE",
                    "allowed_failure_reasons": ["connection_closed"],
                },
            }
        )
    )
    assert result.passed, result.message
    assert steps(result) == [
        ("get_book", "tool_error"),  # the one call before the drop reached the server
        ("search_books", "upstream_tool_unavailable"),
        ("get_book", "upstream_tool_unavailable"),
        ("get_book", "upstream_tool_unavailable"),
        ("get_book", "connection_closed"),  # the third strike of get_book ends the task
    ]
    assert result.faults_fired == {"mcp_connection_drop:Bookshop": 4}


async def test_the_task_store_failing_once_is_a_retriable_database_error() -> None:
    async with Lab(demo_agent.agent, card=demo_agent.card) as lab:
        hiccup = await lab.run_case(
            Case.model_validate(
                {
                    "name": "store",
                    "mode": "execute",
                    "query": "hello",
                    "faults": [{"kind": "task_store_fails_once"}],
                    "assertions": {"error_code": "UPSTREAM_UNAVAILABLE"},
                }
            )
        )
        after = await lab.run_case(
            Case.model_validate({"name": "next", "mode": "execute", "query": "hello"})
        )
    assert hiccup.passed, hiccup.message
    assert hiccup.failure_reason == "database_unavailable"
    assert hiccup.failure is not None
    assert hiccup.failure["retriable"] is True
    assert after.passed


class Downstream(AgentExecutor):
    """A plain a2a-sdk agent (not llamon) that answers ``stock: 3``."""

    def __init__(self) -> None:
        self.runs = 0

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.runs += 1
        await event_queue.enqueue_event(new_agent_text_message("stock: 3"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


@pytest.fixture
async def downstream() -> AsyncIterator[tuple[str, Downstream]]:
    clear_card_cache()
    executor = Downstream()
    card = make_card().model_copy(update={"name": "inventory"})
    app = plain_app(executor, card=card)
    async with running_server(app) as url:
        yield url, executor


def caller(url: str) -> Any:
    async def agent(ctx: AgentContext) -> AgentOutput:
        retry = RetryPolicy(max_attempts=2, base_delay=0.0, max_delay=0.0)
        async with AgentClient(url, retry=retry) as client:
            answer = await client.send(ctx.text)
        return f"inventory says {answer.text}"

    return agent


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("downstream_unavailable", "http_5xx"), ("downstream_failed", "a2a_upstream_error")],
)
async def test_a_downstream_agent_that_fails(
    downstream: tuple[str, Downstream], kind: str, reason: str
) -> None:
    url, executor = downstream
    async with Lab(caller(url)) as lab:
        failed = await lab.run_case(
            Case.model_validate(
                {
                    "name": "down",
                    "mode": "execute",
                    "query": "stock?",
                    "faults": [{"kind": kind, "agent": "inventory"}],
                    "assertions": {"final_state": "failed", "error_code": "UPSTREAM_UNAVAILABLE"},
                }
            )
        )
        after = await lab.run_case(
            Case.model_validate(
                {
                    "name": "next",
                    "mode": "execute",
                    "query": "stock?",
                    "assertions": {"artifact_contains": "inventory says stock: 3"},
                }
            )
        )
    assert failed.passed, failed.message
    assert failed.failure_reason == reason
    assert failed.faults_fired == {f"{kind}:inventory": 2 if kind.endswith("unavailable") else 1}
    assert after.passed, after.message
    assert executor.runs == 1  # the faulted calls never reached it


async def _stock(text: str) -> str:
    return "stock: 3"


async def test_a_downstream_stream_that_drops_is_recovered() -> None:
    clear_card_cache()
    card = make_card().model_copy(update={"name": "inventory"})
    app = plain_app(PlainAgent(_stock), card=card)

    async with running_server(app) as url:

        async def streaming_caller(ctx: AgentContext) -> AgentOutput:
            async with AgentClient(url) as client:
                async for event in client.stream(ctx.text):
                    if isinstance(event, FinalEvent):
                        return f"inventory says {event.result.text}"
            return "no answer"

        async with Lab(streaming_caller) as lab:
            result = await lab.run_case(
                Case.model_validate(
                    {
                        "name": "drop",
                        "mode": "execute",
                        "query": "stock?",
                        "faults": [
                            {
                                "kind": "downstream_stream_drop",
                                "agent": "inventory",
                                "after_events": 2,
                            }
                        ],
                        "assertions": {
                            "final_state": "completed",
                            "artifact_contains": "inventory says stock: 3",
                        },
                    }
                )
            )
    assert result.passed, result.message
    assert result.faults_fired == {"downstream_stream_drop:inventory": 1}
