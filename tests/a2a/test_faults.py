"""The server's opt-in to fault injection: the one reader of a request's plan
(``CustomAgentExecutor.fault_plan``), the executor run on its own, the loopback rule of
``serve`` and ``llamon serve``, and the startup warning."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.types import Message, MessageSendParams, Part, Role, TextPart
from a2a.utils.errors import ServerError

from llamon_agent.a2a import AgentContext
from llamon_agent.a2a.executor import CustomAgentExecutor
from llamon_agent.a2a.serve import ServeOptions, fault_injection_problem, serve_agent
from llamon_agent.a2a.server import create_app
from llamon_agent.core.faults import (
    FAULTS_METADATA_KEY,
    FaultPlan,
    ToolSlow,
    active_faults,
    fault_scope,
)
from llamon_agent.demo import demo_agent_path
from tests._support.a2a_server import make_card, running_server
from tests._support.serve import llamon_cli

ANY = "0.0.0.0"  # noqa: S104 - only asked about, never bound: refused before binding
PLAN = {"faults": [{"kind": "tool_timeout", "tool": "get_book"}], "guard": "plan"}


def _context(metadata: dict[str, Any] | None) -> RequestContext:
    message = Message(
        role=Role.user, parts=[Part(root=TextPart(text="x"))], message_id=str(uuid.uuid4())
    )
    return RequestContext(
        request=MessageSendParams(message=message, metadata=metadata),
        call_context=ServerCallContext(state={"method": "message/send"}),
    )


class Seen:
    """An agent that writes down the plan active while it runs."""

    def __init__(self) -> None:
        self.plans: list[FaultPlan | None] = []

    async def __call__(self, ctx: AgentContext) -> str:
        self.plans.append(active_faults())
        return "ok"


async def test_the_executor_on_its_own_applies_the_plan_of_the_metadata() -> None:
    seen = Seen()
    executor = CustomAgentExecutor(seen, allow_fault_injection=True)
    await executor.execute(_context({FAULTS_METADATA_KEY: PLAN}), EventQueue())
    [plan] = seen.plans
    assert plan is not None
    assert [(f.kind, f.target) for f in plan.faults] == [("tool_timeout", "get_book")]
    assert plan.guard == "plan"
    assert active_faults() is None  # left when the run ended


async def test_the_executor_ignores_the_plan_unless_allowed() -> None:
    seen = Seen()
    await CustomAgentExecutor(seen).execute(_context({FAULTS_METADATA_KEY: PLAN}), EventQueue())
    assert seen.plans == [None]
    assert CustomAgentExecutor(seen).fault_plan({FAULTS_METADATA_KEY: "not even a plan"}) is None


async def test_a_plan_already_active_is_kept_not_read_again() -> None:
    seen = Seen()
    outer = FaultPlan([ToolSlow(kind="tool_slow", tool="search_books", delay_ms=5)])
    executor = CustomAgentExecutor(seen, allow_fault_injection=True)
    with fault_scope(outer):
        await executor.execute(_context({FAULTS_METADATA_KEY: PLAN}), EventQueue())
    assert seen.plans == [outer]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "llamon.lab/faults must be an object"),
        ({"faults": [{"kind": "tool_boom", "tool": "x"}]}, "llamon.lab/faults.faults[0]"),
        ({"faults": [], "extra": 1}, "llamon.lab/faults: unknown field 'extra'"),
    ],
)
async def test_a_malformed_plan_is_invalid_input_with_its_problem(
    value: object, message: str
) -> None:
    seen = Seen()
    executor = CustomAgentExecutor(seen, allow_fault_injection=True)
    with pytest.raises(ServerError) as caught:
        executor.fault_plan({FAULTS_METADATA_KEY: value})
    error = caught.value.error
    assert error is not None
    assert error.code == -32602
    assert error.message is not None
    assert error.message.startswith(message)
    assert isinstance(error.data, dict)
    assert (error.data["errorCode"], error.data["errorReason"]) == (
        "INVALID_INPUT",
        "invalid_fault_plan",
    )
    with pytest.raises(ServerError):
        await executor.execute(_context({FAULTS_METADATA_KEY: value}), EventQueue())
    assert seen.plans == []  # refused before the agent ran


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.5"])
def test_loopback_may_serve_fault_injection(host: str) -> None:
    assert fault_injection_problem(host) is None


@pytest.mark.parametrize("host", [ANY, "10.1.2.3", "agents.example.com", "::"])
def test_any_other_address_is_refused_unless_forced(host: str) -> None:
    problem = fault_injection_problem(host)
    assert problem == (
        f"fault injection would listen on {host}, not on loopback: anyone reaching it could "
        "make its requests fail; serve on 127.0.0.1, or pass --force-fault-injection"
    )
    assert fault_injection_problem(host, force=True) is None


async def test_serve_agent_refuses_before_it_listens() -> None:
    options = ServeOptions(host=ANY, port=0, allow_fault_injection=True, store="memory")
    with pytest.raises(ValueError, match=r"^fault injection would listen on 0\.0\.0\.0,"):
        await serve_agent(Seen(), make_card(), options)


async def test_the_app_warns_at_startup_when_fault_injection_is_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = create_app(Seen(), make_card(), allow_fault_injection=True)
    with caplog.at_level(logging.WARNING, logger="llamon_agent.a2a"):
        async with running_server(app):
            pass
        async with running_server(create_app(Seen(), make_card())):
            pass
    warnings = [r.getMessage() for r in caplog.records if "fault injection" in r.getMessage()]
    assert warnings == [
        "fault injection is allowed: requests may carry a fault plan "
        f"(metadata {FAULTS_METADATA_KEY}); never run this in production"
    ]
    assert app.state.llamon_executor.allow_fault_injection is True


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (
            ("--host", ANY, "--allow-fault-injection"),
            "llamon serve: fault injection would listen on 0.0.0.0, not on loopback: anyone "
            "reaching it could make its requests fail; serve on 127.0.0.1, or pass "
            "--force-fault-injection.",
        ),
        (
            ("--force-fault-injection",),
            "llamon serve: --force-fault-injection needs --allow-fault-injection.",
        ),
    ],
)
async def test_llamon_serve_refuses_in_one_line(flags: tuple[str, ...], line: str) -> None:
    path = demo_agent_path()
    status, out, err = await llamon_cli(
        "serve", "--store", "memory", *flags, "--card", f"{path}:card", f"{path}:agent"
    )
    assert (status, out, err.strip()) == (2, "", line)
