"""Two real llamon agents on 127.0.0.1, one failing with a known errorCode: best_effort
returns one success and one typed failure carrying that errorCode, all_or_nothing raises it,
and the failing agent answers the next request. An agent whose saga fails answers its
caller with the failing step's errorCode."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import pytest
from a2a.client import Client
from a2a.types import TaskState

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import (
    Saga,
    StepContext,
    all_or_nothing,
    best_effort,
    saga_step,
)
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.exceptions import LlamonApplicationError
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    texts,
    user_message,
)


class Echo:
    """Answers every question."""

    async def invoke(self, ctx: AgentContext) -> str:
        return f"echo: {ctx.text}"


class OutOfQuota:
    """Fails ``fail`` with RATE_LIMITED (retry after 2 s); answers anything else."""

    async def invoke(self, ctx: AgentContext) -> str:
        if ctx.text == "fail":
            raise LlamonApplicationError(
                "RATE_LIMITED", "quota_exhausted", retriable=True, retry_after_ms=2000
            )
        return f"quota ok: {ctx.text}"


async def ask(client: Client, text: str) -> str:
    """One agent call: its text, or the failed task's error data raised as a typed error
    (what the client's own exceptions carry)."""
    task = await send(client, user_message(text))
    if task.status.state == TaskState.failed:
        data = error_data(task)
        raise LlamonApplicationError(
            data["errorCode"],
            data["errorReason"],
            retriable=data["retriable"],
            retry_after_ms=data.get("retryAfterMs"),
        )
    return "".join(texts(task))


@asynccontextmanager
async def two_agents() -> AsyncIterator[tuple[Client, Client]]:
    async with AsyncExitStack() as stack:
        clients = []
        for agent in (Echo(), OutOfQuota()):
            url = await stack.enter_async_context(running_server(create_app(agent, make_card())))
            clients.append(await stack.enter_async_context(a2a_client(url)))
        yield clients[0], clients[1]


async def test_one_success_and_one_typed_failure_across_two_agents() -> None:
    async with two_agents() as (echo, limited):
        outcomes = await best_effort([ask(echo, "hi"), ask(limited, "fail")])
        with pytest.raises(LlamonApplicationError) as raised:
            await all_or_nothing([ask(echo, "hi"), ask(limited, "fail")])
        following = await ask(limited, "again")
        together = await all_or_nothing([ask(echo, "a"), ask(limited, "b")])

    assert outcomes[0].ok
    assert outcomes[0].value == "echo: hi"
    failure = outcomes[1]
    assert not failure.ok
    assert (failure.error_code, failure.reason, failure.retriable, failure.retry_after_ms) == (
        ErrorCode.RATE_LIMITED,
        "quota_exhausted",
        True,
        2000,
    )
    assert classify_exception(raised.value).as_tuple() == (
        ErrorCode.RATE_LIMITED,
        "quota_exhausted",
        True,
    )
    assert following == "quota ok: again"
    assert together == ["echo: a", "quota ok: b"]


class Booking:
    """Runs a saga whose last step fails (RATE_LIMITED) and whose first undo fails too."""

    async def invoke(self, ctx: AgentContext) -> str:
        async def reserve(step: StepContext) -> str:
            return "seat-1"

        async def release(step: StepContext, seat: str) -> None:
            raise ConnectionError("seat service gone")

        async def pay(step: StepContext) -> str:
            return await OutOfQuota().invoke(ctx)

        results = await Saga(saga_step(reserve, release), saga_step(pay)).run()
        return str(results)


async def test_an_agent_whose_saga_fails_answers_with_the_failing_steps_error_code() -> None:
    async with (
        running_server(create_app(Booking(), make_card())) as url,
        a2a_client(url) as client,
    ):
        task = await send(client, user_message("fail"))
        following = await send(client, user_message("ok"))
    assert task.status.state == TaskState.failed
    data = error_data(task)
    # the step's code and reason; not retriable: the seat could not be released
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        "RATE_LIMITED",
        "quota_exhausted",
        False,
    )
    assert "'pay'" in data["errorMessage"]
    assert "'reserve'" in data["errorMessage"]
    assert "retryAfterMs" not in data
    assert following.status.state == TaskState.completed
    assert texts(following) == ["['seat-1', 'quota ok: ok']"]
